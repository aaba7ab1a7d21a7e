import Foundation
import GRDB
import GRDBSQLite
import StratusModel
public import StratusStorage
import Synchronization

/// The ``RecordStorage`` role (the type conforms through ``StratusStorage``).
extension SQLiteStorage {
    // MARK: Databases and zones

    /// The database's storage identifier, creating the database and its default zone on first use.
    static func ensureDatabase(_ db: Database, _ locator: DatabaseLocator) throws -> Int64 {
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

    static func existingDatabase(_ db: Database, _ locator: DatabaseLocator) throws -> Int64? {
        try db.cachedStatement(
            sql: "SELECT id FROM databases WHERE container_id = ? AND environment = ? AND scope = ? AND owner = ?"
        ).firstInteger(locator.container, locator.environment.rawValue, locator.scope.rawValue, locator.owner)
    }

    /// Runs `body` with the database's identifier: in a read when the database exists, otherwise in
    /// a write that creates it first.
    func withDatabase<T: Sendable>(
        _ locator: DatabaseLocator, _ body: @escaping @Sendable (Database, Int64) throws -> T
    ) async throws -> T {
        let result: T? = try await pool.read { db in
            try Self.existingDatabase(db, locator).map { try body(db, $0) }
        }
        if let result { return result }
        return try await pool.write { db in try body(db, try Self.ensureDatabase(db, locator)) }
    }

    static func zoneState(_ row: Row) -> ZoneState {
        ZoneState(
            name: row["name"], id: row["id"], sequence: row["seq"], purgedSequence: row["purged_seq"],
            deleted: row["deleted"])
    }

    static func liveZone(_ db: Database, _ databaseID: Int64, _ name: String) throws -> ZoneState? {
        let statement = try db.cachedStatement(
            sql: "SELECT id, seq, purged_seq FROM zones WHERE database_id = ? AND name = ? AND deleted = 0")
        statement.bind(databaseID, name)
        defer { sqlite3_reset(statement.sqliteStatement) }
        guard try statement.step() else { return nil }
        let handle = statement.sqliteStatement
        return ZoneState(
            name: name, id: sqlite3_column_int64(handle, 0), sequence: sqlite3_column_int64(handle, 1),
            purgedSequence: sqlite3_column_int64(handle, 2), deleted: false)
    }

    static func requireZone(_ db: Database, _ databaseID: Int64, _ name: String) throws -> ZoneState {
        guard let zone = try liveZone(db, databaseID, name) else {
            throw StratusError(.zoneNotFound, "zone '\(name)' does not exist")
        }
        return zone
    }

    /// Takes the database's next sequence number, which orders zone changes. An update, then a read:
    /// SQLite keeps the rows of an `UPDATE … RETURNING` in a temporary B-tree that it opens and closes
    /// at every run, which took about a seventh of the writer's time per save under 64 writers.
    static func nextDatabaseSequence(_ db: Database, _ databaseID: Int64) throws -> Int64 {
        try db.cachedStatement(sql: "UPDATE databases SET seq = seq + 1 WHERE id = ?").run(databaseID)
        return try db.cachedStatement(sql: "SELECT seq FROM databases WHERE id = ?").firstInteger(databaseID)!
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
        -> (zone: ZoneState, created: Bool)
    {
        try await pool.write { db in
            let databaseID = try Self.ensureDatabase(db, database)
            if let zone = try Self.liveZone(db, databaseID, name) { return (zone, false) }
            let changeSequence = try Self.nextDatabaseSequence(db, databaseID)
            try db.execute(
                sql: "INSERT INTO zones (database_id, name, change_seq, created_ms, changed_ms) VALUES (?, ?, ?, ?, ?)",
                arguments: [databaseID, name, changeSequence, timestamp, timestamp])
            return (try Self.requireZone(db, databaseID, name), true)
        }
    }

    public func deleteZone(named name: String, in database: DatabaseLocator, timestamp: Int64) async throws -> Bool {
        precondition(name != ZoneID.defaultZoneName, "the default zone cannot be deleted")
        return try await pool.write { db in
            let databaseID = try Self.ensureDatabase(db, database)
            guard let zone = try Self.liveZone(db, databaseID, name) else { return false }
            try Self.deleteContents(ofZones: "?", arguments: [zone.id], db)
            let changeSequence = try Self.nextDatabaseSequence(db, databaseID)
            try db.execute(
                sql: "UPDATE zones SET deleted = 1, change_seq = ?, changed_ms = ? WHERE id = ?",
                arguments: [changeSequence, timestamp, zone.id])
            return true
        }
    }

    /// The tables that hold what is in a zone, by `zone_id`: its records with their query index,
    /// reference, asset and share rows, and what each account holds in it.
    static let zoneContentTables = [
        "records", "record_references", "record_index", "record_assets", "shares", "share_participants",
        "account_usage",
    ]

    /// Deletes what is in the zones whose IDs `zones` (SQL taking `arguments`) selects: their records
    /// and every row that goes with them (``zoneContentTables``). Assets the records held are then
    /// held by no record of theirs, and ``collectAssets(registeredBefore:)`` collects those no other
    /// record holds.
    static func deleteContents(ofZones zones: String, arguments: StatementArguments, _ db: Database) throws {
        for table in zoneContentTables {
            try db.execute(sql: "DELETE FROM \(table) WHERE zone_id IN (\(zones))", arguments: arguments)
        }
    }

    // MARK: Records

    static let recordColumns = """
        name, record_type, change_tag, fields, created_ms, created_by, created_device, modified_ms, modified_by,
        modified_device, seq, deleted
        """

    /// Runs a statement selecting ``recordColumns``, its arguments bound, and decodes its rows,
    /// reading columns through SQLite's C API: GRDB's generic row decoding cost more than the read
    /// itself on change feeds. The type and the stamps' users and devices, which rows of a page
    /// mostly share, are made into strings once while they repeat.
    static func fetchStoredRecords(_ statement: Statement) throws -> [StoredRecord] {
        let handle = statement.sqliteStatement
        defer { sqlite3_reset(handle) }
        var records: [StoredRecord] = []
        var recordType = RepeatedText(), createdBy = RepeatedText(), createdDevice = RepeatedText()
        var modifiedBy = RepeatedText(), modifiedDevice = RepeatedText()
        while try statement.step() {
            var fields: [UInt8] = []
            if let blob = sqlite3_column_blob(handle, 3) {
                fields = [UInt8](UnsafeRawBufferPointer(start: blob, count: Int(sqlite3_column_bytes(handle, 3))))
            }
            records.append(
                StoredRecord(
                    name: RepeatedText.text(handle, 0) ?? "", recordType: recordType.text(handle, 1) ?? "",
                    changeTag: RepeatedText.text(handle, 2) ?? "", fieldsJSON: fields,
                    created: RecordStamp(timestamp: sqlite3_column_int64(handle, 4),
                                         userRecordName: createdBy.text(handle, 5) ?? "",
                                         deviceID: createdDevice.text(handle, 6)),
                    modified: RecordStamp(timestamp: sqlite3_column_int64(handle, 7),
                                          userRecordName: modifiedBy.text(handle, 8) ?? "",
                                          deviceID: modifiedDevice.text(handle, 9)),
                    deleted: sqlite3_column_int64(handle, 11) != 0, sequence: sqlite3_column_int64(handle, 10)))
        }
        return records
    }

    static func fetchRecord(_ db: Database, zoneID: Int64, name: String) throws -> StoredRecord? {
        let statement = try db.cachedStatement(sql: "SELECT \(recordColumns) FROM records WHERE zone_id = ? AND name = ?")
        statement.bind(zoneID, name)
        return try fetchStoredRecords(statement).first
    }

    /// The stored rows (tombstones included) of `names`, read with one query per 500 names.
    static func fetchRecords(_ db: Database, zoneID: Int64, names: [String]) throws -> [String: StoredRecord] {
        var records: [String: StoredRecord] = [:]
        records.reserveCapacity(names.count)
        for start in stride(from: 0, to: names.count, by: 500) {
            let chunk = names[start..<min(start + 500, names.count)]
            let placeholders = Array(repeating: "?", count: chunk.count).joined(separator: ",")
            let statement = try db.cachedStatement(
                sql: "SELECT \(recordColumns) FROM records WHERE zone_id = ? AND name IN (\(placeholders))")
            statement.bind(zoneID)
            for (offset, name) in chunk.enumerated() {
                _ = TextBinding(name).bind(to: statement.sqliteStatement, at: Int32(offset + 2))
            }
            for record in try fetchStoredRecords(statement) {
                records[record.name] = record
            }
        }
        return records
    }

    static func upsert(_ db: Database, zoneID: Int64, _ record: StoredRecord) throws {
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
        ).run(
            zoneID, record.name, record.recordType, record.changeTag, BlobBinding(record.fieldsJSON), record.created.timestamp,
            record.created.userRecordName, record.created.deviceID, record.modified.timestamp,
            record.modified.userRecordName, record.modified.deviceID, record.sequence, record.deleted)
    }

    public func modifyRecords(
        _ writes: [RecordWrite], zone: String, in database: DatabaseLocator, atomic: Bool, context: WriteContext
    ) async throws -> ModifyRecordsOutcome {
        // Concurrent writes commit together, each in its own savepoint (``GroupCommit``).
        try await groupCommit.write { db in
                let databaseID = try Self.ensureDatabase(db, database)
                let zoneState = try Self.requireZone(db, databaseID, zone)
                let zoneID = zoneState.id
                var executor = RecordWriteExecutor(
                    writes: writes, zone: zoneState, database: database,
                    schema: try self.loadSchema(db, container: database.container, environment: database.environment),
                    atomic: atomic, context: context)
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
                    case .readUsage(let account):
                        step = executor.resume(.usage(try Self.usage(db, container: database.container, account: account)))
                    case .write(let rows):
                        try Self.write(rows, zoneID: zoneID, db)
                        step = executor.resume(.written)
                    case .finish(let completion):
                        guard completion.commits else { return GroupCommit.Decision(outcome: completion.outcome, commits: false) }
                        if let schema = completion.grownSchema {
                            try Self.storeSchema(db, schema, container: database.container, environment: database.environment)
                        }
                        try Self.addUsage(db, completion.usageChanges, zoneID: zoneID)
                        if let sequence = completion.zoneSequence {
                            // The default zone has no place in the database feed, so it does not advance it.
                            let changeSequence = zone == ZoneID.defaultZoneName
                                ? nil : try Self.nextDatabaseSequence(db, databaseID)
                            try db.cachedStatement(
                                sql: "UPDATE zones SET seq = ?, change_seq = coalesce(?, change_seq), changed_ms = ? WHERE id = ?"
                            ).run(sequence, changeSequence, context.timestamp, zoneID)
                        }
                        return GroupCommit.Decision(outcome: completion.outcome, commits: true)
                    }
                }
        }
    }

    /// Which of `checksums` a record may hold: the uploaded ones the store has, the others its
    /// previous version held.
    static func knownAssets(
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
    static func referrers(
        _ db: Database, zoneID: Int64, target: String, action: ReferenceAction
    ) throws -> [String] {
        try String.fetchAll(
            db.cachedStatement(sql: "SELECT source FROM record_references WHERE zone_id = ? AND target = ? AND action = ?"),
            arguments: [zoneID, target, action.rawValue])
    }

    /// Writes the rows of one operation: each record with its index entries, then the operation's
    /// asset holdings and references.
    static func write(_ rows: RecordWriteExecutor.RecordRows, zoneID: Int64, _ db: Database) throws {
        for change in rows.records {
            let record = change.record
            try upsert(db, zoneID: zoneID, record)
            if let previous = change.previous, !change.removedIndexEntries.isEmpty {
                let delete = try db.cachedStatement(
                    sql: """
                        DELETE FROM record_index
                        WHERE zone_id = ? AND record_type = ? AND field = ? AND kind = ? AND value = ?
                            AND created_ms = ? AND name = ?
                        """)
                for entry in change.removedIndexEntries {
                    try delete.execute(arguments: [
                        zoneID, previous.recordType, entry.field, entry.kind.rawValue, entry.value.databaseValue,
                        previous.created.timestamp, previous.name,
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
            if change.clearsShare {
                for table in ["shares", "share_participants"] {
                    try db.cachedStatement(sql: "DELETE FROM \(table) WHERE zone_id = ? AND record_name = ?")
                        .execute(arguments: [zoneID, record.name])
                }
            }
            if let share = change.share {
                try db.cachedStatement(
                    sql: "INSERT INTO shares (zone_id, record_name, short_guid, public_permission) VALUES (?, ?, ?, ?)"
                ).execute(arguments: [zoneID, record.name, share.shortGUID, share.publicPermission.rawValue])
                for participant in share.participants {
                    try db.cachedStatement(
                        sql: """
                            INSERT INTO share_participants (zone_id, record_name, user_record_name, permission, status)
                            VALUES (?, ?, ?, ?, ?)
                            """
                    ).execute(arguments: [
                        zoneID, record.name, participant.userRecordName, participant.permission.rawValue,
                        participant.status.rawValue,
                    ])
                }
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

    /// Index rows one `INSERT` statement holds at most.
    static let indexRowsPerStatement = 32

    /// The statements inserting 1, 2, … ``indexRowsPerStatement`` index rows, of eight parameters each.
    static let indexInsertions: [String] = (1...indexRowsPerStatement).map { rows in
        "INSERT OR IGNORE INTO record_index (zone_id, record_type, field, kind, value, longitude, created_ms, name) VALUES "
            + Array(repeating: "(?, ?, ?, ?, ?, ?, ?, ?)", count: rows).joined(separator: ", ")
    }

    /// Inserts query index entries of a record, in key order, up to ``indexRowsPerStatement`` rows
    /// per statement.
    static func insertIndexEntries(
        _ db: Database, zoneID: Int64, _ record: StoredRecord, _ entries: some Collection<IndexEntry>
    ) throws {
        let sorted = entries.sorted { $0.precedes($1) }
        var start = 0
        while start < sorted.count {
            let rows = sorted[start..<min(start + indexRowsPerStatement, sorted.count)]
            try insertIndexRows(db, zoneID: zoneID, record, rows)
            start += rows.count
        }
    }

    /// Inserts at most ``indexRowsPerStatement`` index rows of a record with one statement, bound
    /// through SQLite's C API: a record has a dozen entries or more, and GRDB's argument arrays cost
    /// more than the inserts themselves.
    private static func insertIndexRows(
        _ db: Database, zoneID: Int64, _ record: StoredRecord, _ entries: ArraySlice<IndexEntry>
    ) throws {
        let insert = try db.cachedStatement(sql: indexInsertions[entries.count - 1])
        let handle = insert.sqliteStatement
        sqlite3_reset(handle)
        defer { sqlite3_reset(handle) }
        for (row, entry) in entries.enumerated() {
            let first = Int32(row * 8)
            _ = zoneID.bind(to: handle, at: first + 1)
            _ = TextBinding(record.recordType).bind(to: handle, at: first + 2)
            _ = TextBinding(entry.field).bind(to: handle, at: first + 3)
            _ = Int64(entry.kind.rawValue).bind(to: handle, at: first + 4)
            switch entry.value {
            case .integer(let value): _ = value.bind(to: handle, at: first + 5)
            case .real(let value): _ = value.bind(to: handle, at: first + 5)
            case .text(let value): _ = TextBinding(value).bind(to: handle, at: first + 5)
            }
            _ = entry.longitude.bind(to: handle, at: first + 6)
            _ = record.created.timestamp.bind(to: handle, at: first + 7)
            _ = TextBinding(record.name).bind(to: handle, at: first + 8)
        }
        while try insert.step() {}
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
            let (sql, arguments) = try Self.changeFeedQuery(
                Self.recordColumns, zone: zoneState, after: position, recordTypes: recordTypes, limit: limit + 1)
            let statement = try db.cachedStatement(sql: sql)
            try statement.setArguments(arguments)
            let records = try Self.fetchStoredRecords(statement)
            return RecordChangesPage(zone: zoneState, fetched: records, limit: limit)
        }
    }

    public func recordChangePageEnds(
        zone: String, in database: DatabaseLocator, after position: ChangePosition?, limit: Int,
        recordTypes: Set<String>?, count: Int
    ) async throws -> [ChangePosition] {
        try await withDatabase(database) { db, databaseID in
            let zoneState = try Self.requireZone(db, databaseID, zone)
            let (sql, arguments) = try Self.changeFeedQuery(
                "seq", zone: zoneState, after: position, recordTypes: recordTypes, limit: count * limit + 1)
            let sequences = try Int64.fetchAll(db.cachedStatement(sql: sql), arguments: arguments)
            return RecordChangesPage.ends(ofSequences: sequences, limit: limit, scopeID: zoneState.id)
        }
    }

    /// The query of a zone's changes after `position`, in change order, at most `limit` rows of
    /// `columns`; deletions and records of `recordTypes` only when given.
    private static func changeFeedQuery(
        _ columns: String, zone: ZoneState, after position: ChangePosition?, recordTypes: Set<String>?, limit: Int
    ) throws -> (String, StatementArguments) {
        let start = try ChangePosition.start(after: position, scopeID: zone.id, sequence: zone.sequence,
                                             purged: zone.purgedSequence, what: "zone '\(zone.name)'")
        var sql = "SELECT \(columns) FROM records WHERE zone_id = ? AND seq > ?"
        var arguments: StatementArguments = [zone.id, start]
        if let recordTypes {
            sql += " AND (deleted = 1 OR record_type IN (\(recordTypes.map { _ in "?" }.joined(separator: ","))))"
            arguments += StatementArguments(Array(recordTypes))
        }
        sql += " ORDER BY seq LIMIT ?"
        arguments += [limit]
        return (sql, arguments)
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
}

/// A text column's value as a string, the last one reused while the column repeats it.
private struct RepeatedText {
    private var last: String?

    /// The column's text; `nil` for NULL.
    static func text(_ handle: OpaquePointer, _ column: Int32) -> String? {
        guard let bytes = sqlite3_column_text(handle, column) else { return nil }
        return String(decoding: UnsafeBufferPointer(start: bytes, count: Int(sqlite3_column_bytes(handle, column))),
                      as: UTF8.self)
    }

    /// The column's text, the string made for the row before when the bytes are the same.
    mutating func text(_ handle: OpaquePointer, _ column: Int32) -> String? {
        guard let bytes = sqlite3_column_text(handle, column) else { return nil }
        let count = Int(sqlite3_column_bytes(handle, column))
        if var last, last.withUTF8({ $0.count == count && (count == 0 || memcmp($0.baseAddress!, bytes, count) == 0) }) {
            return last
        }
        let text = String(decoding: UnsafeBufferPointer(start: bytes, count: count), as: UTF8.self)
        last = text
        return text
    }
}
