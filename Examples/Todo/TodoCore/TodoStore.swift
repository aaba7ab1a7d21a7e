public import ExampleSupport
public import Foundation
public import GRDB
public import Stratus
public import StratusStore

/// A to-do app on StratusStore: the app reads and writes its own SQLite file with GRDB, and the
/// store mirrors the synced part of it to the user's private database.
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

    /// The device whose state is in `stateDirectory` (set up by ``signUp(_:)`` or ``signIn(_:)``):
    /// opens `todo.sqlite`, creating its tables the first time, and the store mirroring it.
    public init(stateDirectory: URL, automaticallySync: Bool = false) async throws {
        let directory = DeviceDirectory(stateDirectory)
        let container = try directory.device(app: "todo").container
        pool = try DatabasePool(path: directory.file("todo.sqlite").path)
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
        store = try await StratusStore.open(
            pool, model: Self.model,
            mirroring: StratusStore.Mirroring(
                database: container.privateCloudDatabase, assetDirectory: directory.file("outgoing-assets"),
                automaticallySync: automaticallySync))
    }

    /// Creates the account and sets `account`'s state directory up as a device of it.
    public static func signUp(_ account: DeviceDirectory.Account) async throws {
        try await DeviceDirectory.setUp(account, app: "todo") {
            try await $0.signUp(username: account.username, password: account.password)
        }
    }

    /// Signs in and sets `account`'s state directory up as a device of it.
    public static func signIn(_ account: DeviceDirectory.Account) async throws {
        try await DeviceDirectory.setUp(account, app: "todo") {
            try await $0.signIn(username: account.username, password: account.password)
        }
    }

    // MARK: Reading

    /// Every list with its items, by title.
    public func lists() async throws -> [List] {
        try await pool.read { db in
            var items: [String: [Item]] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT id, listID, title, done, length(attachment) AS size FROM items ORDER BY title, id") {
                guard let id = UUID(uuidString: row["id"]) else { continue }
                items[row["listID"] ?? "", default: []].append(
                    Item(id: id, title: row["title"], done: row["done"], attachmentSize: row["size"]))
            }
            return try Row.fetchAll(db, sql: "SELECT id, title FROM lists ORDER BY title, id").compactMap { row in
                guard let id = UUID(uuidString: row["id"]) else { return nil }
                return List(id: id, title: row["title"], items: items[row["id"]] ?? [])
            }
        }
    }

    /// An item's attachment.
    public func attachment(of item: UUID) async throws -> Data? {
        try await pool.read { db in
            try Data.fetchOne(db, sql: "SELECT attachment FROM items WHERE id = ?", arguments: [item.uuidString])
        }
    }

    /// The list or item whose ID is `id` or starts with it.
    public func resolve(_ id: String) async throws -> UUID {
        let matches = try await pool.read { db in
            try String.fetchAll(
                db, sql: "SELECT id FROM lists WHERE id LIKE ?1 UNION SELECT id FROM items WHERE id LIKE ?1",
                arguments: [id.uppercased() + "%"])
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

    /// Adds an item to `list`, with an attachment when given.
    @discardableResult
    public func addItem(to list: UUID, title: String, attachment: Data? = nil) async throws -> UUID {
        let id = UUID()
        try await store.write { db in
            try db.execute(
                sql: "INSERT INTO items (id, listID, title, attachment) VALUES (?, ?, ?, ?)",
                arguments: [id.uuidString, list.uuidString, title, attachment])
        }
        return id
    }

    /// Marks an item done or not done.
    public func setDone(_ item: UUID, _ done: Bool) async throws {
        try await store.write { db in
            try db.execute(sql: "UPDATE items SET done = ? WHERE id = ?", arguments: [done, item.uuidString])
        }
    }

    /// Renames a list or an item.
    public func rename(_ id: UUID, to title: String) async throws {
        try await store.write { db in
            for table in ["lists", "items"] {
                try db.execute(sql: "UPDATE \(table) SET title = ? WHERE id = ?", arguments: [title, id.uuidString])
            }
        }
    }

    /// Deletes an item, or a list with its items (in one transaction).
    public func delete(_ id: UUID) async throws {
        try await store.write { db in
            try db.execute(sql: "DELETE FROM items WHERE id = ?1 OR listID = ?1", arguments: [id.uuidString])
            try db.execute(sql: "DELETE FROM views WHERE listID = ?", arguments: [id.uuidString])
            try db.execute(sql: "DELETE FROM lists WHERE id = ?", arguments: [id.uuidString])
        }
    }

    /// Notes that `list` was opened now, on this device only.
    public func markViewed(_ list: UUID, at date: Date = Date()) async throws {
        try await store.write { db in
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
        } catch let error as CloudError where error.isTransient || error.code == .serverResponseLost {
            return .offline(error.message)
        }
        return .synced
    }
}
