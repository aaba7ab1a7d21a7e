import Logging
import NIOCore
import PostgresNIO
import StratusModel
import StratusStorage

/// The rows a write transaction has planned but not yet sent: records, their query index entries,
/// references and asset links. ``flush(_:logger:)`` sends each kind as one statement over arrays, so
/// a batch of plain saves costs a handful of round trips whatever its size.
///
/// A record is buffered at most once per flush: writing a name the buffer holds flushes first, so
/// every delete in a flush applies to rows written before it.
struct RecordBatch {
    let zoneID: Int64

    private var records: [StoredRecord] = []
    private var names: Set<String> = []
    private var removedEntries = IndexRows()
    private var addedEntries = IndexRows()
    private var referencesCleared: [String] = []
    private var assetsCleared: [String] = []
    private var references: (sources: [String], targets: [String], actions: [String]) = ([], [], [])
    private var assets: (names: [String], checksums: [String]) = ([], [])
    private var sharesCleared: [String] = []
    private var shares: [(name: String, state: ShareState)] = []

    init(zoneID: Int64) {
        self.zoneID = zoneID
    }

    /// Whether the buffer holds a write of this record.
    private func buffers(_ name: String) -> Bool { names.contains(name) }

    /// Buffers the rows of one operation as the write executor decided them, sending the buffer
    /// first when it holds one of the operation's records.
    mutating func add(_ rows: RecordWriteExecutor.RecordRows, _ connection: PostgresConnection, logger: Logger) async throws {
        for change in rows.records {
            if buffers(change.record.name) { try await flush(connection, logger: logger) }
            add(change)
        }
        addAssets(rows.assets, of: rows.records[0].record.name)
        addReferences(rows.references, of: rows.records[0].record.name)
    }

    /// Buffers a record's row, and the index, reference and asset rows its previous version leaves
    /// behind.
    private mutating func add(_ change: RecordWriteExecutor.RowChange) {
        let record = change.record
        records.append(record)
        names.insert(record.name)
        if let previous = change.previous {
            for entry in change.removedIndexEntries {
                removedEntries.append(entry, recordType: previous.recordType, name: previous.name)
            }
        }
        for entry in change.addedIndexEntries { addedEntries.append(entry, recordType: record.recordType, name: record.name) }
        if change.clearsReferences { referencesCleared.append(record.name) }
        if change.clearsAssets { assetsCleared.append(record.name) }
        if change.clearsShare { sharesCleared.append(record.name) }
        if let share = change.share { shares.append((record.name, share)) }
    }

    /// Buffers the asset links of a record just added.
    private mutating func addAssets(_ checksums: Set<String>, of name: String) {
        for checksum in checksums.sorted() {
            assets.names.append(name)
            assets.checksums.append(checksum)
        }
    }

    /// Buffers the enforced references of a record just added.
    private mutating func addReferences(_ links: [ReferenceLink], of name: String) {
        for link in links {
            references.sources.append(name)
            references.targets.append(link.target)
            references.actions.append(link.action.rawValue)
        }
    }

    /// Sends the buffered rows, deletions before insertions, and empties the buffer.
    mutating func flush(_ connection: PostgresConnection, logger: Logger) async throws {
        guard !records.isEmpty else { return }
        try await upsert(connection, logger: logger)
        try await addedEntries.insert(connection, zoneID: zoneID, logger: logger)
        if !referencesCleared.isEmpty {
            try await connection.run(
                "DELETE FROM record_references WHERE zone_id = \(zoneID) AND source = ANY(\(referencesCleared))",
                logger: logger)
        }
        if !assetsCleared.isEmpty {
            try await connection.run(
                "DELETE FROM record_assets WHERE zone_id = \(zoneID) AND name = ANY(\(assetsCleared))", logger: logger)
        }
        if !references.sources.isEmpty {
            try await connection.run(
                """
                INSERT INTO record_references (zone_id, source, target, action)
                SELECT \(zoneID), * FROM unnest(\(references.sources)::text[], \(references.targets)::text[],
                    \(references.actions)::text[])
                ON CONFLICT DO NOTHING
                """, logger: logger)
        }
        if !assets.names.isEmpty {
            try await connection.run(
                """
                INSERT INTO record_assets (zone_id, name, checksum)
                SELECT \(zoneID), * FROM unnest(\(assets.names)::text[], \(assets.checksums)::text[])
                ON CONFLICT DO NOTHING
                """, logger: logger)
        }
        try await writeShares(connection, logger: logger)
        self = RecordBatch(zoneID: zoneID)
    }

    /// Replaces the index rows of the share records buffered (shares are few: a statement each).
    private func writeShares(_ connection: PostgresConnection, logger: Logger) async throws {
        if !sharesCleared.isEmpty {
            try await connection.run(
                "DELETE FROM shares WHERE zone_id = \(zoneID) AND record_name = ANY(\(sharesCleared))", logger: logger)
            try await connection.run(
                "DELETE FROM share_participants WHERE zone_id = \(zoneID) AND record_name = ANY(\(sharesCleared))",
                logger: logger)
        }
        for (name, share) in shares {
            try await connection.run(
                """
                INSERT INTO shares (zone_id, record_name, short_guid, public_permission)
                VALUES (\(zoneID), \(name), \(share.shortGUID), \(share.publicPermission.rawValue))
                """, logger: logger)
            try await connection.run(
                """
                INSERT INTO share_participants (zone_id, record_name, user_record_name, permission, status)
                SELECT \(zoneID), \(name), * FROM unnest(\(share.participants.map(\.userRecordName))::text[],
                    \(share.participants.map(\.permission.rawValue))::text[],
                    \(share.participants.map(\.status.rawValue))::text[])
                """, logger: logger)
        }
    }

