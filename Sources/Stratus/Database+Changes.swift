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

        package init(recordID: Record.ID, recordType: String) {
            self.recordID = recordID
            self.recordType = recordType
        }
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

    package init(
        modificationResultsByID: [Record.ID: Result<Record, CloudError>], deletions: [Deletion], changeToken: ServerChangeToken,
        moreComing: Bool
    ) {
        self.modificationResultsByID = modificationResultsByID
        self.deletions = deletions
        self.changeToken = changeToken
        self.moreComing = moreComing
    }
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
            inZoneWith: zoneID, since: changeToken, desiredKeys: desiredKeys, resultsLimit: resultsLimit, pagesAhead: nil,
            readsAhead: false)
        return try await recordZoneChanges(from: reply, zoneID: zoneID)
    }

    /// The pages of a custom zone's changes from `changeToken` to the end of its feed, each what
    /// ``recordZoneChanges(inZoneWith:since:desiredKeys:resultsLimit:)`` returns, read ahead: while
    /// you apply a page, the server prepares the next ones (up to ``RecordZoneChangePages/window``
    /// from a Stratus server, which says where they start). Store each page's
    /// ``RecordZoneChanges/changeToken`` once you applied it; the sequence ends after the page whose
    /// ``RecordZoneChanges/moreComing`` is `false`, and throws what a page read throws.
    public func recordZoneChangePages(
        inZoneWith zoneID: RecordZone.ID, since changeToken: ServerChangeToken?, desiredKeys: [String]? = nil,
        resultsLimit: Int? = nil
    ) -> RecordZoneChangePages {
        RecordZoneChangePages(
            database: self, zoneID: zoneID, changeToken: changeToken, desiredKeys: desiredKeys, resultsLimit: resultsLimit)
    }

    /// The server's answer to a `records/changes` request, not yet decoded; with `pagesAhead`, asking
    /// a Stratus server where up to that many pages after this one end. `readsAhead` tells it that
    /// this request is one of several pages requested at once, so that it does not read ahead itself.
    fileprivate func recordZoneChangesReply(
        inZoneWith zoneID: RecordZone.ID, since changeToken: ServerChangeToken?, desiredKeys: [String]?,
        resultsLimit: Int?, pagesAhead: Int?, readsAhead: Bool
    ) async throws -> Connection.Reply {
        let request = RecordChangesRequest(
            zoneID: wireZoneID(zoneID), syncToken: changeToken?.rawValue, resultsLimit: resultsLimit,
            desiredKeys: desiredKeys)
        var headers = HTTPHeaders()
        if let pagesAhead { headers.add(name: "X-Stratus-Pages-Ahead", value: String(pagesAhead)) }
        if readsAhead { headers.add(name: "X-Stratus-Reads-Ahead", value: "true") }
        return try await connection.send(
            .POST, .database(databaseScope, Endpoints.recordsChanges.erased), body: ByteBuffer(bytes: request.jsonBytes),
            headers: headers, idempotent: true)
    }

    /// One page of changes decoded from the server's answer, assets downloaded.
    fileprivate func recordZoneChanges(from reply: Connection.Reply, zoneID: RecordZone.ID) async throws -> RecordZoneChanges {
        let page = try connection.read(reply) { try decodeChangePage($0, zoneID: zoneID) }
        let modifications = Dictionary(
            zip(page.changed.map(\.id), await downloadingAssets(of: page.changed.map(\.result)))) { $1 }
        return RecordZoneChanges(
            modificationResultsByID: modifications, deletions: page.deletions,
            changeToken: ServerChangeToken(rawValue: page.syncToken), moreComing: page.moreComing)
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

/// The pages of one zone's change feed, read ahead (see
/// ``Database/recordZoneChangePages(inZoneWith:since:desiredKeys:resultsLimit:)``).
///
/// A Stratus server says in the head of each answer where the next page starts
/// (`X-Stratus-Sync-Token`, `X-Stratus-More-Coming`) and, asked with `X-Stratus-Pages-Ahead`, where
/// the pages after it end (`X-Stratus-Following-Sync-Tokens`). The sequence keeps up to
/// ``window`` requests out at once, so a long feed costs a round trip per window of pages rather
/// than per page; each answer is checked to start where the page before it ended, and when the zone
/// changed in between, the requests sent on a stale guess are dropped and the feed goes on from the
/// last page read. Without those headers (another server) the next page is asked for once a page is
/// decoded.
public struct RecordZoneChangePages: AsyncSequence, Sendable {
    public typealias Element = RecordZoneChanges
    public typealias Failure = any Error

    /// The most pages requested at once.
    public static let window = 32

    let database: Database
    let zoneID: RecordZone.ID
    let changeToken: ServerChangeToken?
    let desiredKeys: [String]?
    let resultsLimit: Int?

    /// Starts reading at the sequence's change token.
    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(pages: self)
    }

    /// Reads the pages in order; the first call sends the first request.
    public struct AsyncIterator: AsyncIteratorProtocol {
        fileprivate let pages: RecordZoneChangePages
        fileprivate var plan: FeedReadAhead<ServerChangeToken>
        /// The answers of ``FeedReadAhead/requested``, in the same order.
        fileprivate var replies: [RequestAhead] = []
        fileprivate var finished = false

        fileprivate init(pages: RecordZoneChangePages) {
            self.pages = pages
            self.plan = FeedReadAhead(start: pages.changeToken, window: RecordZoneChangePages.window)
        }

        /// The next page, or `nil` after the last one (or after a failure was thrown).
        public mutating func next() async throws -> RecordZoneChanges? {
            guard !finished else { return nil }
            requestPlannedPages()
            guard !replies.isEmpty else { return nil }
            let current = replies.removeFirst()
            let page: RecordZoneChanges
            do {
                let reply = try await current.reply
                let next = reply.headers.first(name: "X-Stratus-More-Coming") == "true"
                    ? reply.headers.first(name: "X-Stratus-Sync-Token").map(ServerChangeToken.init(rawValue:)) : nil
                if plan.answered(next: next, ends: Self.tokens(reply.headers)) { replies.removeAll() }
                // Before decoding: the server prepares the next pages meanwhile.
                requestPlannedPages()
                page = try await pages.database.recordZoneChanges(from: reply, zoneID: pages.zoneID)
            } catch {
                finish()
                throw error
            }
            if !page.moreComing {
                finish()
            } else if replies.isEmpty {
                plan.continue(from: page.changeToken)
            }
            return page
        }

        private mutating func requestPlannedPages() {
            for (start, asksAhead) in plan.pagesToRequest() {
                let pages = pages
                let pagesAhead = asksAhead ? plan.pagesAskedAhead : nil
                replies.append(RequestAhead(Task { try await pages.reply(since: start, pagesAhead: pagesAhead) }))
            }
        }

        private mutating func finish() {
            finished = true
            replies.removeAll()
        }

        /// The tokens of `X-Stratus-Following-Sync-Tokens`.
        private static func tokens(_ headers: HTTPHeaders) -> [ServerChangeToken] {
            guard let list = headers.first(name: "X-Stratus-Following-Sync-Tokens") else { return [] }
            return list.split(separator: ",").map { ServerChangeToken(rawValue: String($0.filter { $0 != " " })) }
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

    /// The raw answer for the page that starts at `token`; with `pagesAhead`, asking where up to that
    /// many pages after it end.
    private func reply(since token: ServerChangeToken?, pagesAhead: Int?) async throws -> Connection.Reply {
        try await database.recordZoneChangesReply(
            inZoneWith: zoneID, since: token, desiredKeys: desiredKeys, resultsLimit: resultsLimit, pagesAhead: pagesAhead,
            readsAhead: true)
    }
}

/// Which pages of a change feed to request, and when, for a reader that keeps up to `window`
/// requests out at once (``RecordZoneChangePages``): a pure plan over the feed's tokens.
///
/// Each answer says where the next page starts and, when its request asked ahead, where the pages
/// after that one end. Pages are requested from those starts; each answer must start where the page
/// before it ended. When one does not (the zone changed since the starts were handed out), the
/// requests after it were a stale guess: they are dropped and the feed goes on from the page read.
package struct FeedReadAhead<Token: Hashable & Sendable>: Sendable {
    /// The most pages requested at once.
    package let window: Int
    /// How many page ends a request that asks ahead asks for: two windows, so that the answer, which
    /// is read a window of pages after it was requested, still brings starts for the window after.
    package var pagesAskedAhead: Int { 2 * window }
    /// Pages requested and not yet answered, in feed order: where each starts and whether its request
    /// asks where the pages after it end.
    package private(set) var requested: [(start: Token?, asksAhead: Bool)] = []
    /// Where pages after the last one requested start, as far as known, not yet requested.
    private var starts: [Token?]

    /// A plan to read from `start` (`nil`: the feed's beginning).
    package init(start: Token?, window: Int) {
        self.window = window
        self.starts = [start]
    }

    /// The pages to request now, in order, moved to ``requested``: as many known starts as the window
    /// leaves room for. One request at a time asks where the pages after it end, once fewer than a
    /// window of starts remain to be requested: its answer is read after the window in front of it,
    /// and those pages' slots need that many starts meanwhile, or the window drains a round trip.
    package mutating func pagesToRequest() -> [(start: Token?, asksAhead: Bool)] {
        var pages: [(start: Token?, asksAhead: Bool)] = []
        while requested.count < window, !starts.isEmpty {
            let start = starts.removeFirst()
            let asksAhead = starts.count < window && !requested.contains(where: \.asksAhead)
            requested.append((start, asksAhead))
            pages.append((start, asksAhead))
        }
        return pages
    }

    /// The first requested page was answered: the page after it starts at `next` (`nil` when no
    /// more come, or the server did not say), and the pages after that one end at `ends` (when the
    /// request asked). Returns whether the other requested pages were dropped as a stale guess.
    package mutating func answered(next: Token?, ends: [Token]) -> Bool {
        requested.removeFirst()
        guard let next else {
            let dropped = !requested.isEmpty
            requested.removeAll()
            starts.removeAll()
            return dropped
        }
        let known = requested.map(\.start) + starts
        guard known.first == next else {
            let dropped = !requested.isEmpty
            requested.removeAll()
            starts = [next] + ends.map(Optional.some)
            return dropped
        }
        // Ends that disagree with the starts known are left out: each page is judged when it arrives.
        let overlap = Swift.min(known.count - 1, ends.count)
        if known[1..<(1 + overlap)].elementsEqual(ends[..<overlap].map(Optional.some)) {
            starts += ends[overlap...].map(Optional.some)
        }
        return false
    }

    /// Reads on from `token` where the server did not say where the next page starts until its page
    /// was decoded.
    package mutating func `continue`(from token: Token) {
        guard requested.isEmpty, starts.isEmpty else { return }
        starts = [token]
    }
}
