import Logging
import NIOCore
import PostgresNIO
import StratusModel
import StratusStorage

/// The rows a write transaction has planned but not yet sent: records, their query index entries,
/// references, asset links and share rows. ``flush(_:advancing:logger:)`` sends them all in one
/// statement over arrays (one data-modifying `WITH` clause per kind), with the zone's new counters
/// when the transaction ends, so a group of saves holds its zone's lock for two round trips: this
/// statement and the commit.
///
/// The parts of one statement run in no set order, so they never touch the same row: a record is
/// buffered at most once per flush (the writer sends the buffer before adding a name it holds), an
/// index entry that stays under the same key is updated by its insertion instead of deleted, and
/// the reference, asset and share rows a record keeps are neither deleted nor inserted again.
struct RecordBatch {
    let zoneID: Int64

    private var records: [StoredRecord] = []
    private var names: Set<String> = []
    private var removedEntries = IndexRows()
    private var addedEntries = IndexRows()
    private var referencesCleared: [String] = []
    private var references: (sources: [String], targets: [String], actions: [String]) = ([], [], [])
    private var assetsCleared: [String] = []
    private var assets: (names: [String], checksums: [String]) = ([], [])
    private var sharesCleared: [String] = []
    private var shares: (names: [String], shortGUIDs: [String], permissions: [String]) = ([], [], [])
    private var participants: (names: [String], users: [String], permissions: [String], statuses: [String]) =
        ([], [], [], [])

    /// The counters a batch's last statement advances: the zone's last sequence number and, unless
    /// the zone is the default one, its place in the database's change feed.
    struct ZoneChange {
        let sequence: Int64
        let databaseID: Int64
        let advancesDatabase: Bool
        let timestamp: Int64
    }

    init(zoneID: Int64) {
        self.zoneID = zoneID
    }

    /// Whether the buffer holds a write of one of these records: then it must be sent before they
    /// are added.
    func holds(anyOf rows: RecordWriteExecutor.RecordRows) -> Bool {
        rows.records.contains { names.contains($0.record.name) }
    }

    /// Whether the buffer holds a write of one of `other`'s records.
    func holds(anyOf other: RecordBatch) -> Bool { !names.isDisjoint(with: other.names) }

    /// Buffers the rows of one operation as the write executor decided them; the buffer holds none
    /// of its records (``holds(anyOf:)``).
    mutating func add(_ rows: RecordWriteExecutor.RecordRows) {
        precondition(!holds(anyOf: rows), "a flush writes a record once: send the buffer first")
        for change in rows.records { add(change) }
        let name = rows.records[0].record.name
        for checksum in rows.assets.sorted() {
            assets.names.append(name)
            assets.checksums.append(checksum)
        }
        for link in rows.references {
            references.sources.append(name)
            references.targets.append(link.target)
            references.actions.append(link.action.rawValue)
        }
    }

    /// Buffers the rows of `other` after these; the buffer holds none of its records.
    mutating func append(_ other: RecordBatch) {
        precondition(!holds(anyOf: other), "a flush writes a record once: send the buffer first")
        records += other.records
        names.formUnion(other.names)
        removedEntries.append(other.removedEntries)
        addedEntries.append(other.addedEntries)
        referencesCleared += other.referencesCleared
        references.sources += other.references.sources
        references.targets += other.references.targets
        references.actions += other.references.actions
        assetsCleared += other.assetsCleared
        assets.names += other.assets.names
        assets.checksums += other.assets.checksums
        sharesCleared += other.sharesCleared
        shares.names += other.shares.names
        shares.shortGUIDs += other.shares.shortGUIDs
        shares.permissions += other.shares.permissions
        participants.names += other.participants.names
        participants.users += other.participants.users
        participants.permissions += other.participants.permissions
        participants.statuses += other.participants.statuses
    }

