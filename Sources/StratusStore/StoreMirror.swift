import Foundation
import GRDB
import Stratus
import StratusSync
import Synchronization

/// Mirrors a store's synced tables to one database through a ``SyncEngine``: the store's outbox is
/// what to send (rebuilt into the engine at every start, and followed after every commit), fetched
/// records are applied in one transaction per fetched event as the author ``StratusStore/importAuthor``, and
/// a row changed on both sides is decided by the merge policy against the server record this device
/// last agreed on.
actor StoreMirror: SyncEngineDelegate {
    /// Whether a task to queue new outbox entries is about to start.
    private nonisolated let queueingScheduled = Atomic<Bool>(false)
    private let pool: DatabasePool
    private let capture: ChangeCapture
    private let configuration: StratusStore.Mirroring
    private let layout: MirrorLayout
    private let export: StoreExport
    private let sharing: StoreSharing
    /// Polls the public database while the store syncs by itself.
    private var pollingTask: Task<Void, Never>?
    private var engine: SyncEngine!
    private var inFlight: [Stratus.Record.ID: StoreExport.Sent] = [:]
    /// The highest outbox version handed to the engine.
    private var lastQueuedVersion: Int64 = 0
    private var zoneSaved = false
    private var lastCompleteFetch: Date?
    private var lastError: CloudError?
    /// Why a row's change waits for good: the server refused it, or it cannot be sent (in no share,
    /// unreadable for sending). By row, so that ``verify()`` reports what holds a pending row rather
    /// than an older failure of a row since sent.
    private var refusals: [UUID: CloudError] = [:]
    /// The rows whose change the server refused for good, kept in `stratusstore_refused`: not
    /// handed to the engine until the app resolves them (``resolveRefusedChange(_:_:)``).
    private var heldRows: Set<UUID> = []
    /// How many sends the server answered with a refusal for good, and the last such refusal:
    /// ``sync()`` throws when its send added one.
    private var refusedSends = 0
    /// How many changes merges queued again for the server: ``sync()`` sends again when its fetch did.
    private var requeuedByMerges = 0
    private var lastRefusal: CloudError?
    private var runningEvents: [StoreEvent.Kind: StoreEvent] = [:]
    private var fetchError: CloudError?
    /// Why fetched changes could not be applied (the disk is full, the file is read-only…): from then
    /// on the engine's state is no longer persisted, so they are fetched again at the next start.
    private var importFailure: CloudError?
    let remoteChanges = Broadcast<StoreRemoteChange>()
    let events = Broadcast<StoreEvent>()
    let refusedChanges = Broadcast<StoreRefusedChange>()

    private static let engineStateKey = "engine_state"
    private static let zoneSavedKey = "zone_saved"

    /// How long the history is kept (``StratusStore/open(_:model:mirroring:historyRetention:)``).
    private let historyRetention: Duration?
    /// When the history was last pruned by a sync the engine ran by itself.
    private var lastHistoryPrune = ContinuousClock.now

    init(
        pool: DatabasePool, model: StoreModel, capture: ChangeCapture, configuration: StratusStore.Mirroring,
        historyRetention: Duration?
    ) async throws {
        self.historyRetention = historyRetention
        let layout = MirrorLayout(model: model, configuration: configuration)
        let scope = layout.scope
        self.layout = layout
        export = StoreExport(layout: layout)
        sharing = StoreSharing(layout: layout)
        self.pool = pool
        self.capture = capture
        self.configuration = configuration
        let (state, zoneSaved) = try await pool.write { db in
            // Rows written before their table was mirrored were never captured: they go out now, in
            // the private database (in the public one they would become this user's records for
            // everyone; in the shared one, rows of no share).
            try StoreMetadata.adoptUncapturedRows(of: model, in: db, sending: scope == .private)
            let state = try StoreMetadata.value(Self.engineStateKey, in: db).flatMap(Data.fromDatabaseValue).map {
                try JSONDecoder().decode(SyncEngine.State.Serialization.self, from: $0)
            }
            return (state, try StoreMetadata.value(Self.zoneSavedKey, in: db).flatMap(Bool.fromDatabaseValue) ?? false)
        }
        // A store of the shared database makes no zone (its zones are the shares it accepted), nor
        // one of the public database (its records are in the default zone).
        self.zoneSaved = zoneSaved || scope != .private
        let setup = StoreEvent(kind: .setup)
        events.yield(setup)
        runningEvents[.setup] = setup
        engine = try SyncEngine(
            SyncEngine.Configuration(
                database: configuration.database, stateSerialization: state, delegate: self,
                // The public database has no change feed to fetch nor subscription to push: the
                // store sends and polls by itself.
                automaticallySync: configuration.automaticallySync && scope != .public))
        // An app upgrade that added columns to a synced table: the records of rows this device
        // holds are read again, their values for the new columns with them (rows were applied
        // without them). The columns are recorded in the transaction that keeps the engine's
        // request, so a crash before it asks again at the next start.
        let widened = try await pool.read { db in try StoreColumnVersions.widenedTables(of: model, in: db) }
        if !widened.isEmpty { engine.state.refetchAllZones() }
        // A new state belongs to the user signed in now (``SyncEngine``): kept at once, so that
        // rows written before the first sync stay theirs if another user signs in next.
        let engineState = state == nil || !widened.isEmpty
            ? try JSONEncoder().encode(engine.state.serialization().withoutPendingRecordZoneChanges()) : nil
        try await pool.write { db in
            if let engineState { try StoreMetadata.setValue(engineState, for: Self.engineStateKey, in: db) }
            try StoreColumnVersions.noteColumns(of: model, in: db)
        }
        if self.zoneSaved {
            end(.setup)
        } else {
            engine.state.add(pendingDatabaseChanges: [.saveZone(MirrorLayout.zone)])
        }
        // The outbox (and the records moved rows left) is the truth: what the engine's saved state
        // lists beyond it is settled. Refused changes wait for the app.
        let (outbox, moved, held) = try await pool.read { db in
            (try StoreMetadata.outbox(after: 0, in: db), try StoreMetadata.moved(in: db), try StoreMetadata.refusedChanges(in: db))
        }
        for refused in held {
            heldRows.insert(refused.rowID)
            refusals[refused.rowID] = refused.error
        }
        let placed = try await placeNewRows(outbox)
        let queued = Set(placed.compactMap(layout.change(for:)) + moved.map { .deleteRecord($0) })
        engine.state.remove(pendingRecordZoneChanges: engine.state.pendingRecordZoneChanges.filter { !queued.contains($0) })
        queue(placed, isWholeOutboxAfterMark: true)
        engine.state.add(pendingRecordZoneChanges: moved.map { .deleteRecord($0) })
        // An engine that syncs by itself is handed each commit's changes soon after it, so that it
        // schedules a send. Otherwise nothing sends before the app syncs, and the changes of every
        // commit since are handed over then, in one read of the outbox, off the app's writes.
        // Commits that come while a queueing is waiting to start are queued by it: one task at a
        // time, however fast the app commits.
        if scope == .public, configuration.automaticallySync { startPolling() }
        guard configuration.automaticallySync, scope != .public else { return }
        capture.afterCapturedCommit.withLock { action in
            action = { [weak self] in
                guard let self, self.queueingScheduled.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
                else { return }
                Task {
                    self.queueingScheduled.store(false, ordering: .releasing)
                    try? await self.queueNewOutboxEntries()
                }
            }
        }
    }

    /// Stops mirroring: no more commits are followed, the public database is no longer polled, and
    /// the engine's work ends. Returns when none of it runs.
    func close() async {
        capture.afterCapturedCommit.withLock { $0 = nil }
        pollingTask?.cancel()
        await pollingTask?.value
        pollingTask = nil
        await engine.close()
        remoteChanges.finish()
        events.finish()
        refusedChanges.finish()
    }

    deinit {
        pollingTask?.cancel()
    }

    /// Sends what is pending, then fetches what changed on the server (polls, in the public database).
    /// Throws, after fetching, when the server refused a change for good meanwhile: an edit it
    /// undid is never reported as synced.
    func sync() async throws {
        let refusedBefore = refusedSends
        try await queueNewOutboxEntries()
        do {
            try await engine.sendChanges()
        } catch let error as CloudError where error.code == .partialFailure {
            // Each item's failure was handled as it was reported.
        }
        let requeuedBefore = requeuedByMerges
        if layout.scope == .public {
            // A poll's merges must not land between a send and its answer (a second `sync()` while
            // automatic sync sends): the answer's confirmation would settle the change they requeued.
            try await engine.performExclusively { [self] in try await poll() }
        } else {
            try await engine.fetchChanges()
        }
        if requeuedByMerges > requeuedBefore {
            // What the fetch's merges decided the server needs (a local edit that won over a
            // deletion, a change that waited for the fetch) goes out in this sync too.
            do {
                try await engine.sendChanges()
            } catch let error as CloudError where error.code == .partialFailure {
                // Each item's failure was handled as it was reported.
            }
        }
        try await pruneHistory()
        if refusedSends > refusedBefore, let refusal = lastRefusal {
            throw CloudError(
                refusal.code,
                "the server refused a change in this sync, which waits on this device until the app resolves it "
                    + "(StratusStore.refusedChanges(), resolveRefusedChange(_:_:)): \(refusal.message)")
        }
    }

    /// Fetches read the store's zones alone, the zones of shares first: a row moved into a share by
    /// another device then arrives in its new zone before its delete from the zone it left.
    func nextFetchChangesOptions(
        _ context: SyncEngine.FetchChangesContext, syncEngine: SyncEngine
    ) async -> SyncEngine.FetchChangesOptions {
        let zoneIDs = syncEngine.state.zoneIDsWithUnfetchedServerChanges.filter(layout.ownsZone)
        return SyncEngine.FetchChangesOptions(scope: .zoneIDs(zoneIDs), prioritizedZoneIDs: zoneIDs.filter { $0 != layout.defaultZoneID })
    }

    /// Where mirroring stands.
    func status() async throws -> StoreSyncStatus {
        let (pending, refused) = try await pool.read { db in
            (try StoreMetadata.outboxCount(in: db), try StoreMetadata.refusedChanges(in: db).first)
        }
        let serverAhead = engine.state.zoneIDsWithUnfetchedServerChanges.contains(where: layout.ownsZone)
            || !engine.state.pendingDatabaseChanges.isEmpty
        // After a page failed to apply, its changes are fetched again only at the next start.
        return StoreSyncStatus(
            pendingChanges: pending, lastCompleteImport: lastCompleteFetch, lastError: importFailure ?? lastError ?? refused?.error,
            isUpToDate: pending == 0 && lastCompleteFetch != nil && !serverAhead && zoneSaved && importFailure == nil)
    }

    /// Syncs, then compares the digest of the local rows with the server's digest of each of the
    /// store's zones at a moment the server held still: read before and after the local digests at
    /// the same tokens.
    func verify() async throws -> StoreVerification {
        let database = configuration.database
        guard layout.scope != .public else {
            throw CloudError(
                .invalidArguments,
                "verify() compares zone digests, which come from change feeds; the public database has none")
        }
        for _ in 0..<3 {
            try await sync()
            var server: [RecordZone.ID: ZoneDigest] = [:]
            var tokens: [RecordZone.ID: ServerChangeToken] = [:]
            for zone in try await database.allRecordZones() where layout.ownsZone(zone.zoneID) {
                (server[zone.zoneID], tokens[zone.zoneID]) = try await database.zoneDigest(inZoneWith: zone.zoneID)
            }
            try await engine.fetchChanges()
            let (localRecords, pendingRows) = try await pool.read { [layout] db in try layout.localRecords(in: db) }
            let local = try localRecords.mapValues { try ZoneDigest(records: $0) }
            var moved = false
            for (zoneID, token) in tokens where try await database.zoneDigest(inZoneWith: zoneID).changeToken != token {
                moved = true
            }
            if let refusal = pendingRows.lazy.compactMap({ self.refusals[$0] }).first {
                // A change the server refuses stays in the outbox: the copies cannot be equal.
                throw refusal
            }
            guard !moved, pendingRows.isEmpty else { continue }
            // A zone of the server with no rows here counts as empty here.
            let empty = try ZoneDigest(records: [])
            var verification = StoreVerification(
                local: local.merging(server.keys.map { ($0, empty) }) { here, _ in here }, server: server)
            // Where the copies differ, the zone's records say how.
            for (zoneID, digest) in verification.local where server[zoneID] != digest {
                var serverRecords: [Stratus.Record] = []
                for try await page in database.recordZoneChangePages(inZoneWith: zoneID, since: nil) {
                    serverRecords += page.modificationResultsByID.values.compactMap { try? $0.get() }
                }
                verification.differences[zoneID] = try ZoneDigest.differences(
                    between: localRecords[zoneID] ?? [], and: serverRecords.filter { !RecordMapping.isMarkedDeleted($0) })
            }
            return verification
        }
        throw CloudError(
            .serviceUnavailable, "the store or its zones kept changing while it was verified; verify again when it is quiet")
    }

    /// Writes the model's record types into the development schema by saving a representative
    /// record of each synced table in a zone of its own, then deleting the zone; returns the schema
    /// in CloudKit's schema language.
    func initializeSchema() async throws -> String {
        // The schema is the container's, whatever the database: the records go to a zone of the
        // private database, which every user has.
        let database = configuration.database.container.privateCloudDatabase
        guard database.container.environment == .development else {
            throw CloudError(
                .invalidArguments,
                "initializeSchema() writes the development schema; this store's container is in production, whose "
                    + "schema changes only by deploying development's")
        }
        let zoneID = RecordZone.ID(zoneName: RecordMapping.zoneName + ".schema")
        try FileManager.default.createDirectory(at: configuration.assetDirectory, withIntermediateDirectories: true)
        let assetFile = configuration.assetDirectory.appendingPathComponent("schema-\(UUID().uuidString)")
        try Data([0]).write(to: assetFile)
        defer { try? FileManager.default.removeItem(at: assetFile) }
        let softDeletes = layout.scope == .public
        let (schema, records) = try await pool.read { [model = layout.model] db in
            (try StoreSchema.schema(of: model, softDeletes: softDeletes, in: db),
             try StoreSchema.representativeRecords(of: model, softDeletes: softDeletes, zoneID: zoneID, assetFile: assetFile, in: db))
        }
        _ = try await database.save(RecordZone(zoneID: zoneID))
        do {
            if let failure = try await database.modifyRecords(saving: records, deleting: []).partialFailure { throw failure }
        } catch {
            _ = try? await database.deleteRecordZone(withID: zoneID)
            throw error
        }
        _ = try await database.deleteRecordZone(withID: zoneID)
        return schema.text
    }

    // MARK: - The outbox into the engine

    /// Hands `entries` to the engine. When they are every outbox entry above `lastQueuedVersion`
    /// (`isWholeOutboxAfterMark`), the next queueing reads only what came after them; entries of
    /// some rows alone leave the mark, so that a change of another row between the two versions is
    /// still read.
    private func queue(_ entries: [PendingChange], isWholeOutboxAfterMark: Bool = false) {
        if isWholeOutboxAfterMark { lastQueuedVersion = max(lastQueuedVersion, entries.map(\.version).max() ?? 0) }
        guard !entries.isEmpty else { return }
        var changes: [SyncEngine.PendingRecordZoneChange] = []
        for entry in entries where !heldRows.contains(entry.rowID) {
            if let change = layout.change(for: entry) {
                changes.append(change)
            } else {
                let refusal = CloudError(
                    .invalidArguments,
                    "row \(entry.rowID) of '\(entry.table)' is in no share: a row written to a store of the shared database "
                        + "must reference a shared row, whose share it joins")
                lastError = refusal
                refusals[entry.rowID] = refusal
            }
        }
        engine.state.add(pendingRecordZoneChanges: changes)
    }

    private func queueNewOutboxEntries() async throws {
        let version = lastQueuedVersion
        queue(try await placeNewRows(try await pool.read { db in try StoreMetadata.outbox(after: version, in: db) }), isWholeOutboxAfterMark: true)
    }

    /// Places each new row that references a row of a share in that share's zone
    /// (``StoreExport/placeNewRows(_:in:)``); returns `entries` with the zones found. In the shared database, where every record is in a
    /// share's zone, a row deleted before it joined one was never on the server: its deletion is
    /// settled here, and left out.
    private func placeNewRows(_ entries: [PendingChange]) async throws -> [PendingChange] {
        var entries = entries
        let neverSent = { (entry: PendingChange) in entry.zoneID == nil && entry.operation == .delete }
        if layout.defaultZoneID == nil, entries.contains(where: neverSent) {
            let settled = entries.filter(neverSent)
            try await pool.write { db in
                try StoreMetadata.fold(in: db)
                for entry in settled { try StoreMetadata.confirm(entry, in: db) }
            }
            entries.removeAll(where: neverSent)
        }
        let unplaced = entries.filter { $0.zoneID == nil && $0.operation == .save }
        // Rows are placed in shares only where some row is in one (asked without taking the writer).
        guard !unplaced.isEmpty, try await pool.read(StoreMetadata.hasRowsInOtherZones) else { return entries }
        let placed = try await pool.write { [export] db in try export.placeNewRows(unplaced, in: db) }
        return entries.map { entry in
            var entry = entry
            entry.zoneID = entry.zoneID ?? placed[entry.rowID]
            return entry
        }
    }

    // MARK: - SyncEngineDelegate

    func nextRecordZoneChangeBatch(
        _ context: SyncEngine.SendChangesContext, syncEngine: SyncEngine
    ) async -> SyncEngine.RecordZoneChangeBatch? {
        // The front of the queue, a request's worth at a time (the whole queue would cost each batch
        // a copy of everything pending).
        var pending = syncEngine.state.pendingRecordZoneChanges(in: context.options.scope, limit: Self.operationsPerRequest)
        guard !pending.isEmpty else { return nil }
        do {
            // Rows are read a request's worth at a time, from the front of the queue, until a request
            // is full: a long outbox costs each batch one request's reads, not the whole outbox's.
            var sent: [Stratus.Record.ID: StoreExport.Sent] = [:]
            var records: [Stratus.Record.ID: Stratus.Record] = [:]
            var deletionChangeTags: [Stratus.Record.ID: String] = [:]
            var settled: [SyncEngine.PendingRecordZoneChange] = []
            var scanned = 0
            while sent.count < Self.operationsPerRequest {
                if scanned == pending.count {
                    // Changes the outbox settled or could not send left room: read further along.
                    pending = syncEngine.state.pendingRecordZoneChanges(
                        in: context.options.scope, limit: scanned + Self.operationsPerRequest)
                    guard scanned < pending.count else { break }
                }
                let chunk = Array(pending[scanned..<min(scanned + Self.operationsPerRequest, pending.count)])
                scanned += chunk.count
                // On the writer: the app's changes are folded into the outbox here, off the app's
                // writes, so that the batch reads each row's entry by key; and the writer's cache
                // holds the outbox, rows and records the last batches read and kept, where a
                // reader's starts empty after every commit (a pool's readers drop their caches when
                // the file changed), and read each page from the file again.
                let chunkBatch = try await pool.write { [export] db in
                    try StoreMetadata.fold(in: db)
                    return try export.changesToSend(chunk, in: db)
                }
                let (chunkSent, chunkRecords, unsendable) = (chunkBatch.sent, chunkBatch.records, chunkBatch.unsendable)
                // Each change is sent as the outbox has it now; one the outbox no longer lists is
                // settled. A row that cannot be read for sending stays queued, and the rest go.
                settled += chunk.filter { chunkSent[$0.recordID] == nil && unsendable[$0.recordID] == nil }
                if let failure = unsendable.values.first { lastError = failure }
                for (recordID, failure) in unsendable {
                    if let rowID = UUID(text: recordID.recordName) { refusals[rowID] = failure }
                }
                sent.merge(chunkSent) { $1 }
                records.merge(chunkRecords) { $1 }
                deletionChangeTags.merge(chunkBatch.deletionChangeTags) { $1 }
            }
            try await unqueue(settled)
            let toSave = records
            var batch = await SyncEngine.RecordZoneChangeBatch(
                pendingChanges: pending[..<scanned].filter { sent[$0.recordID] != nil }
            ) { toSave[$0] }
            let deleting = Set(batch?.recordIDsToDelete ?? [])
            batch?.deletionChangeTags = deletionChangeTags.filter { deleting.contains($0.key) }
            for recordID in (batch?.recordsToSave.map(\.recordID) ?? []) + (batch?.recordIDsToDelete ?? []) {
                inFlight[recordID] = sent[recordID]
            }
            return batch
        } catch {
            lastError = Self.cloudError(error)
            return nil
        }
    }

    /// The server's default operations per request: how many changes a batch is read for.
    private static let operationsPerRequest = 200

    /// The records of `zoneID` the store holds as the server had them, by the IDs in their system
    /// fields (another client may name a row's record in another case than this store would): after
    /// the zone's token expired, the engine hands back as deleted those the new full read does not
    /// return. Read on that rare occasion only, so each record's system fields are decoded.
    func recordsHeld(inZone zoneID: RecordZone.ID, syncEngine: SyncEngine) async -> [Stratus.Record.ID: String] {
        guard layout.ownsZone(zoneID) else { return [:] }
        do {
            let systemFields = try await pool.read { [defaultZoneID = layout.defaultZoneID] db in
                try StoreMetadata.systemFieldsOfServerRecords(inZone: zoneID == defaultZoneID ? nil : zoneID, in: db)
            }
            var held: [Stratus.Record.ID: String] = [:]
            for data in systemFields {
                let record = try Stratus.Record(systemFieldsData: data)
                // Named as the fetch names the zone's records.
                held[Stratus.Record.ID(recordName: record.recordID.recordName, zoneID: zoneID)] = record.recordType
            }
            return held
        } catch {
            lastError = Self.cloudError(error)
            return [:]
        }
    }

    func handleEvent(_ event: SyncEngine.Event, syncEngine: SyncEngine) async {
        do {
            switch event {
            case .stateUpdate(let update):
                // After a page failed to apply, the state (whose token is past it) is not kept: the
                // next start fetches from the last state that followed only applied pages.
                guard importFailure == nil else { break }
                // The outbox, not the engine's state, keeps what is left to send: every start
                // queues it again.
                let data = try JSONEncoder().encode(update.stateSerialization.withoutPendingRecordZoneChanges())
                try await pool.write { db in try StoreMetadata.setValue(data, for: Self.engineStateKey, in: db) }
            case .accountChange(let change):
                // The rows were the previous account's: they go, as Core Data's mirror purges them,
                // but those not sent yet are parked for that account, and come back when it signs
                // in here again. What was written while nobody was signed in stays in the outbox,
                // and goes to the account that signs in.
                let (previousUser, currentUser): (Stratus.Record.ID?, Stratus.Record.ID?) = switch change.changeType {
                case .signIn(let current): (nil, current)
                case .signOut(let previous): (previous, nil)
                case .switchAccounts(let previous, let current): (previous, current)
                }
                if let previousUser { try await purge(parkingFor: previousUser) }
                if let currentUser {
                    try await restoreParkedRows(of: currentUser)
                    if layout.scope == .private { syncEngine.state.add(pendingDatabaseChanges: [.saveZone(MirrorLayout.zone)]) }
                    try await queueAllOutboxEntries()
                }
            case .fetchedDatabaseChanges(let changes):
                for deletion in changes.deletions where layout.ownsZone(deletion.zoneID) {
                    // The store's own zone gone resets the store; a share's zone gone (sharing
                    // stopped, the participant left) takes its rows.
                    if deletion.zoneID == layout.defaultZoneID { try await purge() } else { try await purge(zone: deletion.zoneID) }
                }
            case .fetchedRecordZoneChanges(let changes):
                do {
                    try await importChanges(changes)
                } catch {
                    importFailure = Self.cloudError(error)
                    throw error
                }
            case .sentDatabaseChanges(let sent):
                if sent.savedZones.contains(where: { $0.zoneID.zoneName == RecordMapping.zoneName }) {
                    zoneSaved = true
                    try await pool.write { db in try StoreMetadata.setValue(true, for: Self.zoneSavedKey, in: db) }
                    end(.setup)
                } else if let failure = sent.failedZoneSaves.first, !failure.error.keepsChangesPending {
                    lastError = failure.error
                    end(.setup, error: failure.error)
                }
            case .sentRecordZoneChanges(let sent):
                try await settle(sent)
            case .willFetchRecordZoneChanges:
                break
            case .willFetchChanges:
                fetchError = nil
                begin(.import)
            case .didFetchRecordZoneChanges(let fetched):
                if let error = fetched.error { fetchError = error }
            case .didFetchChanges:
                if fetchError == nil { lastCompleteFetch = Date() }
                end(.import, error: fetchError)
                // The engine syncs by itself too: its imports prune the history now and then.
                if ContinuousClock.now - lastHistoryPrune > .seconds(60) { try await pruneHistory() }
            case .willSendChanges:
                begin(.export)
            case .didSendChanges:
                try removeSentAssetFiles()
                end(.export, error: runningEvents[.export]?.error)
            }
        } catch {
            let error = Self.cloudError(error)
            lastError = error
            fetchError = fetchError ?? error
        }
    }

    // MARK: - Import

    /// Applies a page of fetched changes in one transaction, as the author `import`.
    private func importChanges(_ changes: SyncEngine.Event.FetchedRecordZoneChanges) async throws {
        try await importRecords(
            changes.modifications.map(\.record), deletions: changes.deletions.map { ($0.recordID, $0.recordType) })
    }

    /// Applies records saved and deleted on the server in one transaction, as the author `import`,
    /// with `alsoWrite` (the position a poll reached) in the same transaction.
    private func importRecords(
        _ records: [Stratus.Record], deletions: [(recordID: Stratus.Record.ID, recordType: String)] = [],
        alsoWrite: (@Sendable (GRDB.Database) throws -> Void)? = nil
    ) async throws {
        let (outcome, transaction) = try await writeAsImport { [layout, capture] db in
            var merger = try StoreMerger(layout: layout, db: db)
            try merger.apply(page: records, deletions: deletions)
            try alsoWrite?(db)
            return (merger.outcome, capture.capturedTransaction())
        }
        try await hand(outcome)
        if let transaction { remoteChanges.yield(StoreRemoteChange(historyToken: HistoryToken(transaction: transaction))) }
    }

    /// Hands the engine what a merger changed in the outbox, after its transaction committed.
    private func hand(_ outcome: MergeOutcome) async throws {
        try await unqueue(outcome.settled)
        if !outcome.requeued.isEmpty {
            requeuedByMerges += outcome.requeued.count
            engine.state.add(pendingRecordZoneChanges: outcome.requeued)
        }
        if let unreadable = outcome.unreadable.last { lastError = CloudError(.invalidArguments, unreadable.reason) }
    }

    /// Takes `changes` out of the engine, then queues again what the outbox lists for their rows:
    /// a local write that landed meanwhile (and was queued under the same record ID) is not taken
    /// out with them.
    private func unqueue(_ changes: [SyncEngine.PendingRecordZoneChange]) async throws {
        guard !changes.isEmpty else { return }
        engine.state.remove(pendingRecordZoneChanges: changes)
        let rowIDs = changes.compactMap { UUID(text: $0.recordID.recordName) }
        queue(try await pool.read { db in try rowIDs.compactMap { try StoreMetadata.outboxEntry(rowID: $0, in: db) } })
    }

    // MARK: - Export

    /// Keeps what the server saved and deleted, and decides what it refused.
    private func settle(_ sent: SyncEngine.Event.SentRecordZoneChanges) async throws {
        let answered = sent.savedRecords.map(\.recordID) + sent.deletedRecordIDs + sent.failedRecordSaves.map(\.record.recordID)
            + Array(sent.failedRecordDeletes.keys)
        let sentNow = answered.reduce(into: [Stratus.Record.ID: StoreExport.Sent]()) { $0[$1] = inFlight.removeValue(forKey: $1) }
        let (outcome, settlement, transaction) = try await writeAsImport { [layout, export, capture] db in
            var merger = try StoreMerger(layout: layout, db: db)
            let settlement = try export.settle(sent, sent: sentNow, merger: &merger, at: Date())
            return (merger.outcome, settlement, capture.capturedTransaction())
        }
        refusals.merge(settlement.refusedRows) { $1 }
        heldRows.formUnion(settlement.refusedRows.keys)
        for zoneID in settlement.zonesGone {
            if zoneID == layout.defaultZoneID {
                zoneSaved = false
                engine.state.add(pendingDatabaseChanges: [.saveZone(MirrorLayout.zone)])
            } else {
                try await purge(zone: zoneID)
            }
        }
        try await hand(outcome)
        // A merge after a conflict rewrote rows.
        if let transaction { remoteChanges.yield(StoreRemoteChange(historyToken: HistoryToken(transaction: transaction))) }
        if !settlement.refusedRows.isEmpty {
            let refused = try await pool.read { db in try StoreMetadata.refusedChanges(in: db) }
            for change in refused where settlement.refusedRows[change.rowID] != nil { refusedChanges.yield(change) }
        }
        if let refused = settlement.refused {
            refusedSends += 1
            lastRefusal = refused
            lastError = refused
            runningEvents[.export]?.error = refused
        }
    }

    /// Settles a change the server refused, as the app chose: `revert` puts the row back as the
    /// server has it (its outbox entry goes); `sendAgain` sends it at the next sync (the user may
    /// write again, freed space, updated the app).
    func resolveRefusedChange(_ rowID: UUID, _ resolution: StoreRefusalResolution) async throws {
        // What to revert: the row's table and record. A large BLOB the row no longer holds was known
        // by its digest alone: the server's record is fetched to put it back.
        let target = try await pool.read { [layout] db -> (table: StoreTable, recordID: Stratus.Record.ID, fetch: Bool)? in
            guard resolution == .revert, let entry = try StoreMetadata.outboxEntry(rowID: rowID, in: db),
                let table = layout.model.table(named: entry.table)
            else { return nil }
            let zoneID = try StoreMetadata.zone(ofRow: rowID, in: db) ?? layout.defaultZoneID ?? MirrorLayout.zone.zoneID
            let fetch = try StoreMerger(layout: layout, db: db).needsServerRecordToRevert(table: table, rowID: rowID)
            return (table, RecordMapping.recordID(rowID, zoneID: zoneID), fetch)
        }
        var fetched: (server: Stratus.Record?, done: Bool) = (nil, false)
        if let target, target.fetch {
            do {
                fetched = (try await configuration.database.record(for: target.recordID), true)
            } catch let error as CloudError where error.code == .unknownItem {
                fetched = (nil, true)
            }
        }
        let reverted = try await writeAsImport { [layout, fetched] db -> MergeOutcome? in
            try StoreMetadata.dismissRefusedChanges([rowID], in: db)
            guard let target else { return nil }
            var merger = try StoreMerger(layout: layout, db: db)
            try merger.revert(target.recordID, table: target.table, rowID: rowID, fetched: fetched)
            return merger.outcome
        }
        heldRows.remove(rowID)
        refusals[rowID] = nil
        if let reverted {
            try await hand(reverted)
            try await announceChangedRows()
        } else {
            queue(try await pool.read { db in try StoreMetadata.outboxEntry(rowID: rowID, in: db) }.map { [$0] } ?? [])
        }
    }

    // MARK: - Polling the public database

    /// Sends, then polls, every `pollInterval`, until the store is dropped.
    private func startPolling() {
        let interval = configuration.pollInterval
        pollingTask = Task { [weak self] in
            while !Task.isCancelled {
                try? await self?.sync()
                try? await Task.sleep(for: interval)
            }
        }
    }

    /// Reads what changed in the public database since the last poll, record type by record type,
    /// by modification time (the public database has no change feed), and applies each page in one
    /// transaction with the position it reached.
    private func poll() async throws {
        fetchError = nil
        begin(.import)
        do {
            let poller = PublicDatabasePoller(database: configuration.database)
            for table in layout.model.syncedTables {
                guard case .synced(let recordType) = table.configuration else { continue }
                try await poller.poll(recordType, in: pool) { records, keepPosition in
                    try await importRecords(records, alsoWrite: keepPosition)
                }
            }
            lastCompleteFetch = Date()
            end(.import)
        } catch {
            let error = Self.cloudError(error)
            lastError = error
            end(.import, error: error)
            throw error
        }
    }

    // MARK: - Sharing

    /// Shares a row of the private database and the rows below it (Core Data's `share(_:to:)`): the
    /// first time, in a zone of their own with a zone-wide share that `configure` prepares, moving
    /// them there (each saved in the new zone and deleted from the one it left, through the
    /// outbox); a row already shared gives its share, configured and saved again.
    func share(_ rowID: UUID, configure: @Sendable (inout Share) -> Void) async throws -> Share {
        guard layout.scope == .private else {
            throw CloudError(
                .invalidArguments,
                "rows are shared by their owner's store, which mirrors the private database; this store mirrors the \(layout.scope.rawValue) one")
        }
        let database = configuration.database
        // What other devices changed is fetched first: the rows move with their latest values, and
        // the records they leave, deleted, hold no edit this device has not merged.
        try await engine.fetchChanges()
        let (zoneID, table) = try await pool.read { [layout] db in
            (try StoreMetadata.zone(ofRow: rowID, in: db), try layout.table(holding: rowID, in: db))
        }
        guard table != nil else { throw CloudError(.unknownItem, "no synced table of the store has a row \(rowID)") }
        if let zoneID {
            var share = try await existingShare(in: zoneID) ?? Share(recordZoneID: zoneID)
            configure(&share)
            return try await database.save(share)
        }
        let shareZoneID = RecordZone.ID(zoneName: MirrorLayout.shareZonePrefix + UUID().uuidString.lowercased())
        _ = try await database.save(RecordZone(zoneID: shareZoneID))
        var share = Share(recordZoneID: shareZoneID)
        configure(&share)
        share = try await database.save(share)
        // The rows are gathered in the transaction that moves them: a row added below them
        // meanwhile moves too. The move waits for a send in flight, whose answer would otherwise
        // settle a moved row's entry as sent (to the zone it left) or remember its record there.
        let (leftBehind, entries) = try await engine.performExclusively { [pool, sharing] in
            try await pool.write { db in try sharing.move(rowID, into: shareZoneID, in: db) }
        }
        queue(entries)
        engine.state.add(pendingRecordZoneChanges: leftBehind.map { .deleteRecord($0) })
        do {
            try await engine.sendChanges()
        } catch let error as CloudError where error.code == .partialFailure || error.keepsChangesPending {
            // What was not sent stays in the outbox for the next send.
        }
        return share
    }

    /// The share of the zone a row is in; `nil` for a row that is not shared.
    func share(of rowID: UUID) async throws -> Share? {
        guard let zoneID = try await pool.read({ db in try StoreMetadata.zone(ofRow: rowID, in: db) }) else { return nil }
        return try await existingShare(in: zoneID)
    }

    private func existingShare(in zoneID: RecordZone.ID) async throws -> Share? {
        do {
            return Share(try await configuration.database.record(for: Share(recordZoneID: zoneID).recordID))
        } catch let error as CloudError where error.code == .unknownItem {
            return nil
        }
    }

    /// Ends the sharing of a row's share: its owner stops sharing (the rows stay, in their zone); a
    /// participant leaves, and the share's rows leave this device.
    func stopSharing(_ rowID: UUID) async throws {
        guard let zoneID = try await pool.read({ db in try StoreMetadata.zone(ofRow: rowID, in: db) }) else {
            throw CloudError(.invalidArguments, "row \(rowID) is not shared")
        }
        do {
            _ = try await configuration.database.deleteRecord(withID: Share(recordZoneID: zoneID).recordID)
        } catch let error as CloudError where error.code == .unknownItem || error.code == .zoneNotFound {
            // Already stopped.
        }
        if layout.scope == .shared {
            try await purge(zone: zoneID)
        } else {
            try await pool.write { db in try StoreMetadata.setSharePermission(nil, zone: zoneID, in: db) }
        }
    }

    /// Accepts a share into a store of the shared database, then fetches its rows.
    func accept(_ metadata: Share.Metadata) async throws {
        guard layout.scope == .shared else {
            throw CloudError(
                .invalidArguments,
                "shares are accepted into a store of the shared database (container.sharedCloudDatabase); this one mirrors the \(layout.scope.rawValue) one")
        }
        try await configuration.database.container.accept(metadata)
        try await sync()
    }

    /// Whether the signed-in user may change and delete a row: always in their own database; in
    /// the shared one, where the row's share gives them read-and-write permission.
    func canWrite(_ rowID: UUID) async throws -> Bool {
        switch layout.scope {
        case .private:
            return true
        case .shared:
            return try await pool.read { [sharing] db in try sharing.mayWriteSharedRow(rowID, in: db) }
        case .public:
            let creator = try await pool.read { [sharing] db in try sharing.creator(ofRow: rowID, in: db) }
            guard let creator else { return true }
            return creator.recordName == (try await configuration.database.container.userRecordID()).recordName
        }
    }

    // MARK: - Purging

    /// Removes every synced row and what the mirror knew of them, as the author `import`; with
    /// `user`, the rows the outbox lists are parked for that user first, in the same transaction.
    private func purge(parkingFor user: Stratus.Record.ID? = nil) async throws {
        try await writeAsImport { [layout, model = layout.model] db in
            if let user { _ = try StoreParking.park(user.recordName, layout: layout, in: db) }
            try StoreMetadata.clearOutbox(in: db)
            for table in model.syncedTables { try db.execute(sql: "DELETE FROM \(table.name.quotedDatabaseIdentifier)") }
            try db.execute(
                sql: """
                    DELETE FROM stratusstore_records;
                    DELETE FROM stratusstore_row_zones; DELETE FROM stratusstore_moved; DELETE FROM stratusstore_shares;
                    DELETE FROM stratusstore_refused;
                    DELETE FROM stratusstore_mirror WHERE key = '\(Self.zoneSavedKey)' OR key LIKE '\(PublicDatabasePoller.positionPrefix)%';
                    """)
        }
        zoneSaved = layout.scope != .private
        heldRows = []
        engine.state.remove(pendingRecordZoneChanges: engine.state.pendingRecordZoneChanges)
        try await announceChangedRows()
    }

    /// Removes the rows of a share's zone and what the mirror knew of them, as the author `import`:
    /// the zone is gone (its owner stopped sharing, this participant left).
    func purge(zone zoneID: RecordZone.ID) async throws {
        try await writeAsImport { [layout] db in
            for (tableName, rowID) in try StoreMetadata.rows(inZone: zoneID, in: db) {
                guard let table = layout.model.table(named: tableName) else { continue }
                try layout.mapping.delete(rowID: rowID, from: table, columns: StoreColumns(table, in: db), in: db)
            }
            try StoreMetadata.forgetZone(zoneID, in: db)
        }
        engine.state.remove(pendingRecordZoneChanges: engine.state.pendingRecordZoneChanges.filter { $0.recordID.zoneID == zoneID })
        try await announceChangedRows()
    }

    /// Puts back the rows `user` had not sent when they left this device, with their outbox entries.
    private func restoreParkedRows(of user: Stratus.Record.ID) async throws {
        let restored = try await writeAsImport { [layout] db in try StoreParking.restore(user.recordName, layout: layout, in: db) }
        if restored > 0 { try await announceChangedRows() }
    }

    private func announceChangedRows() async throws {
        remoteChanges.yield(StoreRemoteChange(historyToken: try await pool.read { db in
            HistoryToken(transaction: try Int64.fetchOne(db, sql: "SELECT coalesce(max(id), 0) FROM stratusstore_transactions") ?? 0)
        }))
    }

    private func queueAllOutboxEntries() async throws {
        queue(try await placeNewRows(try await pool.read { db in try StoreMetadata.outbox(after: 0, in: db) }), isWholeOutboxAfterMark: true)
    }

    // MARK: - Staying small

    /// Deletes the history older than the retention.
    private func pruneHistory() async throws {
        lastHistoryPrune = ContinuousClock.now
        guard let historyRetention else { return }
        try await pool.write { db in try StoreHistory.delete(olderThan: historyRetention, in: db) }
    }

    /// Removes the files of outgoing assets once a send ended with none on its way: each is
    /// written again from its row when a later batch needs it (they are named by their content).
    /// The store's own names alone (64 hexadecimal digits): the folder may hold the app's files.
    private func removeSentAssetFiles() throws {
        guard inFlight.isEmpty else { return }
        let directory = configuration.assetDirectory
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory.path) else { return }
        for name in names where name.count == 64 && name.allSatisfy(\.isHexDigit) {
            try? FileManager.default.removeItem(at: directory.appendingPathComponent(name))
        }
    }

    // MARK: - Helpers

    /// Writes as the author `import`, the outbox folded first (merges read it row by row).
    private func writeAsImport<T: Sendable>(_ body: @escaping @Sendable (GRDB.Database) throws -> T) async throws -> T {
        try await pool.write { [capture] db in
            try StoreMetadata.fold(in: db)
            return try capture.writing(as: StratusStore.importAuthor) { try body(db) }
        }
    }

    private func begin(_ kind: StoreEvent.Kind) {
        let event = StoreEvent(kind: kind)
        runningEvents[kind] = event
        events.yield(event)
        capture.checkpointer?.syncing = isSyncing
    }

    /// Whether an import or an export is running.
    private var isSyncing: Bool { runningEvents[.import] != nil || runningEvents[.export] != nil }

    private func end(_ kind: StoreEvent.Kind, error: CloudError? = nil) {
        guard var event = runningEvents.removeValue(forKey: kind) else { return }
        event.endDate = Date()
        event.error = error
        event.succeeded = error == nil
        events.yield(event)
        capture.checkpointer?.syncing = isSyncing
    }

    private static func cloudError(_ error: any Error) -> CloudError {
        error as? CloudError ?? CloudError(.internalError, "\(error)")
    }
}
