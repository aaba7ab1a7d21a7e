public import Foundation
public import GRDB
public import Stratus
import Synchronization

/// The app's own SQLite database, mirrored to a Stratus server: the app reads and writes its tables
/// with GRDB, and the store captures every change to the synced ones (``StoreModel``) in the same
/// transaction, with its author, for the mirror and for the app's own persistent history.
///
/// Open the store on the app's `DatabasePool` before writing to a synced table: the capture's
/// triggers need the functions the store registers on the pool's writer.
public final class StratusStore: Sendable {
    /// The author of writes made without ``write(author:_:)``: the app's own.
    public static let appAuthor = "app"
    /// The author of what the store applies from the server.
    public static let importAuthor = "import"

    /// The app's database.
    public let pool: DatabasePool
    /// The declared tables.
    public let model: StoreModel
    private let capture: ChangeCapture
    private let mirror: StoreMirror?
    private let isClosed = Atomic<Bool>(false)

    private init(pool: DatabasePool, model: StoreModel, capture: ChangeCapture, mirror: StoreMirror?) {
        self.pool = pool
        self.model = model
        self.capture = capture
        self.mirror = mirror
    }

    /// How long the store keeps its history by default: a week.
    public static let defaultHistoryRetention: Duration = .seconds(7 * 24 * 3_600)

    /// Opens a store over `pool`: checks `model` against the tables and the rules of mirroring
    /// (throwing ``StoreModelError`` with every rule it breaks), installs the change capture and,
    /// with `mirroring`, starts mirroring the synced tables to its database.
    ///
    /// The history (``history(after:excludingAuthors:limit:)``) keeps each transaction for
    /// `historyRetention` (a week by default), then the store deletes it, when it opens and after
    /// syncs, so that a store that synced millions of changes holds only its recent history. Pass
    /// `nil` to keep the history until the app deletes it with ``deleteHistory(before:)``, as Core
    /// Data's persistent history is kept until purged. The mirror itself needs none of it once a
    /// change is in the outbox.
    ///
    /// - Throws: `CloudError` `invalidArguments` while another store is open (or opening) on the
    ///   same pool: its triggers would report to the second store, and the first would stop mirroring.
    public static func open(
        _ pool: DatabasePool, model: StoreModel, mirroring: Mirroring? = nil,
        historyRetention: Duration? = StratusStore.defaultHistoryRetention
    ) async throws -> StratusStore {
        let key = ObjectIdentifier(pool)
        try openStores.withLock { stores in
            switch stores[key] {
            case .opening?:
                throw CloudError(.invalidArguments, "a store is being opened on this pool already: open one store per pool")
            case .open(let store)? where store.value != nil:
                throw CloudError(.invalidArguments, "a store is open on this pool already: open one store per pool, and share it")
            default:
                stores[key] = .opening
            }
        }
        do {
            let store = try await openUnregistered(pool, model: model, mirroring: mirroring, historyRetention: historyRetention)
            openStores.withLock { $0[key] = .open(WeakStore(value: store)) }
            return store
        } catch {
            openStores.withLock { $0[key] = nil }
            throw error
        }
    }

    private static func openUnregistered(
        _ pool: DatabasePool, model: StoreModel, mirroring: Mirroring?, historyRetention: Duration?
    ) async throws -> StratusStore {
        let violations = try await pool.read { db in try StoreModelChecker.violations(of: model, in: db) }
        guard violations.isEmpty else { throw StoreModelError(violations: violations) }
        let capture = try await ChangeCapture.install(model, on: pool)
        if let historyRetention {
            try await pool.write { db in try StoreHistory.delete(olderThan: historyRetention, in: db) }
        }
        var mirror: StoreMirror?
        if let mirroring {
            mirror = try await StoreMirror(
                pool: pool, model: model, capture: capture, configuration: mirroring, historyRetention: historyRetention)
        }
        return StratusStore(pool: pool, model: model, capture: capture, mirror: mirror)
    }

    /// The store of each pool, while it lives (a pool outlives no store of it: the store holds it).
    private enum Registration {
        case opening
        case open(WeakStore)
    }