    /// Buffers a record's row, and the index, reference, asset and share rows its previous version
    /// leaves behind.
    private mutating func add(_ change: RecordWriteExecutor.RowChange) {
        let record = change.record
        records.append(record)
        names.insert(record.name)
        var addedKeys: Set<IndexRows.Key> = []
        for entry in change.addedIndexEntries {
            addedKeys.insert(addedEntries.append(entry, of: record))
        }
        if let previous = change.previous {
            for entry in change.removedIndexEntries
            where !addedKeys.contains(IndexRows.Key(entry, of: previous)) {
                removedEntries.append(entry, of: previous)
            }
        }
        if change.clearsReferences { referencesCleared.append(record.name) }
        if change.clearsAssets { assetsCleared.append(record.name) }
        if change.clearsShare { sharesCleared.append(record.name) }
        if let share = change.share {
            shares.names.append(record.name)
            shares.shortGUIDs.append(share.shortGUID)
            shares.permissions.append(share.publicPermission.rawValue)
            for participant in share.participants {
                participants.names.append(record.name)
                participants.users.append(participant.userRecordName)
                participants.permissions.append(participant.permission.rawValue)
                participants.statuses.append(participant.status.rawValue)
            }
        }
    }

    /// Sends the buffered rows, with the zone's new counters when given, in one statement, and
    /// empties the buffer.
    mutating func flush(
        _ connection: PostgresConnection, advancing zoneChange: ZoneChange? = nil, logger: Logger
    ) async throws {
        guard !records.isEmpty || zoneChange != nil else { return }
        try await connection.run(PostgresQuery(stringInterpolation: statement(advancing: zoneChange)), logger: logger)
        self = RecordBatch(zoneID: zoneID)
    }

