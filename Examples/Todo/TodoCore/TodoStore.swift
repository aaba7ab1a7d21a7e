public import ExampleSupport
public import Foundation
public import GRDB
public import Stratus
public import StratusStore

/// A to-do app on StratusStore: the app reads and writes its own SQLite file with GRDB, and the
/// store mirrors the synced part of it to the user's private database. Lists others shared with
/// the user live in a second file, `shared.sqlite`, mirrored to their shared database (as Core
/// Data keeps a private and a shared store); the app shows and edits both alike.
///
/// The model shows each kind of table the store knows:
/// - `lists` is synced as `List` records, except its `expanded` column, which stays on the device
///   (one entity split across the cloud and the local configuration);
/// - `items` is synced as `Item` records, with a relationship `listID` to its list (inverse `items`)
///   and a BLOB `attachment` that travels as an asset once it is larger than 1 KiB;
/// - `views`, when each list was last opened, is local-only: it never leaves the device.
public final class TodoStore: Sendable {
    /// A list and its items.
    public struct List: Hashable, Sendable {
        public var id: UUID
        public var title: String
        public var items: [Item]
        /// Whether another user shared it with this one.
        public var sharedWithMe: Bool
    }

    /// An item of a list.
    public struct Item: Hashable, Sendable {
        public var id: UUID
        public var title: String
        public var done: Bool
        /// The attachment's size in bytes, when there is one.
        public var attachmentSize: Int?
    }

    /// What a sync did.
    public enum SyncOutcome: Equatable, Sendable {
        /// Everything local is on the server, and the server's changes are here.
        case synced
        /// The server could not be reached; the changes wait in the outbox.
        case offline(String)
    }

    /// An ID that names no list or item, or more than one.
    public struct UnknownID: Error, CustomStringConvertible {
        public let id: String
        public var description: String { "no single list or item has an ID starting with '\(id)'" }
    }

    /// The tables the app declares to the store.
    public static let model = StoreModel([
        .synced("lists", recordType: "List", localColumns: ["expanded"]),
        .synced("items", recordType: "Item", relationships: [.reference("listID", to: "lists", inverse: "items")]),
        .localOnly("views", relationships: [.reference("listID", to: "lists", inverse: "views")]),
    ])

    /// The app's database.
    public let pool: DatabasePool
    /// The store over it.
    public let store: StratusStore
    /// The database of the lists shared with this user.
    public let sharedPool: DatabasePool
    /// The store over it, mirroring the shared database.
    public let sharedStore: StratusStore
    private let container: Container

    /// The device whose state is in `stateDirectory` (set up by ``signUp(_:)`` or ``signIn(_:)``):
    /// opens `todo.sqlite`, creating its tables the first time, and the store mirroring it.
    public init(stateDirectory: URL, automaticallySync: Bool = false) async throws {
        let directory = DeviceDirectory(stateDirectory)
        container = try directory.device(app: "todo").container
        (pool, store) = try await Self.open(
            directory.file("todo.sqlite"), database: container.privateCloudDatabase,
            assetDirectory: directory.file("outgoing-assets"), automaticallySync: automaticallySync)
        (sharedPool, sharedStore) = try await Self.open(
            directory.file("shared.sqlite"), database: container.sharedCloudDatabase,
            assetDirectory: directory.file("outgoing-shared-assets"), automaticallySync: automaticallySync)
    }

    /// Attachments larger than this many bytes travel as assets, smaller ones inside their record.
    public static let attachmentAssetThreshold = 1024

    /// Opens a file of the app's tables, creating them the first time, and the store mirroring it.
    private static func open(
        _ file: URL, database: Stratus.Database, assetDirectory: URL, automaticallySync: Bool
    ) async throws -> (DatabasePool, StratusStore) {
        let pool = try DatabasePool(path: file.path)
        try await pool.write { db in
            // No foreign keys between synced tables: an item may arrive before its list.
            try db.execute(
                sql: """
                    CREATE TABLE IF NOT EXISTS lists (
                        id TEXT PRIMARY KEY NOT NULL, title TEXT NOT NULL DEFAULT '', expanded INTEGER NOT NULL DEFAULT 1);
                    CREATE TABLE IF NOT EXISTS items (
                        id TEXT PRIMARY KEY NOT NULL, listID TEXT, title TEXT NOT NULL DEFAULT '',
                        done INTEGER NOT NULL DEFAULT 0, attachment BLOB);
                    CREATE INDEX IF NOT EXISTS items_by_list ON items(listID);
                    CREATE TABLE IF NOT EXISTS views (id TEXT PRIMARY KEY NOT NULL, listID TEXT, viewedAt REAL NOT NULL DEFAULT 0);
                    """)
        }
        let store = try await StratusStore.open(
            pool, model: model,
            mirroring: StratusStore.Mirroring(
                database: database, assetDirectory: assetDirectory, automaticallySync: automaticallySync,
                assetThreshold: attachmentAssetThreshold))
        return (pool, store)
    }