    private struct WeakStore {
        weak var value: StratusStore?
    }

    private static let openStores = Mutex<[ObjectIdentifier: Registration]>([:])

    // MARK: Mirroring

    /// Sends every local change the server has not confirmed, then applies what changed on the
    /// server. A store opened with ``Mirroring/automaticallySync`` does both by itself.
    ///
    /// - Throws: `CloudError`: a passing one (the network, the server unavailable) leaves every
    ///   change pending for the next sync; `invalidArguments` when the store was opened without mirroring.
    public func sync() async throws {
        try await requireMirror().sync()
    }

    /// The local changes the server refused for good, the latest first: a participant who may
    /// only read edited a shared row (check ``canUpdate(_:)`` before offering an edit; the store
    /// refuses such a change itself, before sending, once it fetched the share), the user's quota
    /// is full, the schema or a newer version of the app refuses a value. Each row stays as the
    /// user left it, its change kept and not sent again, across launches, until the app resolves
    /// it with ``resolveRefusedChange(_:_:)``; the ``sync()`` that met the refusal threw it, and
    /// ``refusals()`` announces each.
    ///
    /// - Throws: `CloudError` `invalidArguments` when the store was opened without mirroring.
    public func refusedChanges() async throws -> [StoreRefusedChange] {
        _ = try requireMirror()
        return try await pool.read { db in try StoreMetadata.refusedChanges(in: db) }
    }

    /// Settles a refused change of the row `rowID` as the app chose (CloudKit's `failedRecordSaves`
    /// leave the choice to the app): ``StoreRefusalResolution/revert`` puts the row back as the
    /// server has it, ``StoreRefusalResolution/sendAgain`` sends the row's change at the next sync.
    public func resolveRefusedChange(_ rowID: UUID, _ resolution: StoreRefusalResolution) async throws {
        try await requireMirror().resolveRefusedChange(rowID, resolution)
    }

    /// Each local change the server refuses for good, as it is refused (the callback of
    /// ``refusedChanges()``), until the stream is dropped. Empty for a store opened without mirroring.
    public func refusals() -> AsyncStream<StoreRefusedChange> {
        mirror?.refusedChanges.stream() ?? AsyncStream { $0.finish() }
    }

    /// Where mirroring stands: how many local changes wait, and whether everything local is on the
    /// server and the last import reached the server's latest changes.
    public func syncStatus() async throws -> StoreSyncStatus {
        try await requireMirror().status()
    }

    /// Writes the record types and fields of the synced tables into the server's development schema
    /// (as Core Data's `initializeCloudKitSchema` does: by saving a representative record of each,
    /// in a zone it then deletes) and returns that schema in CloudKit's schema language, to review
    /// and to deploy to production. Run it in development whenever the model changes.
    ///
    /// - Throws: `CloudError` `invalidArguments` for a container in production, whose schema only
    ///   changes by deploying development's; what the saves throw.
    public func initializeSchema() async throws -> String {
        try await requireMirror().initializeSchema()
    }

    /// Proves the local copy equal to the server's, or shows it is not (verifiable sync): syncs, then
    /// compares a digest of every synced row, mapped to records as they are sent, with the server's
    /// digest of the zone (`records/digest`), taken while neither side changed.
    ///
    /// - Throws: `CloudError` as ``sync()`` does; `serviceUnavailable` when local writes or other
    ///   devices kept changing the data through three attempts.
    public func verify() async throws -> StoreVerification {
        try await requireMirror().verify()
    }

    // MARK: Sharing

    /// Shares a row and the rows below it (those that reference it through a relationship, and
    /// theirs: a list and its items), as Core Data's `share(_:to:)` does: the first time, the rows
    /// move into a zone of their own (`com.stratus.store.share.<UUID>`) with a zone-wide share, which
    /// `configure` prepares (title, participants, public permission) before it is saved. A row
    /// already shared gives its share, configured and saved again. Rows added later below a shared
    /// row join its share. Send the returned share's `Share/url` to the participants.
    ///
    /// - Throws: `CloudError` `invalidArguments` for a store of the shared database (only owners
    ///   share) or one opened without mirroring; `unknownItem` when no synced table has the row;
    ///   what the server answers for the zone and the share.
    public func share(_ rowID: UUID, configure: @Sendable (inout Share) -> Void = { _ in }) async throws -> Share {
        try await requireMirror().share(rowID, configure: configure)
    }

