import Crypto
public import Foundation
public import GRDB
public import Stratus

/// How a row of a synced table becomes a record and back (docs/store.md has the table):
///
/// - the record type is the table's ``StoreTable/Configuration/synced(recordType:)``, the record
///   name the row's UUID (`uuidString`), the zone ``zoneName`` of the store's database (or the zone
///   of the share the row is in);
/// - each column but the key and the local columns is a field of the same name, holding the value
///   as SQLite holds it: `INTEGER` → `INT64`, `REAL` → `DOUBLE`, `TEXT` → `STRING`, `BLOB` → `BYTES`;
///   a BLOB larger than ``assetThreshold`` goes as an `ASSET` in the field ``assetKey(_:)``
///   (`<column>_ckAsset`, as Core Data's mirroring moves large values to assets); `NULL` is an
///   absent field;
/// - a relationship column holds the related row's record name (a `STRING`), not a `REFERENCE`, so
///   that no delete rule of the server acts behind the store's back; it is written back as the
///   column's own UUID form (`TEXT` or 16-byte `BLOB`).
public struct RecordMapping: Sendable {
    /// The zone every mirrored record lives in (Core Data's is `com.apple.coredata.cloudkit.zone`).
    public static let zoneName = "com.stratus.store"

    /// The field that marks a record of the public database deleted (`1`; `0` for a live one): the
    /// public database has no change feed to carry deletions, so a deleted row's record stays, with
    /// no other field, for other devices to find when they poll.
    public static let deletedKey = "stratusDeleted"

    /// Whether a record is marked deleted (``deletedKey``).
    static func isMarkedDeleted(_ record: Stratus.Record) -> Bool {
        if case .int64(let mark)? = record.fieldValue(forKey: deletedKey) { mark != 0 } else { false }
    }

    /// BLOB values larger than this many bytes travel as assets (1 MB by default, Core Data's threshold).
    public var assetThreshold: Int
    /// Where the files of outgoing assets are written before they are uploaded.
    public var assetDirectory: URL

    /// A mapping that moves BLOBs over `assetThreshold` bytes to assets written in `assetDirectory`.
    public init(assetThreshold: Int = 1_000_000, assetDirectory: URL) {
        self.assetThreshold = assetThreshold
        self.assetDirectory = assetDirectory
    }

    /// The field holding a column's value when it travels as an asset: `<column>_ckAsset`, as Core
    /// Data's mirroring names it. A field has one type in the schema, so a BLOB column keeps `BYTES`
    /// in its own field and large values go to this one, the other field absent.
    public static func assetKey(_ column: String) -> String {
        column + "_ckAsset"
    }

    /// The record ID of a row in the store's zone of the private database.
    public static func recordID(_ rowID: UUID) -> Stratus.Record.ID {
        recordID(rowID, zoneID: RecordZone.ID(zoneName: zoneName))
    }

    /// The record ID of a row in `zoneID` (a share's zone).
    public static func recordID(_ rowID: UUID, zoneID: RecordZone.ID) -> Stratus.Record.ID {
        Stratus.Record.ID(recordName: rowID.upperText, zoneID: zoneID)
    }

    /// The record of the row of `table` whose key is `rowID`, read in `db`; `nil` when the row is gone.
    public func record(of table: StoreTable, rowID: UUID, in db: GRDB.Database) throws -> Stratus.Record? {
        guard case .synced(let recordType) = table.configuration else { return nil }
        let columns = try StoreColumns(table, in: db)
        guard let values = try columnValues(of: table, rowID: rowID, columns: columns, in: db) else { return nil }
        return try record(recordType, rowID: rowID, values: values, table: table, columns: columns)
    }

    private func record(
        _ recordType: String, rowID: UUID, values: [String: DatabaseValue], table: StoreTable, columns: StoreColumns
    ) throws -> Stratus.Record {
        var record = Stratus.Record(recordType: recordType, recordID: Self.recordID(rowID))
        for (key, value) in try fields(of: values, table: table, rowID: rowID, columns: columns) {
            record.setFieldValue(value, forKey: key)
        }
        return record
    }

