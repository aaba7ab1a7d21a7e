import Foundation
import GRDB
import GRDBSQLite
public import StratusModel
public import StratusStorage
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

    private let pool: DatabasePool
    /// Decoded schemas by container and environment, with the version they were read at.
    private let schemas = Mutex<[String: (version: Int64, schema: Schema)]>([:])

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

    // MARK: Containers, tokens, users, sessions

    public func createContainer(_ container: ContainerInfo) async throws {
        try await pool.write { db in
            if try Bool.fetchOne(db, sql: "SELECT 1 FROM containers WHERE id = ?", arguments: [container.identifier])
                != nil
            {
                throw StratusError(.exists, "container '\(container.identifier)' already exists")
            }
            try db.execute(
                sql: "INSERT INTO containers (id, allows_sign_up, created_ms) VALUES (?, ?, ?)",
                arguments: [container.identifier, container.allowsSignUp, container.createdAt])
        }
    }

    public func container(_ identifier: String) async throws -> ContainerInfo? {
        try await pool.read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM containers WHERE id = ?", arguments: [identifier])
                .map(Self.containerInfo)
        }
    }

    public func containers() async throws -> [ContainerInfo] {
        try await pool.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM containers ORDER BY id").map(Self.containerInfo)
        }
    }

    private static func containerInfo(_ row: Row) -> ContainerInfo {
        ContainerInfo(identifier: row["id"], allowsSignUp: row["allows_sign_up"], createdAt: row["created_ms"])
    }

    public func createAPIToken(hash: String, container: String, name: String, createdAt: Int64) async throws {
        try await pool.write { db in
            try Self.requireContainer(db, container)
            try db.execute(
                sql: "INSERT INTO api_tokens (token_hash, container_id, name, created_ms) VALUES (?, ?, ?, ?)",
                arguments: [hash, container, name, createdAt])
        }
    }

    public func containerForAPIToken(hash: String) async throws -> String? {
        try await pool.read { db in
            try String.fetchOne(db, sql: "SELECT container_id FROM api_tokens WHERE token_hash = ?", arguments: [hash])
        }
    }

    public func createUser(_ user: UserInfo) async throws {
        try await pool.write { db in
            try Self.requireContainer(db, user.container)
            if try Bool.fetchOne(
                db, sql: "SELECT 1 FROM users WHERE container_id = ? AND username = ?",
                arguments: [user.container, user.username]) != nil
            {
                throw StratusError(.exists, "username '\(user.username)' is taken")
            }
            try db.execute(
                sql: """
                    INSERT INTO users (container_id, record_name, username, password_hash, created_ms)
                    VALUES (?, ?, ?, ?, ?)
                    """,
                arguments: [user.container, user.recordName, user.username, user.passwordHash, user.createdAt])
        }
    }

    public func user(container: String, username: String) async throws -> UserInfo? {
        try await pool.read { db in
            try Row.fetchOne(
                db, sql: "SELECT * FROM users WHERE container_id = ? AND username = ?", arguments: [container, username]
            ).map(Self.userInfo)
        }
    }

    public func user(container: String, recordName: String) async throws -> UserInfo? {
        try await pool.read { db in
            try Row.fetchOne(
                db, sql: "SELECT * FROM users WHERE container_id = ? AND record_name = ?",
                arguments: [container, recordName]
            ).map(Self.userInfo)
        }
    }

    private static func userInfo(_ row: Row) -> UserInfo {
        UserInfo(
            container: row["container_id"], recordName: row["record_name"], username: row["username"],
            passwordHash: row["password_hash"], createdAt: row["created_ms"])
    }

    private static func requireContainer(_ db: Database, _ container: String) throws {
        guard try Bool.fetchOne(db, sql: "SELECT 1 FROM containers WHERE id = ?", arguments: [container]) != nil else {
            throw StratusError(.notFound, "container '\(container)' does not exist")
        }
    }

    public func createSession(hash: String, session: SessionInfo) async throws {
        try await pool.write { db in
            try db.execute(
                sql: "INSERT INTO sessions (token_hash, container_id, user_record_name, expires_ms) VALUES (?, ?, ?, ?)",
                arguments: [hash, session.container, session.userRecordName, session.expiresAt])
        }
    }

    public func session(hash: String) async throws -> SessionInfo? {
        try await pool.read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM sessions WHERE token_hash = ?", arguments: [hash]).map { row in
                SessionInfo(
                    container: row["container_id"], userRecordName: row["user_record_name"],
                    expiresAt: row["expires_ms"])
            }
        }
    }

    public func deleteSession(hash: String) async throws {
        try await pool.write { db in
            try db.execute(sql: "DELETE FROM sessions WHERE token_hash = ?", arguments: [hash])
        }
    }

    // MARK: Databases and zones

    /// The database's storage identifier, creating the database and its default zone on first use.
    private static func ensureDatabase(_ db: Database, _ locator: DatabaseLocator) throws -> Int64 {
        if let id = try existingDatabase(db, locator) { return id }
        try db.execute(
            sql: "INSERT INTO databases (container_id, environment, scope, owner) VALUES (?, ?, ?, ?)",
            arguments: [locator.container, locator.environment.rawValue, locator.scope.rawValue, locator.owner])
        let id = db.lastInsertedRowID
        try db.execute(
            sql: "INSERT INTO zones (database_id, name, change_seq, created_ms, changed_ms) VALUES (?, ?, 0, 0, 0)",
            arguments: [id, ZoneID.defaultZoneName])
        return id
    }

    private static func existingDatabase(_ db: Database, _ locator: DatabaseLocator) throws -> Int64? {
        try Int64.fetchOne(
            db,
            sql: "SELECT id FROM databases WHERE container_id = ? AND environment = ? AND scope = ? AND owner = ?",
            arguments: [locator.container, locator.environment.rawValue, locator.scope.rawValue, locator.owner])
    }

    /// Runs `body` with the database's identifier: in a read when the database exists, otherwise in
    /// a write that creates it first.
    private func withDatabase<T: Sendable>(
        _ locator: DatabaseLocator, _ body: @escaping @Sendable (Database, Int64) throws -> T
    ) async throws -> T {
        let result: T? = try await pool.read { db in
            try Self.existingDatabase(db, locator).map { try body(db, $0) }
        }
        if let result { return result }
        return try await pool.write { db in try body(db, try Self.ensureDatabase(db, locator)) }
    }

    private static func zoneState(_ row: Row) -> ZoneState {
        ZoneState(
            name: row["name"], id: row["id"], sequence: row["seq"], purgedSequence: row["purged_seq"],
            deleted: row["deleted"])
    }

    private static func liveZone(_ db: Database, _ databaseID: Int64, _ name: String) throws -> ZoneState? {
        try Row.fetchOne(
            db.cachedStatement(sql: "SELECT * FROM zones WHERE database_id = ? AND name = ? AND deleted = 0"),
            arguments: [databaseID, name]
        ).map(zoneState)
    }

    private static func requireZone(_ db: Database, _ databaseID: Int64, _ name: String) throws -> ZoneState {
        guard let zone = try liveZone(db, databaseID, name) else {
            throw StratusError(.zoneNotFound, "zone '\(name)' does not exist")
        }
        return zone
    }

    /// Takes the database's next sequence number, which orders zone changes.
    private static func nextDatabaseSequence(_ db: Database, _ databaseID: Int64) throws -> Int64 {
        try Int64.fetchOne(
            db.cachedStatement(sql: "UPDATE databases SET seq = seq + 1 WHERE id = ? RETURNING seq"),
            arguments: [databaseID])!
    }

    public func zones(in database: DatabaseLocator) async throws -> [ZoneState] {
        try await withDatabase(database) { db, databaseID in
            try Row.fetchAll(
                db,
                sql: "SELECT * FROM zones WHERE database_id = ? AND deleted = 0 ORDER BY name != ?, name",
                arguments: [databaseID, ZoneID.defaultZoneName]
            ).map(Self.zoneState)
        }
    }

    public func zone(named name: String, in database: DatabaseLocator) async throws -> ZoneState? {
        try await withDatabase(database) { db, databaseID in try Self.liveZone(db, databaseID, name) }
    }

    public func createZone(named name: String, in database: DatabaseLocator, timestamp: Int64) async throws
        -> ZoneState
    {
        try await pool.write { db in
            let databaseID = try Self.ensureDatabase(db, database)
            if let zone = try Self.liveZone(db, databaseID, name) { return zone }
            let changeSequence = try Self.nextDatabaseSequence(db, databaseID)
            try db.execute(
                sql: "INSERT INTO zones (database_id, name, change_seq, created_ms, changed_ms) VALUES (?, ?, ?, ?, ?)",
                arguments: [databaseID, name, changeSequence, timestamp, timestamp])
            return try Self.requireZone(db, databaseID, name)
        }
    }

    public func deleteZone(named name: String, in database: DatabaseLocator, timestamp: Int64) async throws -> Bool {
        precondition(name != ZoneID.defaultZoneName, "the default zone cannot be deleted")
        return try await pool.write { db in
            let databaseID = try Self.ensureDatabase(db, database)
            guard let zone = try Self.liveZone(db, databaseID, name) else { return false }
            try db.execute(sql: "DELETE FROM records WHERE zone_id = ?", arguments: [zone.id])
            try db.execute(sql: "DELETE FROM record_references WHERE zone_id = ?", arguments: [zone.id])
            try db.execute(sql: "DELETE FROM record_index WHERE zone_id = ?", arguments: [zone.id])
            try db.execute(sql: "DELETE FROM record_assets WHERE zone_id = ?", arguments: [zone.id])
            let changeSequence = try Self.nextDatabaseSequence(db, databaseID)
            try db.execute(
                sql: "UPDATE zones SET deleted = 1, change_seq = ?, changed_ms = ? WHERE id = ?",
                arguments: [changeSequence, timestamp, zone.id])
            return true
        }
    }

    // MARK: Records

    private static let recordColumns = """
        name, record_type, change_tag, fields, created_ms, created_by, created_device, modified_ms, modified_by,
        modified_device, seq, deleted
        """

    /// Runs a statement selecting ``recordColumns`` and decodes its rows, reading columns through
    /// SQLite's C API: GRDB's generic row decoding cost more than the read itself on change feeds.
    private static func fetchStoredRecords(
        _ db: Database, _ statement: Statement, arguments: StatementArguments
    ) throws -> [StoredRecord] {
        try statement.setArguments(arguments)
        let handle = statement.sqliteStatement
        defer { sqlite3_reset(handle) }
        var records: [StoredRecord] = []
        while true {
            let code = sqlite3_step(handle)
            if code == SQLITE_DONE { return records }
            guard code == SQLITE_ROW else {
                throw DatabaseError(
                    resultCode: ResultCode(rawValue: code), message: String(cString: sqlite3_errmsg(db.sqliteConnection)),
                    sql: statement.sql)
            }
            func text(_ column: Int32) -> String? {
                guard let bytes = sqlite3_column_text(handle, column) else { return nil }
                return String(decoding: UnsafeBufferPointer(start: bytes, count: Int(sqlite3_column_bytes(handle, column))),
                              as: UTF8.self)
            }
            var fields: [UInt8] = []
            if let blob = sqlite3_column_blob(handle, 3) {
                fields = [UInt8](UnsafeRawBufferPointer(start: blob, count: Int(sqlite3_column_bytes(handle, 3))))
            }
            records.append(
                StoredRecord(
                    name: text(0) ?? "", recordType: text(1) ?? "", changeTag: text(2) ?? "", fieldsJSON: fields,
                    created: RecordStamp(timestamp: sqlite3_column_int64(handle, 4), userRecordName: text(5) ?? "",
                                         deviceID: text(6)),
                    modified: RecordStamp(timestamp: sqlite3_column_int64(handle, 7), userRecordName: text(8) ?? "",
                                          deviceID: text(9)),
                    deleted: sqlite3_column_int64(handle, 11) != 0, sequence: sqlite3_column_int64(handle, 10)))
        }
    }

    private static func fetchRecord(_ db: Database, zoneID: Int64, name: String) throws -> StoredRecord? {
        try fetchStoredRecords(
            db, db.cachedStatement(sql: "SELECT \(recordColumns) FROM records WHERE zone_id = ? AND name = ?"),
            arguments: [zoneID, name]
        ).first
    }

    /// The stored rows (tombstones included) of `names`, read with one query per 500 names.
    private static func fetchRecords(_ db: Database, zoneID: Int64, names: [String]) throws -> [String: StoredRecord] {
        var records: [String: StoredRecord] = [:]
        records.reserveCapacity(names.count)
        for start in stride(from: 0, to: names.count, by: 500) {
            let chunk = names[start..<min(start + 500, names.count)]
            let placeholders = Array(repeating: "?", count: chunk.count).joined(separator: ",")
            let statement = try db.cachedStatement(
                sql: "SELECT \(recordColumns) FROM records WHERE zone_id = ? AND name IN (\(placeholders))")
            var arguments: StatementArguments = [zoneID]
            arguments += StatementArguments(chunk)
            for record in try fetchStoredRecords(db, statement, arguments: arguments) {
                records[record.name] = record
            }
        }
        return records
    }

    private static func upsert(_ db: Database, zoneID: Int64, _ record: StoredRecord) throws {
        try db.cachedStatement(
            sql: """
                INSERT INTO records (zone_id, \(recordColumns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (zone_id, name) DO UPDATE SET
                    record_type = excluded.record_type, change_tag = excluded.change_tag, fields = excluded.fields,
                    created_ms = excluded.created_ms, created_by = excluded.created_by,
                    created_device = excluded.created_device, modified_ms = excluded.modified_ms,
                    modified_by = excluded.modified_by, modified_device = excluded.modified_device,
                    seq = excluded.seq, deleted = excluded.deleted
                """
        ).execute(arguments: [
            zoneID, record.name, record.recordType, record.changeTag, Data(record.fieldsJSON),
            record.created.timestamp, record.created.userRecordName, record.created.deviceID,
            record.modified.timestamp, record.modified.userRecordName, record.modified.deviceID,
            record.sequence, record.deleted,
        ])
    }

    public func modifyRecords(
        _ writes: [RecordWrite], zone: String, in database: DatabaseLocator, atomic: Bool, context: WriteContext
    ) async throws -> ModifyRecordsOutcome {
        try await pool.writeWithoutTransaction { db in
            var outcome = ModifyRecordsOutcome(results: [], changes: [])
            try db.inTransaction(.immediate) {
                let databaseID = try Self.ensureDatabase(db, database)
                let zoneState = try Self.requireZone(db, databaseID, zone)
                let zoneID = zoneState.id
                var executor = RecordWriteExecutor(
                    writes: writes, zone: zoneState,
                    schema: try self.loadSchema(db, container: database.container, environment: database.environment),
                    environment: database.environment, atomic: atomic, context: context)
                var step = executor.start()
                while true {
                    switch step {
                    case .fetchRecords(let names):
                        step = executor.resume(.records(try Self.fetchRecords(db, zoneID: zoneID, names: names)))
                    case .checkAssets(let record, let checksums, let uploaded):
                        step = executor.resume(
                            .knownAssets(
                                try Self.knownAssets(db, zoneID: zoneID, record: record, checksums: checksums, uploaded: uploaded)))
                    case .findReferrers(let target, let action):
                        step = executor.resume(.names(try Self.referrers(db, zoneID: zoneID, target: target, action: action)))
                    case .countReferrers(let target, let action, let source):
                        let count = try Int.fetchOne(
                            db.cachedStatement(sql: """
                                SELECT count(*) FROM record_references
                                WHERE zone_id = ? AND target = ? AND action = ? AND source != ?
                                """),
                            arguments: [zoneID, target, action.rawValue, source]) ?? 0
                        step = executor.resume(.count(count))
                    case .write(let rows):
                        try Self.write(rows, zoneID: zoneID, db)
                        step = executor.resume(.written)
                    case .finish(let completion):
                        outcome = completion.outcome
                        guard completion.commits else { return .rollback }
                        if let schema = completion.grownSchema {
                            try Self.storeSchema(db, schema, container: database.container, environment: database.environment)
                        }
                        if let sequence = completion.zoneSequence {
                            // The default zone has no place in the database feed, so it does not advance it.
                            let changeSequence = zone == ZoneID.defaultZoneName
                                ? nil : try Self.nextDatabaseSequence(db, databaseID)
                            try db.cachedStatement(
                                sql: "UPDATE zones SET seq = ?, change_seq = coalesce(?, change_seq), changed_ms = ? WHERE id = ?"
                            ).execute(arguments: [sequence, changeSequence, context.timestamp, zoneID])
                        }
                        return .commit
                    }
                }
            }
            return outcome
        }
    }

    /// Which of `checksums` a record may hold: the uploaded ones the store has, the others its
    /// previous version held.
    private static func knownAssets(
        _ db: Database, zoneID: Int64, record: String, checksums: [String], uploaded: Set<String>
    ) throws -> Set<String> {
        try Set(
            checksums.filter { checksum in
                uploaded.contains(checksum)
                    ? try Bool.fetchOne(
                        db.cachedStatement(sql: "SELECT 1 FROM assets WHERE checksum = ?"), arguments: [checksum]) != nil
                    : try Bool.fetchOne(
                        db.cachedStatement(
                            sql: "SELECT 1 FROM record_assets WHERE zone_id = ? AND name = ? AND checksum = ?"),
                        arguments: [zoneID, record, checksum]) != nil
            })
    }

    /// The records whose references with `action` point at `target`.
    private static func referrers(
        _ db: Database, zoneID: Int64, target: String, action: ReferenceAction
    ) throws -> [String] {
        try String.fetchAll(
            db.cachedStatement(sql: "SELECT source FROM record_references WHERE zone_id = ? AND target = ? AND action = ?"),
            arguments: [zoneID, target, action.rawValue])
    }

    /// Writes the rows of one operation: each record with its index entries, then the operation's
    /// asset holdings and references.
    private static func write(_ rows: RecordWriteExecutor.RecordRows, zoneID: Int64, _ db: Database) throws {
        for change in rows.records {
            let record = change.record
            try upsert(db, zoneID: zoneID, record)
            if let previous = change.previous, !change.removedIndexEntries.isEmpty {
                let delete = try db.cachedStatement(
                    sql: """
                        DELETE FROM record_index
                        WHERE zone_id = ? AND record_type = ? AND field = ? AND kind = ? AND value = ? AND name = ?
                        """)
                for entry in change.removedIndexEntries {
                    try delete.execute(arguments: [
                        zoneID, previous.recordType, entry.field, entry.kind.rawValue, entry.value.databaseValue,
                        previous.name,
                    ])
                }
            }
            try insertIndexEntries(db, zoneID: zoneID, record, change.addedIndexEntries)
            // A record's reference and asset rows exist only if its previous version held some.
            if change.clearsReferences {
                try db.cachedStatement(sql: "DELETE FROM record_references WHERE zone_id = ? AND source = ?")
                    .execute(arguments: [zoneID, record.name])
            }
            if change.clearsAssets {
                try db.cachedStatement(sql: "DELETE FROM record_assets WHERE zone_id = ? AND name = ?")
                    .execute(arguments: [zoneID, record.name])
            }
        }
        let name = rows.records[0].record.name
        for checksum in rows.assets {
            try db.cachedStatement(sql: "INSERT INTO record_assets (zone_id, name, checksum) VALUES (?, ?, ?)")
                .execute(arguments: [zoneID, name, checksum])
        }
        for link in rows.references {
            try db.cachedStatement(
                sql: "INSERT INTO record_references (zone_id, source, target, action) VALUES (?, ?, ?, ?)"
            ).execute(arguments: [zoneID, name, link.target, link.action.rawValue])
        }
    }

    /// Inserts query index entries of a record.
    private static func insertIndexEntries(
        _ db: Database, zoneID: Int64, _ record: StoredRecord, _ entries: some Collection<IndexEntry>
    ) throws {
        guard !entries.isEmpty else { return }
        let insert = try db.cachedStatement(
            sql: """
                INSERT OR IGNORE INTO record_index (zone_id, record_type, field, kind, value, longitude, name)
                VALUES (?, ?, ?, ?, ?, ?, ?)
                """)
        // Bound through SQLite's C API: a record has a dozen entries or more, and GRDB's argument
        // arrays cost more than the inserts themselves.
        let handle = insert.sqliteStatement
        let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
        func bind(_ index: Int32, _ text: String) {
            sqlite3_bind_text(handle, index, text, -1, transient)
        }
        defer {
            sqlite3_reset(handle)
            sqlite3_clear_bindings(handle)
        }
        for entry in entries {
            sqlite3_reset(handle)
            sqlite3_bind_int64(handle, 1, zoneID)
            bind(2, record.recordType)
            bind(3, entry.field)
            sqlite3_bind_int64(handle, 4, Int64(entry.kind.rawValue))
            switch entry.value {
            case .integer(let value): sqlite3_bind_int64(handle, 5, value)
            case .real(let value): sqlite3_bind_double(handle, 5, value)
            case .text(let value): bind(5, value)
            }
            if let longitude = entry.longitude {
                sqlite3_bind_double(handle, 6, longitude)
            } else {
                sqlite3_bind_null(handle, 6)
            }
            bind(7, record.name)
            let code = sqlite3_step(handle)
            guard code == SQLITE_DONE else {
                throw DatabaseError(
                    resultCode: ResultCode(rawValue: code), message: String(cString: sqlite3_errmsg(db.sqliteConnection)),
                    sql: insert.sql)
            }
        }
    }

    public func lookupRecords(names: [String], zone: String, in database: DatabaseLocator) async throws
        -> [StoredRecord?]
    {
        try await withDatabase(database) { db, databaseID in
            let zoneState = try Self.requireZone(db, databaseID, zone)
            return try names.map { name in
                try Self.fetchRecord(db, zoneID: zoneState.id, name: name).flatMap { $0.deleted ? nil : $0 }
            }
        }
    }

    public func recordChanges(
        zone: String, in database: DatabaseLocator, after position: ChangePosition?, limit: Int,
        recordTypes: Set<String>?
    ) async throws -> RecordChangesPage {
        try await withDatabase(database) { db, databaseID in
            let zoneState = try Self.requireZone(db, databaseID, zone)
            let start = try ChangePosition.start(after: position, scopeID: zoneState.id, sequence: zoneState.sequence,
                                          purged: zoneState.purgedSequence, what: "zone '\(zone)'")
            var sql = "SELECT \(Self.recordColumns) FROM records WHERE zone_id = ? AND seq > ?"
            var arguments: StatementArguments = [zoneState.id, start]
            if let recordTypes {
                sql += " AND (deleted = 1 OR record_type IN (\(recordTypes.map { _ in "?" }.joined(separator: ","))))"
                arguments += StatementArguments(Array(recordTypes))
            }
            sql += " ORDER BY seq LIMIT ?"
            arguments += [limit + 1]
            let records = try Self.fetchStoredRecords(db, db.cachedStatement(sql: sql), arguments: arguments)
            return RecordChangesPage(zone: zoneState, fetched: records, limit: limit)
        }
    }

    public func databaseChanges(
        in database: DatabaseLocator, after position: ChangePosition?, limit: Int
    ) async throws -> DatabaseChangesPage {
        try await withDatabase(database) { db, databaseID in
            let row = try Row.fetchOne(db, sql: "SELECT seq, purged_seq FROM databases WHERE id = ?", arguments: [databaseID])!
            let sequence: Int64 = row["seq"]
            let start = try ChangePosition.start(after: position, scopeID: databaseID, sequence: sequence,
                                          purged: row["purged_seq"], what: "database")
            let rows = try Row.fetchAll(
                db,
                sql: "SELECT * FROM zones WHERE database_id = ? AND change_seq > ? AND name != ? ORDER BY change_seq LIMIT ?",
                arguments: [databaseID, start, ZoneID.defaultZoneName, limit + 1])
            let moreComing = rows.count > limit
            let page = rows.prefix(limit)
            let end: Int64 = moreComing ? page.last!["change_seq"] : sequence
            return DatabaseChangesPage(
                zones: page.map(Self.zoneState), position: ChangePosition(scopeID: databaseID, sequence: end),
                moreComing: moreComing)
        }
    }

    // MARK: Schema

    /// The schema of a container's environment, decoded once per version.
    private func loadSchema(_ db: Database, container: String, environment: ContainerEnvironment) throws -> Schema {
        let key = container + "\u{0}" + environment.rawValue
        guard let row = try Row.fetchOne(
            db.cachedStatement(sql: "SELECT version FROM schemas WHERE container_id = ? AND environment = ?"),
            arguments: [container, environment.rawValue])
        else { return Schema() }
        let version: Int64 = row["version"]
        if let cached = schemas.withLock({ $0[key] }), cached.version == version { return cached.schema }
        let definition = try Data.fetchOne(
            db, sql: "SELECT definition FROM schemas WHERE container_id = ? AND environment = ?",
            arguments: [container, environment.rawValue]) ?? Data()
        let schema = try Schema(jsonBytes: [UInt8](definition))
        schemas.withLock { $0[key] = (version, schema) }
        return schema
    }

    /// Stores a new version of a schema. The cache is left alone: it is filled by reads, so a
    /// version rolled back with its transaction is never cached.
    private static func storeSchema(
        _ db: Database, _ schema: Schema, container: String, environment: ContainerEnvironment
    ) throws {
        try db.execute(
            sql: """
                INSERT INTO schemas (container_id, environment, version, definition) VALUES (?, ?, 1, ?)
                ON CONFLICT (container_id, environment) DO UPDATE SET
                    version = version + 1, definition = excluded.definition
                """,
            arguments: [container, environment.rawValue, Data(schema.jsonBytes)])
    }

    public func schema(container: String, environment: ContainerEnvironment) async throws -> Schema {
        try await pool.read { db in try self.loadSchema(db, container: container, environment: environment) }
    }

    public func updateSchema(
        container: String, environment: ContainerEnvironment, _ change: @escaping @Sendable (Schema) throws -> Schema
    ) async throws -> Schema {
        try await pool.write { db in
            let old = try self.loadSchema(db, container: container, environment: environment)
            let new = try change(old)
            guard new != old else { return old }
            try Self.storeSchema(db, new, container: container, environment: environment)
            // Records of types whose index options grew get their entries now.
            let zones = try Int64.fetchAll(
                db,
                sql: """
                    SELECT zones.id FROM zones JOIN databases ON databases.id = zones.database_id
                    WHERE databases.container_id = ? AND databases.environment = ? AND zones.deleted = 0
                    """,
                arguments: [container, environment.rawValue])
            for backfill in IndexBackfill.needed(from: old, to: new) {
                for zoneID in zones {
                    for field in backfill.fields {
                        try db.execute(
                            sql: "DELETE FROM record_index WHERE zone_id = ? AND record_type = ? AND field = ?",
                            arguments: [zoneID, backfill.recordType, field])
                    }
                    let records = try Self.fetchStoredRecords(
                        db,
                        db.cachedStatement(
                            sql: "SELECT \(Self.recordColumns) FROM records WHERE zone_id = ? AND record_type = ? AND deleted = 0"),
                        arguments: [zoneID, backfill.recordType])
                    for record in records {
                        try Self.insertIndexEntries(db, zoneID: zoneID, record, backfill.entries(of: record))
                    }
                }
            }
            return new
        }
    }

    public func deleteData(container: String, environment: ContainerEnvironment) async throws {
        try await pool.write { db in
            let zones = """
                SELECT zones.id FROM zones JOIN databases ON databases.id = zones.database_id
                WHERE databases.container_id = ? AND databases.environment = ?
                """
            let arguments: StatementArguments = [container, environment.rawValue]
            for table in ["records", "record_references", "record_index", "record_assets"] {
                try db.execute(sql: "DELETE FROM \(table) WHERE zone_id IN (\(zones))", arguments: arguments)
            }
            try db.execute(sql: "DELETE FROM zones WHERE id IN (\(zones))", arguments: arguments)
            try db.execute(
                sql: "DELETE FROM databases WHERE container_id = ? AND environment = ?", arguments: arguments)
            try db.execute(
                sql: "DELETE FROM subscriptions WHERE container_id = ? AND environment = ?", arguments: arguments)
        }
    }

    // MARK: Subscriptions

    public func subscriptions(in database: DatabaseLocator, subscriber: String?) async throws -> [StoredSubscription] {
        try await pool.read { db in
            var sql = """
                SELECT subscriber, definition, created_ms FROM subscriptions
                WHERE container_id = ? AND environment = ? AND scope = ? AND owner = ?
                """
            var arguments: StatementArguments = [
                database.container, database.environment.rawValue, database.scope.rawValue, database.owner,
            ]
            if let subscriber {
                sql += " AND subscriber = ?"
                arguments += [subscriber]
            }
            return try Row.fetchAll(db, sql: sql + " ORDER BY subscriber, subscription_id", arguments: arguments).map { row in
                StoredSubscription(
                    database: database, subscriber: row["subscriber"],
                    // Definitions were written by saveSubscription, so they decode.
                    definition: try SubscriptionDictionary(jsonBytes: [UInt8](row["definition"] as Data)),
                    createdAt: row["created_ms"])
            }
        }
    }

    public func saveSubscription(_ subscription: StoredSubscription) async throws {
        let database = subscription.database
        try await pool.write { db in
            try db.execute(
                sql: """
                    INSERT INTO subscriptions
                        (container_id, environment, scope, owner, subscriber, subscription_id, definition, created_ms)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                    ON CONFLICT (container_id, environment, scope, owner, subscriber, subscription_id)
                    DO UPDATE SET definition = excluded.definition
                    """,
                arguments: [
                    database.container, database.environment.rawValue, database.scope.rawValue, database.owner,
                    subscription.subscriber, subscription.subscriptionID, Data(subscription.definition.jsonBytes),
                    subscription.createdAt,
                ])
        }
    }

    public func deleteSubscription(id: String, subscriber: String, in database: DatabaseLocator) async throws -> Bool {
        try await pool.write { db in
            try db.execute(
                sql: """
                    DELETE FROM subscriptions WHERE container_id = ? AND environment = ? AND scope = ? AND owner = ?
                    AND subscriber = ? AND subscription_id = ?
                    """,
                arguments: [
                    database.container, database.environment.rawValue, database.scope.rawValue, database.owner,
                    subscriber, id,
                ])
            return db.changesCount > 0
        }
    }

    // MARK: Push tokens

    public func createPushToken(hash: String, token: PushTokenInfo) async throws {
        try await pool.write { db in
            try Self.requireContainer(db, token.container)
            try db.execute(
                sql: """
                    INSERT INTO push_tokens (token_hash, container_id, environment, user_record_name, device_id, created_ms, used_ms)
                    VALUES (?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    hash, token.container, token.environment.rawValue, token.userRecordName, token.deviceID,
                    token.createdAt, token.usedAt,
                ])
        }
    }

    public func pushToken(hash: String) async throws -> PushTokenInfo? {
        try await pool.read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM push_tokens WHERE token_hash = ?", arguments: [hash]).map { row in
                PushTokenInfo(
                    container: row["container_id"],
                    environment: ContainerEnvironment(rawValue: row["environment"]) ?? .development,
                    userRecordName: row["user_record_name"], deviceID: row["device_id"], createdAt: row["created_ms"],
                    usedAt: row["used_ms"])
            }
        }
    }

    public func registerPushToken(
        hash: String, userRecordName: String, deviceID: String?, timestamp: Int64
    ) async throws -> Bool {
        try await pool.write { db in
            try db.execute(
                sql: "UPDATE push_tokens SET user_record_name = ?, device_id = ?, used_ms = ? WHERE token_hash = ?",
                arguments: [userRecordName, deviceID, timestamp, hash])
            return db.changesCount > 0
        }
    }

    public func markPushTokenUsed(hash: String, timestamp: Int64) async throws {
        try await pool.write { db in
            try db.execute(
                sql: "UPDATE push_tokens SET used_ms = max(used_ms, ?) WHERE token_hash = ?", arguments: [timestamp, hash])
        }
    }

    public func purgePushTokens(unusedSince timestamp: Int64) async throws -> Int {
        try await pool.write { db in
            try db.execute(sql: "DELETE FROM push_tokens WHERE used_ms < ?", arguments: [timestamp])
            return db.changesCount
        }
    }

    // MARK: Queries

    public func queryRecords(_ query: RecordQuery, zones names: [String]?, in database: DatabaseLocator) async throws
        -> QueryPage
    {
        let zoneIDs: [(String, Int64)] = try await withDatabase(database) { db, databaseID in
            if let names {
                return try names.map { ($0, try Self.requireZone(db, databaseID, $0).id) }
            }
            return try Row.fetchAll(
                db, sql: "SELECT name, id FROM zones WHERE database_id = ? AND deleted = 0 ORDER BY name",
                arguments: [databaseID]
            ).map { ($0["name"], $0["id"]) }
        }
        return try await QueryExecutor.run(
            query, reader: QueryReader(pool: pool, zoneIDs: Dictionary(uniqueKeysWithValues: zoneIDs),
                                       zones: zoneIDs.map(\.0), recordType: query.recordType))
    }

    /// Reads the query index of some zones for ``QueryExecutor``, one read per step.
    private struct QueryReader: QueryIndexReader {
        let pool: DatabasePool
        let zoneIDs: [String: Int64]
        let zones: [String]
        let recordType: String

        private var zoneNames: [Int64: String] {
            Dictionary(uniqueKeysWithValues: zoneIDs.map { ($1, $0) })
        }

        /// `AND value >= ? AND value < ?` for a range, with its arguments.
        private static func bounds(_ range: ScalarRange) -> (sql: String, arguments: StatementArguments) {
            var sql = ""
            var arguments = StatementArguments()
            if let lower = range.lower {
                sql += lower.inclusive ? " AND value >= ?" : " AND value > ?"
                arguments += [lower.value.databaseValue]
            }
            if let upper = range.upper {
                sql += upper.inclusive ? " AND value <= ?" : " AND value < ?"
                arguments += [upper.value.databaseValue]
            }
            return (sql, arguments)
        }

        func scanValues(
            zone: String, field: String, range: ScalarRange, descending: Bool, after: (QueryScalar, String)?,
            limit: Int
        ) async throws -> [(value: QueryScalar, name: String)] {
            var sql = "SELECT value, name FROM record_index WHERE zone_id = ? AND record_type = ? AND field = ? AND kind = 0"
            var arguments: StatementArguments = [zoneIDs[zone], recordType, field]
            let bounds = Self.bounds(range)
            sql += bounds.sql
            arguments += bounds.arguments
            if let after {
                sql += descending ? " AND (value, name) < (?, ?)" : " AND (value, name) > (?, ?)"
                arguments += [after.0.databaseValue, after.1]
            }
            sql += descending ? " ORDER BY value DESC, name DESC LIMIT ?" : " ORDER BY value, name LIMIT ?"
            arguments += [limit]
            return try await pool.read { [sql, arguments] db in
                try Row.fetchAll(db.cachedStatement(sql: sql), arguments: arguments).compactMap { row in
                    QueryScalar(row[0] as DatabaseValue).map { ($0, row[1]) }
                }
            }
        }

        func candidates(_ source: CandidateSource) async throws -> [(zone: String, name: String)] {
            let zoneList = zones.map { _ in "?" }.joined(separator: ",")
            var arguments = StatementArguments(zones.map { zoneIDs[$0]! })
            arguments += [recordType]
            var sql = "SELECT DISTINCT zone_id, name FROM record_index WHERE zone_id IN (\(zoneList)) AND record_type = ?"
            func list(_ count: Int) -> String { Array(repeating: "?", count: count).joined(separator: ",") }
            switch source {
            case .values(let field, let values):
                sql += " AND field = ? AND kind = 0 AND value IN (\(list(values.count)))"
                arguments += [field]
                arguments += StatementArguments(values.map(\.databaseValue))
            case .range(let field, let range):
                let bounds = Self.bounds(range)
                sql += " AND field = ? AND kind = 0" + bounds.sql
                arguments += [field]
                arguments += bounds.arguments
            case .tokens(let fields, let tokens):
                sql += " AND field IN (\(list(fields.count))) AND kind = 1 AND value IN (\(list(tokens.count)))"
                arguments += StatementArguments(fields)
                arguments += StatementArguments(tokens)
            case .latitudes(let field, let range):
                let bounds = Self.bounds(range)
                sql += " AND field = ? AND kind = 2" + bounds.sql
                arguments += [field]
                arguments += bounds.arguments
            case .allOfType:
                sql = "SELECT zone_id, name FROM records WHERE zone_id IN (\(zoneList)) AND record_type = ? AND deleted = 0"
            }
            let zoneNames = zoneNames
            return try await pool.read { [sql, arguments] db in
                try Row.fetchAll(db, sql: sql, arguments: arguments).map { row in (zoneNames[row[0]] ?? "", row[1]) }
            }
        }

        func records(zone: String, names: [String]) async throws -> [StoredRecord] {
            guard let zoneID = zoneIDs[zone] else { return [] }
            return try await pool.read { db in
                try SQLiteStorage.fetchRecords(db, zoneID: zoneID, names: names).values.filter { !$0.deleted }
            }
        }
    }

    // MARK: Assets

    public func registerAsset(checksum: String, size: Int64, timestamp: Int64) async throws {
        try await pool.write { db in
            try db.execute(
                sql: """
                    INSERT INTO assets (checksum, size, registered_ms) VALUES (?, ?, ?)
                    ON CONFLICT (checksum) DO UPDATE SET registered_ms = max(registered_ms, excluded.registered_ms)
                    """,
                arguments: [checksum, size, timestamp])
        }
    }

    public func collectAssets(registeredBefore timestamp: Int64) async throws -> [String] {
        try await pool.write { db in
            try String.fetchAll(
                db,
                sql: """
                    DELETE FROM assets WHERE registered_ms < ?
                        AND NOT EXISTS (SELECT 1 FROM record_assets WHERE record_assets.checksum = assets.checksum)
                    RETURNING checksum
                    """,
                arguments: [timestamp])
        }
    }

    // MARK: Export and import

    public func users(container: String) async throws -> [UserInfo] {
        try await pool.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM users WHERE container_id = ? ORDER BY record_name", arguments: [container])
                .map(Self.userInfo)
        }
    }

    public func apiTokens(container: String) async throws -> [APITokenInfo] {
        try await pool.read { db in
            try Row.fetchAll(
                db, sql: "SELECT * FROM api_tokens WHERE container_id = ? ORDER BY created_ms, token_hash",
                arguments: [container]
            ).map { APITokenInfo(hash: $0["token_hash"], container: container, name: $0["name"], createdAt: $0["created_ms"]) }
        }
    }

    public func databases(container: String) async throws -> [DatabaseLocator] {
        try await pool.read { db in
            try Row.fetchAll(
                db, sql: "SELECT environment, scope, owner FROM databases WHERE container_id = ? ORDER BY id",
                arguments: [container]
            ).compactMap { row in
                guard let environment = ContainerEnvironment(rawValue: row["environment"]),
                    let scope = DatabaseScope(rawValue: row["scope"])
                else { return nil }
                return DatabaseLocator(container: container, environment: environment, scope: scope, owner: row["owner"])
            }
        }
    }

    public func importRecords(_ records: [StoredRecord], zone: String, in database: DatabaseLocator) async throws {
        try await pool.write { db in
            let databaseID = try Self.ensureDatabase(db, database)
            if try Self.liveZone(db, databaseID, zone) == nil {
                let timestamp = records.first?.modified.timestamp ?? 0
                try db.execute(
                    sql: "INSERT INTO zones (database_id, name, change_seq, created_ms, changed_ms) VALUES (?, ?, ?, ?, ?)",
                    arguments: [databaseID, zone, try Self.nextDatabaseSequence(db, databaseID), timestamp, timestamp])
            }
            let zoneState = try Self.requireZone(db, databaseID, zone)
            let (rows, sequence) = RecordWriteExecutor.importRows(
                records, zone: zoneState, current: try Self.fetchRecords(db, zoneID: zoneState.id, names: records.map(\.name)),
                schema: try self.loadSchema(db, container: database.container, environment: database.environment))
            for operation in rows { try Self.write(operation, zoneID: zoneState.id, db) }
            try db.execute(sql: "UPDATE zones SET seq = ? WHERE id = ?", arguments: [sequence, zoneState.id])
        }
    }

    // MARK: Maintenance

    public func purgeTombstones(before timestamp: Int64) async throws -> Int {
        try await pool.write { db in
            try db.execute(
                sql: """
                    UPDATE zones SET purged_seq = max(purged_seq, purged.seq)
                    FROM (SELECT zone_id, max(seq) AS seq FROM records WHERE deleted = 1 AND modified_ms < ?
                          GROUP BY zone_id) AS purged
                    WHERE zones.id = purged.zone_id
                    """, arguments: [timestamp])
            try db.execute(sql: "DELETE FROM records WHERE deleted = 1 AND modified_ms < ?", arguments: [timestamp])
            var removed = db.changesCount
            try db.execute(
                sql: """
                    UPDATE databases SET purged_seq = max(purged_seq, purged.seq)
                    FROM (SELECT database_id, max(change_seq) AS seq FROM zones WHERE deleted = 1 AND changed_ms < ?
                          GROUP BY database_id) AS purged
                    WHERE databases.id = purged.database_id
                    """, arguments: [timestamp])
            try db.execute(sql: "DELETE FROM zones WHERE deleted = 1 AND changed_ms < ?", arguments: [timestamp])
            removed += db.changesCount
            return removed
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