    /// The share a row is in, as the server has it now; `nil` for a row that is not shared.
    public func share(of rowID: UUID) async throws -> Share? {
        try await requireMirror().share(of: rowID)
    }

    /// Stops the sharing of a row's share: in the owner's store the share is deleted and the rows
    /// stay; in a participant's store (the shared database) the participant leaves, and the share's
    /// rows leave the device.
    public func stopSharing(_ rowID: UUID) async throws {
        try await requireMirror().stopSharing(rowID)
    }

    /// Accepts a share (from `Stratus/Container/shareMetadata(for:)`) into this store, which must
    /// mirror the shared database, and fetches its rows.
    public func accept(_ metadata: Share.Metadata) async throws {
        try await requireMirror().accept(metadata)
    }

    /// Whether the signed-in user may change a row (Core Data's `canUpdateRecord(forManagedObjectWith:)`):
    /// always in a store of their private database; in the shared one, when the row's share gives
    /// them read-and-write permission; in the public one, when they created the row's record or it
    /// is not on the server yet (CloudKit's default grants: only the creator writes). A change the server refuses anyway is rolled back to the
    /// server's version, with the refusal in ``StoreSyncStatus/lastError``.
    public func canUpdate(_ rowID: UUID) async throws -> Bool {
        try await requireMirror().canWrite(rowID)
    }

    /// Whether the signed-in user may delete a row (Core Data's `canDeleteRecord(forManagedObjectWith:)`):
    /// as ``canUpdate(_:)``, since a participant who may write may also delete.
    public func canDelete(_ rowID: UUID) async throws -> Bool {
        try await requireMirror().canWrite(rowID)
    }

    /// A notification after each transaction that applied changes from the server (seed 001's
    /// `NSPersistentStoreRemoteChange`), carrying the history token after it, until the stream is
    /// dropped. Empty for a store opened without mirroring.
    public func remoteChanges() -> AsyncStream<StoreRemoteChange> {
        mirror?.remoteChanges.stream() ?? AsyncStream { $0.finish() }
    }

    /// The mirror's setup, imports and exports as they start and end (`NSPersistentCloudKitContainer.Event`),
    /// until the stream is dropped. Empty for a store opened without mirroring.
    public func events() -> AsyncStream<StoreEvent> {
        mirror?.events.stream() ?? AsyncStream { $0.finish() }
    }

    /// Stops mirroring and lets another store open on the pool: the engine's scheduled syncs and
    /// push listening end, the public database is no longer polled, the streams of
    /// ``remoteChanges()`` and ``events()`` finish, and calls that mirror throw from then on. Returns
    /// once none of the mirror's work runs. The app's writes to synced tables are still captured,
    /// and go out when the pool is opened again.
    public func close() async {
        guard !isClosed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        await mirror?.close()
        Self.openStores.withLock { stores in
            if case .open(let store)? = stores[ObjectIdentifier(pool)], store.value === self {
                stores[ObjectIdentifier(pool)] = nil
            }
        }
    }

    private func requireMirror() throws -> StoreMirror {
        guard !isClosed.load(ordering: .acquiring) else {
            throw CloudError(.invalidArguments, "this store was closed: open the pool again to mirror it")
        }
        guard let mirror else {
            throw CloudError(.invalidArguments, "this store was opened without mirroring: pass `mirroring:` to StratusStore.open")
        }
        return mirror
    }

    /// Writes in one transaction, as `author`: the history records the author of each change, so
    /// that a consumer can skip its own writes (``history(after:excludingAuthors:limit:)``).
    public func write<T: Sendable>(
        author: String = StratusStore.appAuthor, _ body: @escaping @Sendable (GRDB.Database) throws -> T
    ) async throws -> T {
        try await pool.write { [capture] db in try capture.writing(as: author) { try body(db) } }
    }