    /// Writes `record` into its row of `table` (inserting the row when it is new): every field
    /// column takes the record's value, and an absent field is `NULL`, except in a `NOT NULL` column
    /// with a default, which keeps its value (or takes its default in a new row). Local columns are
    /// left alone. An existing row is found whatever form its key is stored in, and keeps it.
    public func apply(_ record: Stratus.Record, to table: StoreTable, in db: GRDB.Database) throws {
        guard let rowID = UUID(text: record.recordID.recordName) else {
            throw StoreMappingError(reason: "record '\(record.recordID.recordName)' of '\(table.name)' is not named by a UUID")
        }
        let columns = try StoreColumns(table, in: db)
        try write(
            try columnValues(of: record, table: table, columns: columns), rowID: rowID,
            storedKey: try columns.storedKey(of: rowID, in: db), to: table, columns: columns, in: db)
    }

    // MARK: Values

    /// The values of the row's mirrored columns (no key, no local columns; `NULL` left out), `nil`
    /// when there is no row.
    func columnValues(
        of table: StoreTable, rowID: UUID, columns: StoreColumns, in db: GRDB.Database
    ) throws -> [String: DatabaseValue]? {
        guard let row = try Row.fetchOne(
            db.cachedStatement(sql: columns.selectRowSQL),
            arguments: StatementArguments(databaseValues: StoreColumns.keyForms(rowID)))
        else { return nil }
        return Self.columnValues(of: row, columns: columns)
    }

    /// The values of the mirrored columns of those of `rowIDs` the table has rows of, as
    /// ``columnValues(of:rowID:columns:in:)`` reads each, read together.
    /// `storedKeys` are the keys as stored, where known (an outbox entry's, say).
    func columnValues(
        ofRows rowIDs: [UUID], storedKeys: [UUID: DatabaseValue], columns: StoreColumns, in db: GRDB.Database
    ) throws -> [UUID: [String: DatabaseValue]] {
        var values: [UUID: [String: DatabaseValue]] = [:]
        try columns.forEachRow(of: rowIDs, storedKeys: storedKeys, in: db) { rowID, row in
            values[rowID] = Self.columnValues(of: row, columns: columns)
        }
        return values
    }

    /// The values of a row's mirrored columns, `NULL` left out.
    static func columnValues(of row: Row, columns: StoreColumns) -> [String: DatabaseValue] {
        var values: [String: DatabaseValue] = [:]
        for column in columns.fields {
            let value: DatabaseValue = row[column]
            if !value.isNull { values[column] = value }
        }
        return values
    }

    /// The records of every row of a synced `table`, as ``record(of:rowID:in:)`` makes each.
    public func records(of table: StoreTable, in db: GRDB.Database) throws -> [Stratus.Record] {
        guard case .synced(let recordType) = table.configuration else { return [] }
        let columns = try StoreColumns(table, in: db)
        let rows = try Row.fetchCursor(db, sql: "SELECT * FROM \(table.name.quotedDatabaseIdentifier)")
        var records: [Stratus.Record] = []
        while let row = try rows.next() {
            guard let rowID = UUID(databaseKey: row[columns.key]) else {
                throw StoreMappingError(reason: "a row of '\(table.name)' has a key that is not a UUID")
            }
            records.append(
                try record(recordType, rowID: rowID, values: Self.columnValues(of: row, columns: columns), table: table, columns: columns))
        }
        return records
    }