    /// The one statement of a flush: a `WITH` part for each kind of row that changes, then the
    /// records' upsert.
    private func statement(advancing zoneChange: ZoneChange?) -> PostgresQuery.StringInterpolation {
        var sql = PostgresQuery.StringInterpolation(literalCapacity: 4_096, interpolationCount: 64)
        var parts = 0
        func part(_ name: String) {
            sql.appendLiteral(parts == 0 ? "WITH " : ",\n")
            sql.appendLiteral(name + " AS (")
            parts += 1
        }
        if !removedEntries.isEmpty {
            part("removed_entries")
            removedEntries.appendDeletion(to: &sql, zoneID: zoneID)
            sql.appendLiteral(")")
        }
        if !addedEntries.isEmpty {
            part("added_entries")
            addedEntries.appendInsertion(to: &sql, zoneID: zoneID)
            sql.appendLiteral(")")
        }
        if !referencesCleared.isEmpty {
            part("cleared_references")
            sql.appendLiteral("DELETE FROM record_references x WHERE x.zone_id = ")
            sql.appendInterpolation(zoneID)
            sql.appendLiteral(" AND x.source = ANY(")
            sql.appendInterpolation(referencesCleared)
            sql.appendLiteral(") AND NOT EXISTS (SELECT 1 FROM ")
            appendReferences(to: &sql)
            sql.appendLiteral(
                " AS k(source, target, action) WHERE k.source = x.source AND k.target = x.target AND k.action = x.action))")
        }
        if !references.sources.isEmpty {
            part("added_references")
            sql.appendLiteral("INSERT INTO record_references (zone_id, source, target, action) SELECT ")
            sql.appendInterpolation(zoneID)
            sql.appendLiteral(", * FROM ")
            appendReferences(to: &sql)
            sql.appendLiteral(" ON CONFLICT DO NOTHING)")
        }
        if !assetsCleared.isEmpty {
            part("cleared_assets")
            sql.appendLiteral("DELETE FROM record_assets x WHERE x.zone_id = ")
            sql.appendInterpolation(zoneID)
            sql.appendLiteral(" AND x.name = ANY(")
            sql.appendInterpolation(assetsCleared)
            sql.appendLiteral(") AND NOT EXISTS (SELECT 1 FROM ")
            appendAssets(to: &sql)
            sql.appendLiteral(" AS k(name, checksum) WHERE k.name = x.name AND k.checksum = x.checksum))")
        }
        if !assets.names.isEmpty {
            part("added_assets")
            sql.appendLiteral("INSERT INTO record_assets (zone_id, name, checksum) SELECT ")
            sql.appendInterpolation(zoneID)
            sql.appendLiteral(", * FROM ")
            appendAssets(to: &sql)
            sql.appendLiteral(" ON CONFLICT DO NOTHING)")
        }
        if !sharesCleared.isEmpty {
            part("cleared_shares")
            sql.appendLiteral("DELETE FROM shares WHERE zone_id = ")
            sql.appendInterpolation(zoneID)
            sql.appendLiteral(" AND record_name = ANY(")
            sql.appendInterpolation(sharesCleared)
            sql.appendLiteral(") AND NOT record_name = ANY(")
            sql.appendInterpolation(shares.names)
            sql.appendLiteral("))")
            part("cleared_participants")
            sql.appendLiteral("DELETE FROM share_participants x WHERE x.zone_id = ")
            sql.appendInterpolation(zoneID)
            sql.appendLiteral(" AND x.record_name = ANY(")
            sql.appendInterpolation(sharesCleared)
            sql.appendLiteral(") AND NOT EXISTS (SELECT 1 FROM ")
            sql.appendUnnest((participants.names, "text"), (participants.users, "text"))
            sql.appendLiteral(
                """
                 AS k(record_name, user_record_name)
                    WHERE k.record_name = x.record_name AND k.user_record_name = x.user_record_name))
                """)
        }
        if !shares.names.isEmpty {
            part("added_shares")
            sql.appendLiteral("INSERT INTO shares (zone_id, record_name, short_guid, public_permission) SELECT ")
            sql.appendInterpolation(zoneID)
            sql.appendLiteral(", * FROM ")
            sql.appendUnnest((shares.names, "text"), (shares.shortGUIDs, "text"), (shares.permissions, "text"))
            sql.appendLiteral(
                """
                 ON CONFLICT (zone_id, record_name) DO UPDATE SET
                    short_guid = excluded.short_guid, public_permission = excluded.public_permission)
                """)
        }
        if !participants.names.isEmpty {
            part("added_participants")
            sql.appendLiteral(
                "INSERT INTO share_participants (zone_id, record_name, user_record_name, permission, status) SELECT ")
            sql.appendInterpolation(zoneID)
            sql.appendLiteral(", * FROM ")
            sql.appendUnnest(
                (participants.names, "text"), (participants.users, "text"), (participants.permissions, "text"),
                (participants.statuses, "text"))
            sql.appendLiteral(
                """
                 ON CONFLICT (zone_id, record_name, user_record_name) DO UPDATE SET
                    permission = excluded.permission, status = excluded.status)
                """)
        }
        if let zoneChange {
            // The database's counter is taken in the same statement, and its row stays locked to commit.
            part("database_change")
            sql.appendLiteral("UPDATE databases SET seq = seq + 1 WHERE id = ")
            sql.appendInterpolation(zoneChange.databaseID)
            sql.appendLiteral(" AND ")
            sql.appendInterpolation(zoneChange.advancesDatabase)
            sql.appendLiteral(" RETURNING seq)")
            part("zone_change")
            sql.appendLiteral("UPDATE zones SET seq = ")
            sql.appendInterpolation(zoneChange.sequence)
            sql.appendLiteral(", change_seq = coalesce((SELECT seq FROM database_change), change_seq), changed_ms = ")
            sql.appendInterpolation(zoneChange.timestamp)
            sql.appendLiteral(" WHERE id = ")
            sql.appendInterpolation(zoneID)
            sql.appendLiteral(")")
        }
        sql.appendLiteral("\n")
        if records.isEmpty {
            sql.appendLiteral("SELECT 1")
        } else {
            appendUpsert(to: &sql)
        }
        return sql
    }

    /// The buffered references as rows: source, target, action.
    private func appendReferences(to sql: inout PostgresQuery.StringInterpolation) {
        sql.appendUnnest((references.sources, "text"), (references.targets, "text"), (references.actions, "text"))
    }

    /// The buffered asset links as rows: record name, checksum.
    private func appendAssets(to sql: inout PostgresQuery.StringInterpolation) {
        sql.appendUnnest((assets.names, "text"), (assets.checksums, "text"))
    }