    /// Writes the records and removes the index entries their previous versions no longer have, in
    /// one statement.
    private func upsert(_ connection: PostgresConnection, logger: Logger) async throws {
        let removed = removedEntries
        try await connection.run(
            """
            WITH removed_entries AS (
                DELETE FROM record_index i
                USING unnest(\(removed.recordTypes)::text[], \(removed.fields)::text[], \(removed.kinds)::int4[],
                    \(removed.numbers)::text[], \(removed.strings)::text[], \(removed.names)::text[])
                    AS d(record_type, field, kind, number, string, name)
                WHERE i.zone_id = \(zoneID) AND i.record_type = d.record_type AND i.field = d.field
                    AND i.kind = d.kind AND i.number = d.number::numeric AND i.string = d.string AND i.name = d.name
                RETURNING 1)
            INSERT INTO records (zone_id, name, record_type, change_tag, fields, created_ms, created_by, created_device,
                modified_ms, modified_by, modified_device, seq, deleted)
            SELECT \(zoneID), r.name, r.record_type, r.change_tag, r.fields, r.created_ms, r.created_by,
                CASE WHEN r.has_created_device THEN r.created_device END, r.modified_ms, r.modified_by,
                CASE WHEN r.has_modified_device THEN r.modified_device END, r.seq, r.deleted
            FROM unnest(\(records.map(\.name))::text[], \(records.map(\.recordType))::text[],
                \(records.map(\.changeTag))::text[], \(records.map { ByteBuffer(bytes: $0.fieldsJSON) })::bytea[],
                \(records.map(\.created.timestamp))::int8[], \(records.map(\.created.userRecordName))::text[],
                \(records.map { $0.created.deviceID ?? "" })::text[], \(records.map { $0.created.deviceID != nil })::bool[],
                \(records.map(\.modified.timestamp))::int8[], \(records.map(\.modified.userRecordName))::text[],
                \(records.map { $0.modified.deviceID ?? "" })::text[], \(records.map { $0.modified.deviceID != nil })::bool[],
                \(records.map(\.sequence))::int8[], \(records.map(\.deleted))::bool[])
                AS r(name, record_type, change_tag, fields, created_ms, created_by, created_device, has_created_device,
                     modified_ms, modified_by, modified_device, has_modified_device, seq, deleted)
            ON CONFLICT (zone_id, name) DO UPDATE SET
                record_type = excluded.record_type, change_tag = excluded.change_tag, fields = excluded.fields,
                created_ms = excluded.created_ms, created_by = excluded.created_by,
                created_device = excluded.created_device, modified_ms = excluded.modified_ms,
                modified_by = excluded.modified_by, modified_device = excluded.modified_device,
                seq = excluded.seq, deleted = excluded.deleted
            """, logger: logger)
    }
}

/// Query index rows in columns, as `record_index` stores them: a value is a number (as decimal
/// text, cast to `numeric`) or a string, and `scalar` says which (0 integer, 1 real, 2 string).
struct IndexRows {
    var recordTypes: [String] = []
    var fields: [String] = []
    var kinds: [Int32] = []
    var numbers: [String] = []
    var strings: [String] = []
    var scalars: [Int32] = []
    var longitudes: [Double] = []
    var hasLongitude: [Bool] = []
    var names: [String] = []

    /// The columns a scalar is stored in.
    static func columns(_ value: QueryScalar) -> (number: String, string: String, scalar: Int32) {
        switch value {
        case .integer(let integer): (String(integer), "", 0)
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

    mutating func append(_ entry: IndexEntry, recordType: String, name: String) {
        let columns = Self.columns(entry.value)
        recordTypes.append(recordType)
        fields.append(entry.field)
        kinds.append(Int32(entry.kind.rawValue))
        numbers.append(columns.number)
        strings.append(columns.string)
        scalars.append(columns.scalar)
        longitudes.append(entry.longitude ?? 0)
        hasLongitude.append(entry.longitude != nil)
        names.append(name)
    }

    func insert(_ connection: PostgresConnection, zoneID: Int64, logger: Logger) async throws {
        guard !isEmpty else { return }
        try await connection.run(
            """
            INSERT INTO record_index (zone_id, record_type, field, kind, number, string, scalar, longitude, name)
            SELECT \(zoneID), e.record_type, e.field, e.kind, e.number::numeric, e.string, e.scalar,
                CASE WHEN e.has_longitude THEN e.longitude END, e.name
            FROM unnest(\(recordTypes)::text[], \(fields)::text[], \(kinds)::int4[], \(numbers)::text[],
                \(strings)::text[], \(scalars)::int4[], \(longitudes)::float8[], \(hasLongitude)::bool[], \(names)::text[])
                AS e(record_type, field, kind, number, string, scalar, longitude, has_longitude, name)
            ON CONFLICT DO NOTHING
            """, logger: logger)
    }
}