    /// The outbox: every row with a change the server has not confirmed, oldest change first. Empty
    /// means everything written locally has been confirmed by the server.
    public func pendingChanges() async throws -> [PendingChange] {
        try await pool.read { db in try StoreMetadata.outbox(after: 0, in: db) }
    }

    /// Removes outbox entries the server confirmed, each only if no change came after the version
    /// that was sent.
    public func confirm(_ changes: [PendingChange]) async throws {
        try await pool.write { db in
            try StoreMetadata.fold(in: db)
            for change in changes { try StoreMetadata.confirm(change, in: db) }
        }
    }

    /// Deletes the history up to and including `token`'s transaction (Core Data's
    /// `deleteHistory(before:)`), for an app that keeps it (``open(_:model:mirroring:historyRetention:)``
    /// with `nil`) and has read it. The newest transaction stays, as the position later ones count
    /// from; the outbox keeps every change the server has not confirmed whatever is deleted here.
    public func deleteHistory(before token: HistoryToken) async throws {
        try await pool.write { db in _ = try StoreHistory.delete(upTo: token.transaction, in: db) }
    }

    /// The transactions that changed synced tables after `token` (from the first when `nil`), oldest
    /// first, at most `limit` of them looked at; those of `excludingAuthors` are left out but passed,
    /// so the page's token moves past them. Tokens are positions in the database: they survive
    /// restarts.
    ///
    /// - Throws: `CloudError` `changeTokenExpired` when transactions after `token` were deleted
    ///   (``open(_:model:mirroring:historyRetention:)``): read the tables again, then go on from
    ///   `history().token`, as after Core Data's expired history token.
    public func history(
        after token: HistoryToken? = nil, excludingAuthors: Set<String> = [], limit: Int = 1_000
    ) async throws -> HistoryPage {
        try await pool.read { db in
            if let token, token.transaction < (try StoreHistory.deletedThrough(in: db)) {
                throw CloudError(
                    .changeTokenExpired,
                    "the history after transaction \(token.transaction) was deleted (it is kept for historyRetention): "
                        + "read the tables again, then go on from history().token")
            }
            let transactions = try Row.fetchAll(
                db, sql: "SELECT id, author, time_ms, first_change FROM stratusstore_transactions WHERE id > ? ORDER BY id LIMIT ?",
                arguments: [token?.transaction ?? 0, max(1, limit)])
            guard let last = transactions.last?["id"] as Int64? else {
                return HistoryPage(transactions: [], token: token ?? HistoryToken(transaction: 0))
            }
            let kept = transactions.filter { !excludingAuthors.contains($0["author"] as String) }
            var changes: [Int64: [HistoryChange]] = [:]
            if let first = kept.first?["first_change"] as Int64? {
                // A transaction's changes follow its first one, up to the next transaction's first.
                for row in try Row.fetchAll(
                    db,
                    sql: """
                        SELECT transaction_id, table_name, row_id, operation FROM stratusstore_changes
                        WHERE seq >= ? AND seq < coalesce(
                            (SELECT first_change FROM stratusstore_transactions WHERE id > ? ORDER BY id LIMIT 1),
                            9223372036854775807)
                        ORDER BY seq
                        """, arguments: [first, last])
                {
                    guard let rowID = UUID(databaseKey: row["row_id"]),
                        let operation = HistoryChange.Operation(rawValue: row["operation"])
                    else { continue }
                    changes[row["transaction_id"], default: []].append(
                        HistoryChange(table: row["table_name"], rowID: rowID, operation: operation))
                }
            }
            // A transaction row without changes (a statement that skipped its row) is passed over.
            return HistoryPage(
                transactions: kept.compactMap { row in
                    let id: Int64 = row["id"]
                    return changes[id].map { changes in
                        HistoryTransaction(
                            token: HistoryToken(transaction: id), author: row["author"],
                            date: Date(timeIntervalSince1970: Double(row["time_ms"] as Int64) / 1_000), changes: changes)
                    }
                }, token: HistoryToken(transaction: last))
        }
    }
}