    /// Writes the records, new or over their previous versions.
    private func appendUpsert(to sql: inout PostgresQuery.StringInterpolation) {
        sql.appendLiteral(
            """
            INSERT INTO records (zone_id, name, record_type, change_tag, fields, created_ms, created_by, created_device,
                modified_ms, modified_by, modified_device, seq, deleted)

            """)
        sql.appendLiteral("SELECT ")
        sql.appendInterpolation(zoneID)
        sql.appendLiteral(
            """
            , r.name, r.record_type, r.change_tag, r.fields, r.created_ms, r.created_by,
                CASE WHEN r.has_created_device THEN r.created_device END, r.modified_ms, r.modified_by,
                CASE WHEN r.has_modified_device THEN r.modified_device END, r.seq, r.deleted
            FROM

            """)
        sql.appendUnnest(
            (records.map(\.name), "text"), (records.map(\.recordType), "text"), (records.map(\.changeTag), "text"),
            (records.map { ByteBuffer(bytes: $0.fieldsJSON) }, "bytea"), (records.map(\.created.timestamp), "int8"),
            (records.map(\.created.userRecordName), "text"), (records.map { $0.created.deviceID ?? "" }, "text"),
            (records.map { $0.created.deviceID != nil }, "bool"), (records.map(\.modified.timestamp), "int8"),
            (records.map(\.modified.userRecordName), "text"), (records.map { $0.modified.deviceID ?? "" }, "text"),
            (records.map { $0.modified.deviceID != nil }, "bool"), (records.map(\.sequence), "int8"),
            (records.map(\.deleted), "bool"))
        sql.appendLiteral(
            """

                AS r(name, record_type, change_tag, fields, created_ms, created_by, created_device, has_created_device,
                     modified_ms, modified_by, modified_device, has_modified_device, seq, deleted)
            ON CONFLICT (zone_id, name) DO UPDATE SET
                record_type = excluded.record_type, change_tag = excluded.change_tag, fields = excluded.fields,
                created_ms = excluded.created_ms, created_by = excluded.created_by,
                created_device = excluded.created_device, modified_ms = excluded.modified_ms,
                modified_by = excluded.modified_by, modified_device = excluded.modified_device,
                seq = excluded.seq, deleted = excluded.deleted
            """)
    }
}

/// Query index rows in columns, as `record_index` stores them: a value is a number (as decimal
/// text, cast to `numeric`) or a string, and `scalar` says which (0 integer, 1 real, 2 string).
/// Rows are unique by their key: a second entry under a key it holds is dropped (a list of
/// locations may repeat a latitude).
struct IndexRows {
    /// A row's primary key in `record_index`, within its zone.
    struct Key: Hashable {
        let recordType: String
        let field: String
        let kind: Int32
        let number: String
        let string: String
        let created: Int64
        let name: String

        /// The key of `record`'s `entry`.
        init(_ entry: IndexEntry, of record: StoredRecord) {
            let columns = IndexRows.columns(entry.value)
            recordType = record.recordType
            field = entry.field
            kind = Int32(entry.kind.rawValue)
            number = columns.number
            string = columns.string
            created = record.created.timestamp
            name = record.name
        }
    }

    private(set) var recordTypes: [String] = []
    private(set) var fields: [String] = []
    private(set) var kinds: [Int32] = []
    private(set) var numbers: [String] = []
    private(set) var strings: [String] = []
    private(set) var scalars: [Int32] = []
    private(set) var longitudes: [Double] = []
    private(set) var hasLongitude: [Bool] = []
    private(set) var createds: [Int64] = []
    private(set) var names: [String] = []
    private var keys: Set<Key> = []

    /// The columns a scalar is stored in.
    static func columns(_ value: QueryScalar) -> (number: String, string: String, scalar: Int32) {
        switch value {
        case .integer(let integer): (String(integer), "", 0)
        // -0.0 is written as 0.0, so that two texts stand for the same `numeric` only when they are equal.
        case .real(let real) where real == 0: ("0.0", "", 1)
        case .real(let real):
            (real.isFinite ? "\(real)" : real.isNaN ? "NaN" : real > 0 ? "Infinity" : "-Infinity", "", 1)
        case .text(let text): ("0", text, 2)
        }
    }

    /// A scalar read back from its columns.
    static func scalar(number: String, string: String, scalar: Int32) -> QueryScalar? {
        switch scalar {
        case 0: Int64(number).map(QueryScalar.integer)
        case 1: Double(number).map(QueryScalar.real)
        default: .text(string)
        }
    }

    var isEmpty: Bool { names.isEmpty }

