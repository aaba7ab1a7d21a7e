import NIOCore
import NIOHTTP1
import StratusModel

/// One page of a zone's changes (what CloudKit's `recordZoneChanges(inZoneWith:since:)` returns).
public struct RecordZoneChanges: Sendable {
    /// A deleted record.
    public struct Deletion: Hashable, Sendable {
        /// The deleted record's ID.
        public var recordID: Record.ID
        /// The deleted record's type.
        public var recordType: String
    }

    /// Records created or changed since the token, in their latest state, each fetched or failed on
    /// its own (an asset file that could not be downloaded fails its record).
    public var modificationResultsByID: [Record.ID: Result<Record, CloudError>]
    /// Records deleted since the token. A record created and deleted since then also appears here:
    /// ignore deletions of records you never had.
    public var deletions: [Deletion]
    /// Where this page ends: store it once the page is applied, and read on from it.
    public var changeToken: ServerChangeToken
    /// Whether more changes follow; read again with ``changeToken``.
    public var moreComing: Bool
}

/// One page of a database's zone changes (what CloudKit's `databaseChanges(since:)` returns).
public struct DatabaseChanges: Sendable {
    /// A deleted zone.
    public struct Deletion: Hashable, Sendable {
        /// Why a zone is gone.
        public enum Reason: Sendable, Hashable {
            /// It was deleted.
            case deleted
        }
        /// The deleted zone.
        public var zoneID: RecordZone.ID
        /// Why it is gone.
        public var reason: Reason
    }

    /// Zones created, or with records changed, since the token: read their changes.
    public var modifications: [RecordZone.ID]
    /// Zones deleted since the token: drop your copy of them. A zone deleted and created again
    /// appears here and in ``modifications``.
    public var deletions: [Deletion]
    /// Where this page ends: store it once the page is applied, and read on from it.
    public var changeToken: ServerChangeToken
    /// Whether more changes follow; read again with ``changeToken``.
    public var moreComing: Bool
}

extension Database {
    /// One page of the changes in a custom zone since `changeToken` (CloudKit's
    /// `recordZoneChanges(inZoneWith:since:desiredKeys:resultsLimit:)`); `nil` reads from the
    /// beginning. Private and shared databases only.
    ///
    /// - Throws: ``CloudError`` `changeTokenExpired` when the server no longer knows what changed
    ///   since the token: read again from `nil` and drop local records the full read did not return.
    ///   `zoneNotFound` when the zone is gone.
    public func recordZoneChanges(
        inZoneWith zoneID: RecordZone.ID, since changeToken: ServerChangeToken?, desiredKeys: [String]? = nil,
        resultsLimit: Int? = nil
    ) async throws -> RecordZoneChanges {
        let reply = try await recordZoneChangesReply(
            inZoneWith: zoneID, since: changeToken, desiredKeys: desiredKeys, resultsLimit: resultsLimit)
        return try await recordZoneChanges(from: reply, zoneID: zoneID)
    }

    /// The pages of a custom zone's changes from `changeToken` to the end of its feed, each what
    /// ``recordZoneChanges(inZoneWith:since:desiredKeys:resultsLimit:)`` returns, read one page
    /// ahead: while you apply a page, the server prepares the next. Store each page's
    /// ``RecordZoneChanges/changeToken`` once you applied it; the sequence ends after the page whose
    /// ``RecordZoneChanges/moreComing`` is `false`, and throws what a page read throws.
    public func recordZoneChangePages(
        inZoneWith zoneID: RecordZone.ID, since changeToken: ServerChangeToken?, desiredKeys: [String]? = nil,
        resultsLimit: Int? = nil
    ) -> RecordZoneChangePages {
        RecordZoneChangePages(
            database: self, zoneID: zoneID, changeToken: changeToken, desiredKeys: desiredKeys, resultsLimit: resultsLimit)
    }

    /// The server's answer to a `records/changes` request, not yet decoded.
    fileprivate func recordZoneChangesReply(
        inZoneWith zoneID: RecordZone.ID, since changeToken: ServerChangeToken?, desiredKeys: [String]?,
        resultsLimit: Int?
    ) async throws -> Connection.Reply {
        let request = RecordChangesRequest(
            zoneID: wireZoneID(zoneID), syncToken: changeToken?.rawValue, resultsLimit: resultsLimit,
            desiredKeys: desiredKeys)
        return try await connection.send(
            .POST, .database(databaseScope, Endpoints.recordsChanges.erased), body: ByteBuffer(bytes: request.jsonBytes),
            idempotent: true)
    }