/// A change of a row that the server has not confirmed yet.
public struct PendingChange: Sendable, Hashable {
    /// What the server is to do with the row's record.
    public enum Operation: String, Sendable {
        /// Save the row as it is now.
        case save
        /// Delete its record.
        case delete
    }

    public var table: String
    public var rowID: UUID
    public var operation: Operation
    /// Changes with every change of the row (and never repeats): a confirmation of an older version
    /// leaves the entry.
    public var version: Int64
    /// The key as the table stores it (16 bytes, or a string in either case).
    var storedKey: DatabaseValue
    /// The zone the row lives in when not the store's own (a share's); `nil` in the store's zone.
    var zoneID: RecordZone.ID?
}

/// A position in the store's persistent history: after a transaction.
public struct HistoryToken: Sendable, Hashable, Codable {
    /// The number of the last transaction it is after.
    public var transaction: Int64
}

/// Transactions of the history, and the token to read on from.
public struct HistoryPage: Sendable, Equatable {
    public var transactions: [HistoryTransaction]
    /// After the last transaction looked at, included or not.
    public var token: HistoryToken
}

/// One transaction that changed synced tables.
public struct HistoryTransaction: Sendable, Equatable {
    /// The position after it.
    public var token: HistoryToken
    /// Who wrote it: ``StratusStore/appAuthor``, ``StratusStore/importAuthor``, or an app's own name.
    public var author: String
    public var date: Date
    /// Its changes, in the order they were made.
    public var changes: [HistoryChange]
}

/// One row changed by a transaction.
public struct HistoryChange: Sendable, Equatable {
    /// How the row changed.
    public enum Operation: String, Sendable {
        case insert, update, delete
    }

    public var table: String
    /// The row's primary key.
    public var rowID: UUID
    public var operation: Operation
}

extension StratusStore {
    /// How a store mirrors its synced tables (`NSPersistentCloudKitContainerOptions`).
    public struct Mirroring: Sendable {
        /// The database mirrored to (`NSPersistentCloudKitContainerOptions.databaseScope`): the signed-in
        /// user's private database; their shared database, whose rows are those of the shares they
        /// accepted; or the public database, whose rows are every user's records of the synced types
        /// (deletions travel as records marked ``RecordMapping/deletedKey``, changes are polled).
        public var database: Stratus.Database
        /// What wins when the server's record and an unsent local change disagree
        /// (``StoreMergePolicy/mergeByPropertyObjectTrump`` by default).
        public var mergePolicy: StoreMergePolicy
        /// Merges of their own for some tables, by table name, used instead of ``mergePolicy``.
        public var customMerges: [String: StoreCustomMerge]
        /// Whether the store syncs by itself (`true` by default): local commits are sent, the
        /// server's notifications fetched, failures retried. Without it only ``StratusStore/sync()`` syncs.
        public var automaticallySync: Bool
        /// BLOB values larger than this many bytes travel as assets (1 MB by default).
        public var assetThreshold: Int
        /// How often a store of the public database, which has no change feed nor database
        /// subscription, sends and polls while it syncs by itself (every minute by default).
        public var pollInterval: Duration
        /// Where the files of outgoing assets are written before upload.
        public var assetDirectory: URL

        /// Mirroring to `database`, writing outgoing asset files in `assetDirectory`.
        public init(
            database: Stratus.Database, assetDirectory: URL, mergePolicy: StoreMergePolicy = .mergeByPropertyObjectTrump,
            customMerges: [String: StoreCustomMerge] = [:], automaticallySync: Bool = true, assetThreshold: Int = 1_000_000,
            pollInterval: Duration = .seconds(60)
        ) {
            self.pollInterval = pollInterval
            self.database = database
            self.assetDirectory = assetDirectory
            self.mergePolicy = mergePolicy
            self.customMerges = customMerges
            self.automaticallySync = automaticallySync
            self.assetThreshold = assetThreshold
        }
    }
}

/// Changes from the server were applied (seed 001's `NSPersistentStoreRemoteChange`).
public struct StoreRemoteChange: Sendable, Equatable {
    /// The history after the transaction that applied them: read ``StratusStore/history(after:excludingAuthors:limit:)``
    /// up to here to see what changed.
    public var historyToken: HistoryToken
}

