import Foundation
import Stratus

extension SyncEngine {
    /// Fetches the database's zone changes, then the record changes of each zone in scope that has some.
    func fetch(_ context: FetchChangesContext) async throws {
        guard let delegate else { return }
        guard await checkAccount(delegate) else { throw Self.notSignedIn }
        await emit(.willFetchChanges(.init(context: context)), to: delegate)
        do {
            if settings.automaticallySync { try await ensureSubscription() }
            try await fetchDatabaseChanges(delegate: delegate)
            try await fetchZoneChanges(context, delegate: delegate)
        } catch {
            if let error = error as? CloudError, error.keepsChangesPending { scheduleRetry(after: error, fetch: true) }
            await emit(.didFetchChanges(.init(context: context)), to: delegate)
            throw error
        }
        noteSuccess()
        noteFetched()
        await emit(.didFetchChanges(.init(context: context)), to: delegate)
    }

    /// Saves the database subscription the server notifies the engine through, once per user.
    private func ensureSubscription() async throws {
        let subscriptionID = settings.subscriptionID ?? "stratus-sync-\(transport.databaseScope.rawValue)"
        guard state.withSnapshot({ $0.subscriptionID }) != subscriptionID else { return }
        try await transport.saveSubscription(Subscription.database(subscriptionID: subscriptionID))
        state.withSnapshot { $0.subscriptionID = subscriptionID }
    }

    /// Reads the database's change feed: zones deleted are forgotten, zones changed are noted as
    /// having changes to fetch.
    private func fetchDatabaseChanges(delegate: any SyncEngineDelegate) async throws {
        var token = state.withSnapshot { $0.databaseChangeToken }
        // After the token expired: the zones the engine knew, less those the new read returns.
        var vanished: Set<RecordZone.ID>?
        while true {
            try Task.checkCancellation()
            let page: DatabaseChanges
            do {
                page = try await transport.databaseChanges(since: token)
            } catch let error as CloudError where error.code == .changeTokenExpired && token != nil {
                // Read the whole feed again: every zone is then fetched from its own token. It
                // names no deletion, so a zone known before that it does not return is gone.
                token = nil
                vanished = state.withSnapshot { Set($0.zoneChangeTokens.keys.filter { !$0.isDefault }) }
                continue
            }
            try await requireSameAccount(delegate)
            // A read again from the start keeps the expired token stored until its last page: cut
            // short, it starts over, and the zones it no longer returns are still found.
            let keepsToken = vanished == nil || !page.moreComing
            vanished?.subtract(page.modifications)
            var deletedZoneIDs = page.deletions.map(\.zoneID)
            if !page.moreComing, let gone = vanished.take() { deletedZoneIDs += gone.subtracting(deletedZoneIDs) }
            if !page.modifications.isEmpty || !deletedZoneIDs.isEmpty {
                await emit(
                    .fetchedDatabaseChanges(
                        .init(
                            modifications: page.modifications.map { .init(zoneID: $0) },
                            deletions: deletedZoneIDs.map { .init(zoneID: $0, reason: .deleted) })),
                    to: delegate)
            }
            state.withSnapshot { snapshot in
                for zoneID in deletedZoneIDs { snapshot.forgetZone(zoneID) }
                snapshot.markUnfetched(page.modifications)
                if keepsToken { snapshot.databaseChangeToken = page.changeToken }
            }
            await emitStateUpdate(to: delegate)
            token = page.changeToken
            guard page.moreComing else { return }
        }
    }

    /// Fetches the zones with changes that the delegate's options cover, prioritized zones first.
    private func fetchZoneChanges(_ context: FetchChangesContext, delegate: any SyncEngineDelegate) async throws {
        var options = context.options
        var visited = Set<RecordZone.ID>()
        while true {
            try Task.checkCancellation()
            options = await delegate.nextFetchChangesOptions(
                FetchChangesContext(reason: context.reason, options: options), syncEngine: self)
            let scope = options.scope
            let candidates = state.withSnapshot { snapshot in
                snapshot.unfetchedZoneIDs.filter { scope.contains($0) && !visited.contains($0) }
            }
            guard let zoneID = options.prioritizedZoneIDs.first(where: candidates.contains) ?? candidates.first else {
                return
            }
            visited.insert(zoneID)
            await emit(.willFetchRecordZoneChanges(.init(zoneID: zoneID)), to: delegate)
            do {
                try await fetchChanges(inZone: zoneID, delegate: delegate)
            } catch let error as CloudError {
                await emit(.didFetchRecordZoneChanges(.init(zoneID: zoneID, error: error)), to: delegate)
                // A zone that is gone was forgotten; other zones can still be fetched.
                if error.code == .zoneNotFound || error.code == .userDeletedZone { continue }
                throw error
            }
            await emit(.didFetchRecordZoneChanges(.init(zoneID: zoneID, error: nil)), to: delegate)
        }
    }

    /// The most records and deletions one `fetchedRecordZoneChanges` event gathers from the pages
    /// already read: fewer, larger events cost a delegate that applies each in one transaction
    /// fewer commits (each commit of random-keyed rows writes most B-tree pages it touched).
    static let changesPerFetchedEvent = 1_000