    /// The record fields of mirrored column values: large BLOBs become assets in the column's
    /// ``assetKey(_:)`` field, written to a file named by their content (so that equal contents are
    /// equal assets) unless it exists.
    func fields(
        of values: [String: DatabaseValue], table: StoreTable, rowID: UUID, columns: StoreColumns
    ) throws -> [String: RecordFieldValue] {
        var fields: [String: RecordFieldValue] = [:]
        for (column, value) in values {
            if columns.relationships.contains(column) {
                if let related = UUID(databaseKey: value) { fields[column] = .string(related.upperText) }
                continue
            }
            switch value.storage {
            case .null: continue
            case .int64(let integer) where columns.realColumns.contains(column): fields[column] = .double(Double(integer))
            case .int64(let integer): fields[column] = .int64(integer)
            case .double(let real): fields[column] = .double(real)
            case .string(let text): fields[column] = .string(text)
            case .blob(let bytes) where bytes.count > assetThreshold:
                let file = assetDirectory.appendingPathComponent(SHA256.hash(data: bytes).map { String(format: "%02x", $0) }.joined())
                if !FileManager.default.fileExists(atPath: file.path) {
                    try FileManager.default.createDirectory(at: assetDirectory, withIntermediateDirectories: true)
                    try bytes.write(to: file, options: .atomic)
                }
                fields[Self.assetKey(column)] = .asset(Asset(fileURL: file))
            case .blob(let bytes): fields[column] = .bytes(bytes)
            }
        }
        return fields
    }

    /// The column values a record's fields stand for (absent and empty fields left out).
    func columnValues(
        of record: Stratus.Record, table: StoreTable, columns: StoreColumns
    ) throws -> [String: DatabaseValue] {
        var values: [String: DatabaseValue] = [:]
        for column in columns.fields {
            let field = record.fieldValue(forKey: column) ?? record.fieldValue(forKey: Self.assetKey(column))
            let value = try databaseValue(field, column: column, of: table, columns: columns)
            if !value.isNull { values[column] = value }
        }
        return values
    }

    /// Writes mirrored column values into the row of `rowID` (inserting it when it is new), whose
    /// key is `storedKey` as ``StoreColumns/storedKey(of:in:)`` found it (`nil`: there is no row):
    /// a column without a value is `NULL`, except a `NOT NULL` column with a default, which keeps
    /// its value (or takes its default in a new row). Local columns are left alone; an existing row
    /// keeps the form its key is stored in.
    func write(
        _ values: [String: DatabaseValue], rowID: UUID, storedKey: DatabaseValue?, to table: StoreTable, columns: StoreColumns,
        in db: GRDB.Database
    ) throws {
        // A NOT NULL column with a default keeps its value when the record has none.
        let assignedColumns = columns.fields.filter { !(values[$0] ?? .null).isNull || !columns.defaultedColumns.contains($0) }
        var assignedValues = assignedColumns.map { values[$0] ?? .null }
        // Most rows assign every mirrored column: their statements are built once per table.
        let assignsEveryField = assignedColumns.count == columns.fields.count
        if let stored = storedKey {
            guard !assignedColumns.isEmpty else { return }
            assignedValues.append(stored)
            try db.cachedStatement(sql: assignsEveryField ? columns.updateEveryFieldSQL : columns.updateSQL(assignedColumns))
                .execute(arguments: StatementArguments(databaseValues: assignedValues))
        } else {
            assignedValues.insert(columns.keyValue(rowID), at: 0)
            try db.cachedStatement(sql: assignsEveryField ? columns.insertEveryFieldSQL : columns.insertSQL(assignedColumns))
                .execute(arguments: StatementArguments(databaseValues: assignedValues))
        }
    }

    /// Deletes the row of `rowID`, whatever form its key is stored in.
    func delete(rowID: UUID, from table: StoreTable, columns: StoreColumns, in db: GRDB.Database) throws {
        try db.cachedStatement(
            sql: "DELETE FROM \(table.name.quotedDatabaseIdentifier) WHERE \(columns.key.quotedDatabaseIdentifier) IN (?, ?, ?)"
        ).execute(arguments: StatementArguments(databaseValues: StoreColumns.keyForms(rowID)))
    }