    /// Adds the row of `record`'s `entry` unless one with its key is there; returns the key.
    @discardableResult
    mutating func append(_ entry: IndexEntry, of record: StoredRecord) -> Key {
        let key = Key(entry, of: record)
        guard keys.insert(key).inserted else { return key }
        let columns = Self.columns(entry.value)
        recordTypes.append(record.recordType)
        fields.append(entry.field)
        kinds.append(Int32(entry.kind.rawValue))
        numbers.append(columns.number)
        strings.append(columns.string)
        scalars.append(columns.scalar)
        longitudes.append(entry.longitude ?? 0)
        hasLongitude.append(entry.longitude != nil)
        createds.append(record.created.timestamp)
        names.append(record.name)
        return key
    }

    /// Adds the rows of `other`, which are of other records.
    mutating func append(_ other: IndexRows) {
        recordTypes += other.recordTypes
        fields += other.fields
        kinds += other.kinds
        numbers += other.numbers
        strings += other.strings
        scalars += other.scalars
        longitudes += other.longitudes
        hasLongitude += other.hasLongitude
        createds += other.createds
        names += other.names
        keys.formUnion(other.keys)
    }

    /// Inserts the rows on their own.
    func insert(_ connection: PostgresConnection, zoneID: Int64, logger: Logger) async throws {
        guard !isEmpty else { return }
        var sql = PostgresQuery.StringInterpolation(literalCapacity: 1_024, interpolationCount: 10)
        appendInsertion(to: &sql, zoneID: zoneID)
        try await connection.run(PostgresQuery(stringInterpolation: sql), logger: logger)
    }

    /// The statement inserting the rows; a row already stored under its key takes the new
    /// longitude and scalar kind.
    func appendInsertion(to sql: inout PostgresQuery.StringInterpolation, zoneID: Int64) {
        sql.appendLiteral(
            """
            INSERT INTO record_index (
                zone_id, record_type, field, kind, number, string, scalar, longitude, created_ms, name)

            """)
        sql.appendLiteral("SELECT ")
        sql.appendInterpolation(zoneID)
        sql.appendLiteral(
            """
            , e.record_type, e.field, e.kind, e.number::numeric, e.string, e.scalar,
                CASE WHEN e.has_longitude THEN e.longitude END, e.created_ms, e.name
            FROM

            """)
        sql.appendUnnest(
            (recordTypes, "text"), (fields, "text"), (kinds, "int4"), (numbers, "text"), (strings, "text"),
            (scalars, "int4"), (longitudes, "float8"), (hasLongitude, "bool"), (createds, "int8"), (names, "text"))
        sql.appendLiteral(
            """

                AS e(record_type, field, kind, number, string, scalar, longitude, has_longitude, created_ms, name)
            ON CONFLICT (zone_id, record_type, field, kind, number, string, created_ms, name) DO UPDATE SET
                scalar = excluded.scalar, longitude = excluded.longitude
            """)
    }

    /// The statement deleting the rows by their keys.
    func appendDeletion(to sql: inout PostgresQuery.StringInterpolation, zoneID: Int64) {
        sql.appendLiteral("DELETE FROM record_index i USING ")
        sql.appendUnnest(
            (recordTypes, "text"), (fields, "text"), (kinds, "int4"), (numbers, "text"), (strings, "text"),
            (createds, "int8"), (names, "text"))
        sql.appendLiteral(
            """
             AS d(record_type, field, kind, number, string, created_ms, name)
            WHERE i.zone_id =
            """)
        sql.appendInterpolation(zoneID)
        sql.appendLiteral(
            """
             AND i.record_type = d.record_type AND i.field = d.field AND i.kind = d.kind
                AND i.number = d.number::numeric AND i.string = d.string AND i.created_ms = d.created_ms
                AND i.name = d.name
            """)
    }
}

extension PostgresQuery.StringInterpolation {
    /// Appends `unnest($1::type[], $2::type[], …)`: rows whose columns are the arrays, each bound as
    /// its SQL type.
    mutating func appendUnnest<each Column: PostgresDynamicTypeEncodable>(_ columns: repeat (each Column, String)) {
        appendLiteral("unnest(")
        var separator = ""
        for (values, type) in repeat each columns {
            appendLiteral(separator)
            appendInterpolation(values)
            appendLiteral("::\(type)[]")
            separator = ", "
        }
        appendLiteral(")")
    }
}
