import Foundation
import GRDB
import GRDBSQLite
import StratusModel
public import StratusStorage
import ServiceLifecycle
import Synchronization

/// The embedded storage backend: one SQLite file in WAL mode, through GRDB.
///
/// Writers are serialized by SQLite, so a zone's sequence numbers are handed out in commit order
/// simply by reading and bumping them inside each write transaction.
public final class SQLiteStorage: StratusStorage {
    /// How hard a commit tries to survive a power loss.
    public enum Durability: String, Sendable, CaseIterable {
        /// `synchronous=FULL`: every commit is on disk before it is acknowledged (the default).
        case full
        /// `synchronous=NORMAL`: a commit survives a crash of the process but may be lost with power.
        case normal
    }

    /// Storage settings.
    public struct Configuration: Sendable {
        /// Commit durability; `.full` by default.
        public var durability: Durability

        /// Creates a configuration.
        public init(durability: Durability = .full) {
            self.durability = durability
        }
    }

    let pool: DatabasePool
    /// Decoded schemas by container and environment, with the version they were read at.
    let schemas = SchemaCache()
    /// Where record writes go: concurrent ones commit together.
    let groupCommit: GroupCommit

    /// Opens (creating if needed) the database file at `path` and brings its schema up to date.
    ///
    /// The file holds password hashes, session hashes and the secret that signs sync tokens, so it
    /// is readable by its owner only: it is created `0600` (SQLite gives its WAL and shared-memory
    /// files the database file's mode), and an existing file and its companions are made `0600`.
    public init(path: String, configuration: Configuration = Configuration()) throws {
        for file in [path, path + "-wal", path + "-shm"] where FileManager.default.fileExists(atPath: file) {
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file)
        }
        if !FileManager.default.fileExists(atPath: path) {
            _ = FileManager.default.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o600])
        }
        var grdb = GRDB.Configuration()
        let synchronous = configuration.durability == .full ? "FULL" : "NORMAL"
        grdb.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = \(synchronous)")
        }
        grdb.busyMode = .timeout(10)
        pool = try DatabasePool(path: path, configuration: grdb)
        try SQLiteMigrations.migrator.migrate(pool)
        // A group that failed may have cached a schema version it wrote and never committed.
        groupCommit = GroupCommit(pool: pool) { [schemas] in schemas.forgetAll() }
    }

    /// How many commit groups record writes have formed since the storage opened, and how many
    /// writes they held: more writes than groups means concurrent writes shared commits.
    public var commitGroupCounts: (groups: Int, writes: Int) { groupCommit.counts }

    /// Runs until its service group shuts down: the pool needs nothing in the background, and the
    /// file was brought up to date when it was opened.
    public func run() async throws {
        try? await gracefulShutdown()
    }

    public func health() async throws -> StorageHealth {
        let path = pool.path
        let size = [path, path + "-wal"].reduce(Int64(0)) { total, file in
            total + ((try? FileManager.default.attributesOfItem(atPath: file)[.size] as? Int64) ?? 0)
        }
        let synchronous = try await pool.read { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") ?? 0 }
        return StorageHealth(
            backend: "SQLite", sizeBytes: size,
            details: [
                .init("file", path), .init("journal", "WAL"),
                .init("durability", synchronous >= 2 ? "full (every commit synced)" : "normal (survives process crashes)"),
                .init("SQLite version", String(cString: sqlite3_libversion())),
            ])
    }

    // MARK: Settings

    public func setting(_ key: String) async throws -> String? {
        try await pool.read { db in
            try String.fetchOne(db, sql: "SELECT value FROM settings WHERE key = ?", arguments: [key])
        }
    }

    public func initializeSetting(_ key: String, to value: String) async throws -> String {
        try await pool.write { db in
            try db.execute(sql: "INSERT OR IGNORE INTO settings (key, value) VALUES (?, ?)", arguments: [key, value])
            return try String.fetchOne(db, sql: "SELECT value FROM settings WHERE key = ?", arguments: [key])!
        }
    }

    public func setSetting(_ key: String, to value: String) async throws {
        try await pool.write { db in
            try db.execute(
                sql: "INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                arguments: [key, value])
        }
    }
}

extension QueryScalar {
    /// The value as SQLite stores it in the query index.
    var databaseValue: DatabaseValue {
        switch self {
        case .integer(let value): value.databaseValue
        case .real(let value): value.databaseValue
        case .text(let value): value.databaseValue
        }
    }

    /// A scalar read back from the query index.
    init?(_ value: DatabaseValue) {
        switch value.storage {
        case .int64(let integer): self = .integer(integer)
        case .double(let real): self = .real(real)
        case .string(let text): self = .text(text)
        case .blob, .null: return nil
        }
    }
}

/// Decoded schemas by container and environment, with the version they were read at.
final class SchemaCache: Sendable {
    private let entries = Mutex<[String: (version: Int64, schema: Schema)]>([:])

    /// The schema cached for `key` at `version`.
    func schema(_ key: String, version: Int64) -> Schema? {
        entries.withLock { entries in entries[key].flatMap { $0.version == version ? $0.schema : nil } }
    }

    func store(_ schema: Schema, key: String, version: Int64) {
        entries.withLock { $0[key] = (version, schema) }
    }

    func forgetAll() {
        entries.withLock { $0 = [:] }
    }
}