    private func databaseValue(
        _ value: RecordFieldValue?, column: String, of table: StoreTable, columns: StoreColumns
    ) throws -> DatabaseValue {
        guard let value else { return .null }
        if columns.relationships.contains(column) {
            guard case .string(let name) = value, let related = UUID(text: name) else {
                throw StoreMappingError(reason: "field '\(column)' of '\(table.name)' must hold a related row's UUID")
            }
            return columns.uuidValue(related, column: column)
        }
        switch value {
        case .string(let text): return text.databaseValue
        case .int64(let integer): return integer.databaseValue
        case .double(let real): return real.databaseValue
        case .bytes(let bytes): return bytes.databaseValue
        case .date(let date): return date.databaseValue
        case .asset(let asset):
            guard let file = asset.fileURL else {
                throw StoreMappingError(reason: "the asset of field '\(column)' of '\(table.name)' has no local file")
            }
            return try Data(contentsOf: file).databaseValue
        default:
            throw StoreMappingError(reason: "field '\(column)' of '\(table.name)' holds a type a column cannot: \(value)")
        }
    }
}

/// Why a record cannot become a row.
public struct StoreMappingError: Error, Equatable, CustomStringConvertible {
    public var reason: String
    public var description: String { reason }
}

/// The columns of a synced table as the mapping uses them.
struct StoreColumns {
    /// The key column.
    let key: String
    /// The columns mirrored as fields, in the table's order.
    let fields: [String]
    /// The relationship columns among them.
    let relationships: Set<String>
    /// Each column's affinity.
    let affinities: [String: ColumnAffinity]
    /// Columns of `REAL` affinity: their values are sent as `DOUBLE` even when SQLite holds a whole
    /// number as an integer, so that the field keeps one type.
    let realColumns: Set<String>
    /// `NOT NULL` columns with a default: an absent field leaves them alone.
    let defaultedColumns: Set<String>
    /// Columns whose declared type is BLOB (a UUID there is 16 bytes; elsewhere its string).
    private let blobColumns: Set<String>
    /// The table's name, quoted for SQL.
    private let quotedTable: String
    /// Reads the row, or its key alone, whose key holds one of the ``keyForms(_:)``.
    let selectRowSQL: String
    private let keyProbeSQL: String
    /// Reads the keys, as stored, or the whole rows, of ``keysProbedTogether`` row IDs (each in
    /// its ``keyForms(_:)``).
    private let keysProbeSQL: String
    private let rowsProbeSQL: String
    /// Reads the rows of ``keysProbedTogether`` keys as stored.
    private let storedKeysProbeSQL: String
    /// Writes every field of a row: a new one (its key first), or an existing one (its key last).
    let insertEveryFieldSQL: String
    let updateEveryFieldSQL: String

    init(_ table: StoreTable, in db: GRDB.Database) throws {
        let columns = try Row.fetchAll(db, sql: "PRAGMA table_info(\(table.name.quotedDatabaseIdentifier))")
        guard let key = columns.first(where: { ($0["pk"] as Int) > 0 })?["name"] as String? else {
            throw StoreMappingError(reason: "table '\(table.name)' has no primary key")
        }
        self.key = key
        fields = columns.map { $0["name"] as String }.filter { $0 != key && !table.localColumns.contains($0) }
        relationships = Set(table.relationships.map(\.column))
        blobColumns = Set(columns.filter { ($0["type"] as String).uppercased() == "BLOB" }.map { $0["name"] as String })
        affinities = Dictionary(
            columns.map { ($0["name"] as String, ColumnAffinity(declaredType: $0["type"])) }, uniquingKeysWith: { first, _ in first })
        realColumns = Set(affinities.filter { $0.value == .real }.keys)
        defaultedColumns = Set(columns.filter { ($0["notnull"] as Bool) && ($0["dflt_value"] as String?) != nil }
            .map { $0["name"] as String })
        let quotedTable = table.name.quotedDatabaseIdentifier
        self.quotedTable = quotedTable
        selectRowSQL = Self.rowByKey("SELECT * FROM \(quotedTable)", key: key)
        keyProbeSQL = Self.rowByKey("SELECT \(key.quotedDatabaseIdentifier) FROM \(quotedTable)", key: key)
        keysProbeSQL = "SELECT \(key.quotedDatabaseIdentifier) FROM \(quotedTable) WHERE \(key.quotedDatabaseIdentifier) IN \(Self.probedKeyForms)"
        rowsProbeSQL = "SELECT * FROM \(quotedTable) WHERE \(key.quotedDatabaseIdentifier) IN \(Self.probedKeyForms)"
        storedKeysProbeSQL = "SELECT * FROM \(quotedTable) WHERE \(key.quotedDatabaseIdentifier) IN \(Self.probedStoredKeys)"
        insertEveryFieldSQL = Self.insertSQL(table: quotedTable, key: key, assigned: fields)
        updateEveryFieldSQL = Self.updateSQL(table: quotedTable, key: key, assigned: fields)
    }