    /// One page of changes decoded from the server's answer, assets downloaded.
    fileprivate func recordZoneChanges(from reply: Connection.Reply, zoneID: RecordZone.ID) async throws -> RecordZoneChanges {
        let answer = try connection.decode(RecordChangesResponse.self, from: reply)
        var changedIDs: [Record.ID] = []
        var changed: [Result<Record, CloudError>] = []
        var deletions: [RecordZoneChanges.Deletion] = []
        for wire in answer.records {
            guard let recordName = wire.recordName else { continue }
            let recordID = Record.ID(recordName: recordName, zoneID: zoneID)
            if wire.deleted == true {
                deletions.append(.init(recordID: recordID, recordType: wire.recordType ?? ""))
            } else {
                changedIDs.append(recordID)
                changed.append(Result { () throws(CloudError) in try record(wire, zoneID: zoneID) })
            }
        }
        let modifications = Dictionary(zip(changedIDs, await downloadingAssets(of: changed))) { $1 }
        return RecordZoneChanges(
            modificationResultsByID: modifications, deletions: deletions,
            changeToken: ServerChangeToken(rawValue: answer.syncToken), moreComing: answer.moreComing)
    }

    /// One page of the zones changed in this database since `changeToken` (CloudKit's
    /// `databaseChanges(since:resultsLimit:)`); `nil` reads from the beginning. Private and shared
    /// databases only.
    ///
    /// - Throws: ``CloudError`` `changeTokenExpired`: read again from `nil`.
    public func databaseChanges(since changeToken: ServerChangeToken?, resultsLimit: Int? = nil) async throws -> DatabaseChanges {
        let answer = try await call(
            Endpoints.changesDatabase.erased, body: DatabaseChangesRequest(syncToken: changeToken?.rawValue, resultsLimit: resultsLimit),
            idempotent: true, as: DatabaseChangesResponse.self)
        var modifications: [RecordZone.ID] = []
        var deletions: [DatabaseChanges.Deletion] = []
        for zone in answer.zones {
            if zone.deleted == true {
                deletions.append(.init(zoneID: zoneID(zone.zoneID), reason: .deleted))
            } else {
                modifications.append(zoneID(zone.zoneID))
            }
        }
        return DatabaseChanges(
            modifications: modifications, deletions: deletions,
            changeToken: ServerChangeToken(rawValue: answer.syncToken), moreComing: answer.moreComing)
    }
}

/// The pages of one zone's change feed, read one page ahead (see
/// ``Database/recordZoneChangePages(inZoneWith:since:desiredKeys:resultsLimit:)``).
///
/// A Stratus server says in the head of each answer where the next page starts
/// (`X-Stratus-Sync-Token`, `X-Stratus-More-Coming`), so the request for page N + 1 goes out as soon
/// as page N arrives: the server prepares it while page N is decoded and applied. Without those
/// headers (another server) the next page is asked for once a page is decoded.
public struct RecordZoneChangePages: AsyncSequence, Sendable {
    public typealias Element = RecordZoneChanges
    public typealias Failure = any Error

    let database: Database
    let zoneID: RecordZone.ID
    let changeToken: ServerChangeToken?
    let desiredKeys: [String]?
    let resultsLimit: Int?

    /// Starts reading at the sequence's change token.
    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(pages: self, upcoming: .start(changeToken))
    }

    /// Reads the pages in order; the first call sends the first request.
    public struct AsyncIterator: AsyncIteratorProtocol {
        fileprivate enum Upcoming {
            case start(ServerChangeToken?)
            case requested(RequestAhead)
            case finished
        }

        fileprivate let pages: RecordZoneChangePages
        fileprivate var upcoming: Upcoming

        /// The next page, or `nil` after the last one (or after a failure was thrown).
        public mutating func next() async throws -> RecordZoneChanges? {
            let current = upcoming
            upcoming = .finished
            let reply: Connection.Reply
            switch current {
            case .finished: return nil
            case .start(let token): reply = try await pages.reply(since: token)
            case .requested(let request): reply = try await request.reply
            }
            if reply.headers.first(name: "X-Stratus-More-Coming") == "true",
                let next = reply.headers.first(name: "X-Stratus-Sync-Token")
            {
                let pages = pages
                upcoming = .requested(RequestAhead(Task { try await pages.reply(since: ServerChangeToken(rawValue: next)) }))
            }
            let page: RecordZoneChanges
            do {
                page = try await pages.database.recordZoneChanges(from: reply, zoneID: pages.zoneID)
            } catch {
                upcoming = .finished
                throw error
            }
            if !page.moreComing {
                upcoming = .finished
            } else if case .finished = upcoming {
                upcoming = .start(page.changeToken)
            }
            return page
        }
    }

    /// A request sent ahead of its use; cancelled when dropped unused.
    fileprivate final class RequestAhead: Sendable {
        private let task: Task<Connection.Reply, any Error>

        init(_ task: Task<Connection.Reply, any Error>) { self.task = task }

        var reply: Connection.Reply {
            get async throws {
                try await withTaskCancellationHandler { try await task.value } onCancel: { task.cancel() }
            }
        }

        deinit { task.cancel() }
    }

    /// The raw answer for the page that starts at `token`.
    private func reply(since token: ServerChangeToken?) async throws -> Connection.Reply {
        try await database.recordZoneChangesReply(
            inZoneWith: zoneID, since: token, desiredKeys: desiredKeys, resultsLimit: resultsLimit)
    }
}