    /// Reads one zone's change feed from its token, page by page (the next pages are read while the
    /// delegate handles one event), handing the delegate up to ``changesPerFetchedEvent`` changes
    /// at a time before the token after them is stored.
    private func fetchChanges(inZone zoneID: RecordZone.ID, delegate: any SyncEngineDelegate) async throws {
        // Asked to read the zone again (``State/refetchAllZones()``): as after an expired token.
        let readsAgain = state.withSnapshot { $0.zonesToReadAgain?.contains(zoneID) == true }
        var token = readsAgain ? nil : state.withSnapshot { $0.zoneChangeTokens[zoneID] }
        // After the token expired: the records the delegate held, less those the new read returns.
        var vanished = readsAgain ? await delegate.recordsHeld(inZone: zoneID, syncEngine: self) : nil
        while true {
            do {
                var gathered = GatheredChanges()
                var lastGathered: RecordZoneChanges?
                for try await page in transport.recordZoneChangePages(inZoneWith: zoneID, since: token) {
                    try Task.checkCancellation()
                    try gathered.add(page)
                    if vanished != nil {
                        for recordID in page.modificationResultsByID.keys { vanished?[recordID] = nil }
                        for deletion in page.deletions { vanished?[deletion.recordID] = nil }
                    }
                    lastGathered = page
                    guard gathered.count >= Self.changesPerFetchedEvent || !page.moreComing else { continue }
                    // A read again from the start keeps the expired token stored until its last page
                    // (cut short, it starts over, and still finds what it no longer returns), whose
                    // changes carry the deletions it could not name.
                    let keepsToken = vanished == nil || !page.moreComing
                    if !page.moreComing, let gone = vanished.take() { gathered.add(deletions: gone) }
                    try await apply(gathered, ending: page, inZone: zoneID, keepsToken: keepsToken, delegate: delegate)
                    token = page.changeToken
                    gathered = GatheredChanges()
                    lastGathered = nil
                }
                // Pages read when the feed ended without saying so (a page whose `moreComing` was
                // not followed by another) are applied too.
                if let lastGathered {
                    if let gone = vanished.take() { gathered.add(deletions: gone) }
                    try await apply(gathered, ending: lastGathered, inZone: zoneID, keepsToken: true, delegate: delegate)
                }
                if readsAgain { state.withSnapshot { $0.readAgain(zoneID, done: true) } }
                return
            } catch let error as CloudError where error.code == .changeTokenExpired && token != nil {
                // The server no longer knows what changed since the token: read the zone again
                // from the beginning. It names no deletion, so what the delegate holds and the
                // read does not return was deleted meanwhile.
                token = nil
                vanished = await delegate.recordsHeld(inZone: zoneID, syncEngine: self)
            } catch let error as CloudError where error.code == .zoneNotFound || error.code == .userDeletedZone {
                state.withSnapshot { $0.forgetZone(zoneID) }
                throw error
            }
        }
    }

    /// Hands gathered changes to the delegate, then stores the token of the page they end with and
    /// hands over the state.
    private func apply(
        _ gathered: GatheredChanges, ending page: RecordZoneChanges, inZone zoneID: RecordZone.ID, keepsToken: Bool,
        delegate: any SyncEngineDelegate
    ) async throws {
        try await requireSameAccount(delegate)
        if gathered.count > 0 { await emit(.fetchedRecordZoneChanges(gathered.event), to: delegate) }
        state.withSnapshot { snapshot in
            if let permission = gathered.sharePermission {
                snapshot.sharePermissions = (snapshot.sharePermissions ?? [:]).merging([zoneID: permission.rawValue]) { $1 }
            }
            if keepsToken { snapshot.zoneChangeTokens[zoneID] = page.changeToken }
            if !page.moreComing { snapshot.unfetchedZoneIDs.removeAll { $0 == zoneID } }
        }
        await emitStateUpdate(to: delegate)
    }
}

/// Consecutive pages of one zone's feed, each record as the latest of them has it: saved (the
/// newest version) or deleted, never both.
struct GatheredChanges {
    private var modifications: [Record.ID: Record] = [:]
    private var deletions: [Record.ID: String] = [:]

    var count: Int { modifications.count + deletions.count }

    /// The signed-in user's permission in the zone, from its zone-wide share among the records.
    var sharePermission: Share.ParticipantPermission? {
        modifications.values.lazy.compactMap { record in
            Share(record).flatMap { share in
                share.recordID == Share(recordZoneID: share.recordID.zoneID).recordID ? share.currentUserParticipant?.permission : nil
            }
        }.first
    }

    /// Adds the next page; a record whose asset could not be downloaded fails it (it is read again).
    mutating func add(_ page: RecordZoneChanges) throws {
        for result in page.modificationResultsByID.values {
            let record = try result.get()
            deletions[record.recordID] = nil
            modifications[record.recordID] = record
        }
        for deletion in page.deletions {
            modifications[deletion.recordID] = nil
            deletions[deletion.recordID] = deletion.recordType
        }
    }

    /// Adds deletions the feed did not name (records it no longer returns).
    mutating func add(deletions gone: [Record.ID: String]) {
        for (recordID, recordType) in gone where modifications[recordID] == nil { deletions[recordID] = recordType }
    }

    /// The event handing them to the delegate.
    var event: SyncEngine.Event.FetchedRecordZoneChanges {
        .init(
            modifications: modifications.values.map { .init(record: $0) },
            deletions: deletions.map { .init(recordID: $0.key, recordType: $0.value) })
    }
}