    /// The key of the row of `rowID` as it is stored (in one of the ``keyForms(_:)``); `nil` when
    /// the table has no such row.
    func storedKey(of rowID: UUID, in db: GRDB.Database) throws -> DatabaseValue? {
        try DatabaseValue.fetchOne(
            db.cachedStatement(sql: keyProbeSQL), arguments: StatementArguments(databaseValues: Self.keyForms(rowID)))
    }

    /// Row IDs one probe statement reads together (``probe(_:sql:in:_:)``).
    static let keysProbedTogether = 100

    /// The list of parameters a probe statement ends with: ``keysProbedTogether`` row IDs, each
    /// in its three ``keyForms(_:)``.
    static let probedKeyForms = parameterList(3 * keysProbedTogether)
    /// ``keysProbedTogether`` keys as stored.
    private static let probedStoredKeys = parameterList(keysProbedTogether)

    private static func parameterList(_ count: Int) -> String {
        "(" + Array(repeating: "?", count: count).joined(separator: ", ") + ")"
    }

    /// Runs `sql`, which ends in `IN` ``probedKeyForms``, once per ``keysProbedTogether`` of
    /// `rowIDs`, and hands `body` each row it reads: one statement where a batch would otherwise
    /// pay one per row ID, most of it in GRDB's work around each step rather than in SQLite.
    static func probe(_ rowIDs: [UUID], sql: String, in db: GRDB.Database, _ body: (Row) throws -> Void) throws {
        try probe(rowIDs.map(keyForms), sql: sql, in: db, body)
    }

    /// Runs `sql`, which ends in an `IN` list of ``keysProbedTogether`` times the arguments of one
    /// item (all `items` have as many), once per ``keysProbedTogether`` items.
    private static func probe(_ items: [[DatabaseValue]], sql: String, in db: GRDB.Database, _ body: (Row) throws -> Void) throws {
        for start in stride(from: 0, to: items.count, by: keysProbedTogether) {
            let chunk = items[start..<min(start + keysProbedTogether, items.count)]
            // The last chunk repeats its last item, so that every chunk runs one prepared statement.
            let padded = chunk + Array(repeating: chunk[chunk.endIndex - 1], count: keysProbedTogether - chunk.count)
            let rows = try Row.fetchCursor(db.cachedStatement(sql: sql), arguments: StatementArguments(databaseValues: padded.flatMap { $0 }))
            while let row = try rows.next() { try body(row) }
        }
    }

    /// The keys as stored of those of `rowIDs` the table has rows of, as ``storedKey(of:in:)``
    /// finds them one by one.
    func storedKeys(of rowIDs: [UUID], in db: GRDB.Database) throws -> [UUID: DatabaseValue] {
        var keys: [UUID: DatabaseValue] = [:]
        // Each key found is one of the forms asked for: 16 bytes, or a UUID's text.
        try Self.probe(rowIDs, sql: keysProbeSQL, in: db) { row in
            let key: DatabaseValue = row[0]
            if let rowID = UUID(databaseKey: key) { keys[rowID] = key }
        }
        return keys
    }

