import StratusModel
import StratusStorage
import Synchronization

/// One page of a zone's changes as `records/changes` answers it:
/// `{"zoneID", "records", "syncToken", "moreComing"}`, and where it was read.
struct ZoneChangesPage: Sendable {
    /// The page's JSON.
    var body: [UInt8]
    /// The zone's name and database.
    var zoneName: String
    var locator: DatabaseLocator
    /// The most records a page holds (`resultsLimit`).
    var limit: Int
    /// Where the page ends.
    var position: ChangePosition
    var syncToken: String
    var moreComing: Bool
    /// Records read for it (the metrics' count), before any the caller may not see were left out.
    var recordsRead: Int
}

/// One page of a zone's changes, its records read and its JSON not yet written: where the page after
/// it starts is known, so that page can be read while this one is written.
struct ZoneChangesRead: Sendable {
    /// Where the page ends.
    var syncToken: String
    /// Whether more pages follow it.
    var moreComing: Bool
    /// The size of its records' fields, most of the page's size.
    var fieldBytes: Int
    /// Writes the page.
    var write: @Sendable () -> ZoneChangesPage
}

/// Change-feed pages (`records/changes`, `changes/zone` for one zone) read before they are asked for. A client that reads a feed page by page,
/// as Apple's protocol has it (each request carries the `syncToken` of the page before), leaves the
/// server idle while a page travels and the client reads it; the server uses that time to read and
/// write the next page on another core, and hands it over when the request for it comes. A page's
/// successor is read as soon as the page's records are, while the page is written.
///
/// A page read ahead is what the request would have read had it come at once, when its token was
/// known. It is handed over only when more pages follow it (`moreComing`): a change made since it
/// was read has a later position than every record in it, so the client, which reads on, meets that
/// change in a later page, read afresh at the latest for the feed's last page. A record changed in
/// between shows its earlier version first, as in any feed read while writes go on; a zone deleted
/// in between answers the next request with its error. Pages are kept only for a database's owner
/// reading their private database (no per-record access to check again), only for plain requests (a
/// client that asks for page ends, or sends `X-Stratus-Reads-Ahead: true`, keeps several pages
/// requested itself), and they are bounded in number, size and age.
final class FeedPagePrefetch: Sendable {
    /// What a page's bytes depend on: the request as the client will send it, and who reads where.
    struct Key: Hashable, Sendable {
        /// The request, with the `syncToken` of the page before.
        var request: RecordChangesRequest
        var locator: DatabaseLocator
        /// The server's URL as the client reaches it, which asset and share URLs begin with.
        var baseURL: String
    }

    /// Reads the records of the page a key names.
    typealias Read = @Sendable (_ request: RecordChangesRequest) async throws -> ZoneChangesRead

    private struct Entry {
        /// Reads and writes the page.
        let reading: Task<ZoneChangesPage?, Never>
        let startedAt: Int64
        /// The key of the page after this one, once this one's records are read (when more follow
        /// and its records' fields are within ``maxPageBytes``).
        var successor: Key?
        /// How many of the pages after this one to read once its records are read.
        var following: Int
    }

    /// How many pages a feed is read ahead of the page last handed over: two, so that one is read
    /// while the one before waits to be asked for.
    static let depth = 2

    /// The most pages kept or being read at once.
    static let maxPages = 32
    /// Pages larger than this, or whose records' fields are, are not kept (their records are large:
    /// the read dominates anyway).
    static let maxPageBytes = 1 << 20
    /// A page not asked for within this long is dropped.
    static let maxAgeMilliseconds: Int64 = 30_000

    private let entries = Mutex<[Key: Entry]>([:])
    private let clock: ServerClock

    /// Creates an empty set of pages, aged by `clock`.
    init(clock: ServerClock) {
        self.clock = clock
    }

    /// How many pages are kept or being read.
    var count: Int { entries.withLock { $0.count } }

    /// Makes sure the page `key` names and the `depth - 1` pages after it are read or being read
    /// with `read` (each page's successor is known once its records are read), within the bound on
    /// pages.
    func readAhead(_ key: Key, depth: Int, read: @escaping Read) {
        guard depth > 0 else { return }
        let now = clock.milliseconds
        let readNext: Key? = entries.withLock { entries -> Key? in
            entries = entries.filter { now - $0.value.startedAt < Self.maxAgeMilliseconds }
            if var entry = entries[key] {
                guard depth - 1 > entry.following else { return nil }
                entry.following = depth - 1
                entries[key] = entry
                // Records read already: the successor can start now; otherwise it starts once they are.
                return entry.successor
            }
            guard entries.count < Self.maxPages else { return nil }
            let reading = Task { [self] () -> ZoneChangesPage? in
                // A page that fails to read is read again, with its error, when it is asked for.
                guard let records = try? await read(key.request), records.fieldBytes <= Self.maxPageBytes else {
                    return nil
                }
                var successor: Key?
                if records.moreComing {
                    successor = key
                    successor?.request.syncToken = records.syncToken
                }
                let following = self.entries.withLock { entries -> Int in
                    guard var entry = entries[key] else { return 0 }
                    entry.successor = successor
                    entries[key] = entry
                    return entry.following
                }
                if let successor { readAhead(successor, depth: following, read: read) }
                let page = records.write()
                return page.body.count <= Self.maxPageBytes ? page : nil
            }
            entries[key] = Entry(reading: reading, startedAt: now, successor: nil, following: depth - 1)
            return nil
        }
        if let readNext { readAhead(readNext, depth: depth - 1, read: read) }
    }

    /// Takes the page prepared for `key` (waiting for its read to finish); `nil` when there is none,
    /// it failed, or it is too old.
    func take(_ key: Key) async -> ZoneChangesPage? {
        let now = clock.milliseconds
        guard let entry = entries.withLock({ $0.removeValue(forKey: key) }),
            now - entry.startedAt < Self.maxAgeMilliseconds
        else { return nil }
        return await entry.reading.value
    }
}