/// A step of mirroring (`NSPersistentCloudKitContainer.Event`): reported once when it starts
/// (``endDate`` `nil`) and once when it ends, with the same ``id``.
public struct StoreEvent: Sendable, Identifiable {
    /// What the mirror did.
    public enum Kind: Sendable, Hashable {
        /// Getting ready to mirror: the store's zone on the server.
        case setup
        /// Fetching and applying the server's changes.
        case `import`
        /// Sending local changes.
        case export
    }

    public let id: UUID
    public let kind: Kind
    public let startDate: Date
    /// When it ended; `nil` in the report of its start.
    public internal(set) var endDate: Date?
    /// Whether it ended without error.
    public internal(set) var succeeded: Bool
    /// Why it failed, or what the server refused.
    public internal(set) var error: CloudError?

    init(kind: Kind) {
        id = UUID()
        self.kind = kind
        startDate = Date()
        succeeded = false
    }
}

/// Where mirroring stands (``StratusStore/syncStatus()``).
public struct StoreSyncStatus: Sendable {
    /// Local changes the server has not confirmed (the outbox's entries).
    public var pendingChanges: Int
    /// When the last import ended having fetched every change the server had.
    public var lastCompleteImport: Date?
    /// The last failure: a change the server refused (since the store was opened, or the latest
    /// refused change kept), a record no row could hold, a page not applied.
    public var lastError: CloudError?
    /// `true` only when every local change is on the server, the last import reached the server's
    /// latest changes, no notification since says there are more, and no fetched page failed to
    /// apply since the store was opened (its changes are fetched again when the store is next
    /// opened; `lastError` says why it failed).
    public var isUpToDate: Bool
}

/// What the app chose for a refused change (``StratusStore/resolveRefusedChange(_:_:)``).
public enum StoreRefusalResolution: Sendable, Hashable {
    /// The row goes back to the server's version (or away, when the server has none); the change is dropped.
    case revert
    /// The change is sent again at the next sync: what refused it changed (the user may write
    /// again, has space again, runs a newer app).
    case sendAgain
}

/// A local change the server refused for good: the row stays as the user left it, and its change
/// waits on the device, not sent again, until the app resolves it
/// (``StratusStore/resolveRefusedChange(_:_:)``).
public struct StoreRefusedChange: Sendable {
    /// The row's table.
    public var table: String
    /// The row's key.
    public var rowID: UUID
    /// Why the server refused it, as it said (`permissionFailure` for a participant who may only read).
    public var error: CloudError
    /// When the store learnt of the refusal.
    public var date: Date
}

/// The outcome of ``StratusStore/verify()``: the digests of the local rows and of the server's
/// records at the same moment, zone by zone (the store's zone, and each share's).
public struct StoreVerification: Hashable, Sendable {
    /// The digest of the local synced rows, as records, by the zone they live in.
    public var local: [RecordZone.ID: ZoneDigest]
    /// The server's digest of each of the store's zones.
    public var server: [RecordZone.ID: ZoneDigest]
    /// Whether the local copy equals the server's, zone by zone.
    public var matches: Bool { local == server }
    /// How many records the server holds in the store's zones.
    public var recordCount: Int { server.values.reduce(0) { $0 + $1.recordCount } }
    /// Where the copies differ, how, zone by zone: the rows only this device has (`onlyHere`),
    /// the records only the server has (`onlyThere`), and the fields that differ. Empty when they match.
    public var differences: [RecordZone.ID: [RecordDifference]] = [:]
}

extension StoreVerification: CustomStringConvertible {
    /// Whether the copies match and, when not, which rows and fields differ.
    public var description: String {
        guard !matches else { return "the device's copy matches the server's (\(recordCount) records)" }
        var lines = ["the device's copy differs from the server's:"]
        for (zoneID, differences) in differences.sorted(by: { $0.key.zoneName < $1.key.zoneName }) {
            for difference in differences { lines.append("  \(zoneID.zoneName): \(difference)") }
        }
        return lines.joined(separator: "\n")
    }
}