    /// Hands `body` each row of `rowIDs` the table has, with its row ID, looking for each in the
    /// form its key is stored in when `storedKeys` says it (one index seek, where the three forms
    /// cost three), then in every form.
    func forEachRow(
        of rowIDs: [UUID], storedKeys: [UUID: DatabaseValue], in db: GRDB.Database, _ body: (UUID, Row) throws -> Void
    ) throws {
        var found: Set<UUID> = []
        let known = rowIDs.compactMap { storedKeys[$0].map { [$0] } }
        try Self.probe(known, sql: storedKeysProbeSQL, in: db) { row in
            guard let rowID = UUID(databaseKey: row[key]), found.insert(rowID).inserted else { return }
            try body(rowID, row)
        }
        // A row deleted and inserted again with its key in another form is found all the same.
        try Self.probe(rowIDs.filter { !found.contains($0) }, sql: rowsProbeSQL, in: db) { row in
            guard let rowID = UUID(databaseKey: row[key]), found.insert(rowID).inserted else { return }
            try body(rowID, row)
        }
    }

    /// Inserts a row with its key and `assigned` columns, in that order.
    func insertSQL(_ assigned: [String]) -> String { Self.insertSQL(table: quotedTable, key: key, assigned: assigned) }

    /// Updates the `assigned` columns of the row whose key is the last argument.
    func updateSQL(_ assigned: [String]) -> String { Self.updateSQL(table: quotedTable, key: key, assigned: assigned) }

    private static func insertSQL(table: String, key: String, assigned: [String]) -> String {
        let names = ([key] + assigned).map(\.quotedDatabaseIdentifier)
        return "INSERT INTO \(table) (\(names.joined(separator: ", "))) VALUES (\(Array(repeating: "?", count: names.count).joined(separator: ", ")))"
    }

    private static func updateSQL(table: String, key: String, assigned: [String]) -> String {
        "UPDATE \(table) SET \(assigned.map { "\($0.quotedDatabaseIdentifier) = ?" }.joined(separator: ", ")) "
            + "WHERE \(key.quotedDatabaseIdentifier) = ?"
    }

    /// The forms a UUID key may be stored in: 16 bytes, or its string in upper or lower case.
    static func keyForms(_ id: UUID) -> [DatabaseValue] {
        [id.databaseValue, id.upperText.databaseValue, id.lowerText.databaseValue]
    }

    /// `select` (a statement up to its `WHERE`) reading the one row whose `key` column holds one of
    /// the ``keyForms(_:)``, its three arguments: three index seeks, stopping at the first row found
    /// (`key IN (?, ?, ?)` would build a temporary B-tree of the three values at every execution).
    static func rowByKey(_ select: String, key: String) -> String {
        let seek = "\(select) WHERE \(key.quotedDatabaseIdentifier) = ?"
        return "\(seek) UNION ALL \(seek) UNION ALL \(seek) LIMIT 1"
    }

    func keyValue(_ rowID: UUID) -> DatabaseValue { uuidValue(rowID, column: key) }

    func uuidValue(_ id: UUID, column: String) -> DatabaseValue {
        blobColumns.contains(column) ? id.databaseValue : id.upperText.databaseValue
    }
}

/// A column's type affinity, as SQLite derives it from the declared type (datatype3 §3.1): `INT`
/// anywhere wins, then `CHAR`, `CLOB` or `TEXT`, then `BLOB` or no type, then `REAL`, `FLOA` or
/// `DOUB`; anything else is `NUMERIC`.
enum ColumnAffinity: Equatable {
    case integer, text, blob, real, numeric

    init(declaredType: String) {
        let type = declaredType.uppercased()
        if type.contains("INT") {
            self = .integer
        } else if ["CHAR", "CLOB", "TEXT"].contains(where: type.contains) {
            self = .text
        } else if type.contains("BLOB") || type.isEmpty {
            self = .blob
        } else if ["REAL", "FLOA", "DOUB"].contains(where: type.contains) {
            self = .real
        } else {
            self = .numeric
        }
    }
}

extension StatementArguments {
    /// Arguments of values already converted. GRDB's initializer for a sequence of one convertible
    /// type maps it through a key path, which Swift instantiates at every call (a twentieth of an
    /// import's time went there).
    init(databaseValues values: [DatabaseValue]) {
        self.init(values.map { $0 as (any DatabaseValueConvertible)? })
    }
}