    /// Creates the account and sets `account`'s state directory up as a device of it.
    public static func signUp(_ account: DeviceDirectory.Account) async throws {
        try await DeviceDirectory.setUp(account, app: "todo", .signUp)
    }

    /// Signs in and sets `account`'s state directory up as a device of it.
    public static func signIn(_ account: DeviceDirectory.Account) async throws {
        try await DeviceDirectory.setUp(account, app: "todo", .signIn)
    }

    // MARK: Reading

    /// Every list with its items, by title: this user's and those shared with them.
    public func lists() async throws -> [List] {
        let lists = try await Self.lists(in: pool, sharedWithMe: false) + Self.lists(in: sharedPool, sharedWithMe: true)
        return lists.sorted { ($0.title, $0.id.uuidString) < ($1.title, $1.id.uuidString) }
    }

    private static func lists(in pool: DatabasePool, sharedWithMe: Bool) async throws -> [List] {
        try await pool.read { db in
            var items: [String: [Item]] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT id, listID, title, done, length(attachment) AS size FROM items ORDER BY title, id") {
                guard let id = UUID(uuidString: row["id"]) else { continue }
                items[row["listID"] ?? "", default: []].append(
                    Item(id: id, title: row["title"], done: row["done"], attachmentSize: row["size"]))
            }
            return try Row.fetchAll(db, sql: "SELECT id, title FROM lists ORDER BY title, id").compactMap { row in
                guard let id = UUID(uuidString: row["id"]) else { return nil }
                return List(id: id, title: row["title"], items: items[row["id"]] ?? [], sharedWithMe: sharedWithMe)
            }
        }
    }

    /// An item's attachment.
    public func attachment(of item: UUID) async throws -> Data? {
        try await holder(of: item).pool.read { db in
            try Data.fetchOne(db, sql: "SELECT attachment FROM items WHERE id = ?", arguments: [item.uuidString])
        }
    }

    /// The list or item whose ID is `id` or starts with it.
    public func resolve(_ id: String) async throws -> UUID {
        var matches: [String] = []
        for pool in [pool, sharedPool] {
            matches += try await pool.read { db in
                try String.fetchAll(
                    db, sql: "SELECT id FROM lists WHERE id LIKE ?1 UNION SELECT id FROM items WHERE id LIKE ?1",
                    arguments: [id.uppercased() + "%"])
            }
        }
        guard matches.count == 1, let match = UUID(uuidString: matches[0]) else { throw UnknownID(id: id) }
        return match
    }

    // MARK: Writing

    /// Adds a list.
    @discardableResult
    public func addList(title: String) async throws -> UUID {
        let id = UUID()
        try await store.write { db in
            try db.execute(sql: "INSERT INTO lists (id, title) VALUES (?, ?)", arguments: [id.uuidString, title])
        }
        return id
    }

    /// The store holding a list or an item: the shared one for what others shared with this user.
    private func holder(of id: UUID) async throws -> StratusStore {
        let shared = try await sharedPool.read { db in
            try Bool.fetchOne(
                db, sql: "SELECT EXISTS (SELECT 1 FROM lists WHERE id = ?1 UNION SELECT 1 FROM items WHERE id = ?1)",
                arguments: [id.uuidString]) ?? false
        }
        return shared ? sharedStore : store
    }

    /// Refuses, before anything is written, a change of `id` the user may not make (a list shared
    /// with them read-only): the server would refuse it.
    private func requireChangeable(_ id: UUID) async throws {
        guard try await canChange(id) else {
            throw CloudError(
                .permissionFailure, "this list is shared with you read-only: ask its owner for permission to change it")
        }
    }

    /// Adds an item to `list`, with an attachment when given (in a shared list, it joins the share).
    @discardableResult
    public func addItem(to list: UUID, title: String, attachment: Data? = nil) async throws -> UUID {
        try await requireChangeable(list)
        let id = UUID()
        try await holder(of: list).write { db in
            try db.execute(
                sql: "INSERT INTO items (id, listID, title, attachment) VALUES (?, ?, ?, ?)",
                arguments: [id.uuidString, list.uuidString, title, attachment])
        }
        return id
    }

    /// Marks an item done or not done.
    public func setDone(_ item: UUID, _ done: Bool) async throws {
        try await requireChangeable(item)
        try await holder(of: item).write { db in
            try db.execute(sql: "UPDATE items SET done = ? WHERE id = ?", arguments: [done, item.uuidString])
        }
    }

    /// Renames a list or an item.
    public func rename(_ id: UUID, to title: String) async throws {
        try await requireChangeable(id)
        try await holder(of: id).write { db in
            for table in ["lists", "items"] {
                try db.execute(sql: "UPDATE \(table) SET title = ? WHERE id = ?", arguments: [title, id.uuidString])
            }
        }
    }

    /// Deletes an item, or a list with its items (in one transaction).
    public func delete(_ id: UUID) async throws {
        try await requireChangeable(id)
        try await holder(of: id).write { db in
            try db.execute(sql: "DELETE FROM items WHERE id = ?1 OR listID = ?1", arguments: [id.uuidString])
            try db.execute(sql: "DELETE FROM views WHERE listID = ?", arguments: [id.uuidString])
            try db.execute(sql: "DELETE FROM lists WHERE id = ?", arguments: [id.uuidString])
        }
    }

    /// Notes that `list` was opened now, on this device only.
    public func markViewed(_ list: UUID, at date: Date = Date()) async throws {
        try await holder(of: list).write { db in
            try db.execute(
                sql: "INSERT OR REPLACE INTO views (id, listID, viewedAt) VALUES (?, ?, ?)",
                arguments: [list.uuidString, list.uuidString, date.timeIntervalSince1970])
        }
    }

    // MARK: Sync

    /// Sends the outbox and applies what changed on the server; an unreachable server is not an
    /// error: the changes wait.
    public func sync() async throws -> SyncOutcome {
        do {
            try await store.sync()
            try await sharedStore.sync()
        } catch let error as CloudError where error.isTransient || error.code == .serverResponseLost {
            return .offline(error.message)
        }
        return .synced
    }

    /// The changes the server refused, in both stores, the latest first: each waits, as the user
    /// made it, until ``resolveRefusal(_:revert:)``.
    public func refusedChanges() async throws -> [StoreRefusedChange] {
        try await store.refusedChanges() + sharedStore.refusedChanges()
    }

    /// Settles the refused change of `id`: `revert` goes back to the server's version, otherwise
    /// the change is sent again at the next sync.
    public func resolveRefusal(_ id: UUID, revert: Bool) async throws {
        for mirror in [store, sharedStore] where try await mirror.refusedChanges().contains(where: { $0.rowID == id }) {
            try await mirror.resolveRefusedChange(id, revert ? .revert : .sendAgain)
            return
        }
        throw CloudError(.unknownItem, "no refused change of \(id) waits on this device")
    }

    // MARK: Sharing

    /// Shares a list and its items with whoever has the returned link, who may change them, or only
    /// read them with `readOnly`.
    public func share(_ list: UUID, readOnly: Bool = false) async throws -> URL {
        let share = try await store.share(list) { share in share.publicPermission = readOnly ? .readOnly : .readWrite }
        guard let url = share.url else { throw CloudError(.serverRejectedRequest, "the server answered the share without its link") }
        return url
    }

    /// Accepts a list shared through `url`: it appears among the lists, and syncs like them.
    public func accept(_ url: URL) async throws {
        try await sharedStore.accept(try await container.shareMetadata(for: url))
    }

    /// Whether this user may change a list or an item (always their own; a shared one, when its
    /// share lets them).
    public func canChange(_ id: UUID) async throws -> Bool {
        try await holder(of: id).canUpdate(id)
    }

    /// Stops sharing a list: its owner keeps it, unshared; a participant leaves it, and it leaves
    /// their device.
    public func stopSharing(_ list: UUID) async throws {
        try await holder(of: list).stopSharing(list)
    }
}
