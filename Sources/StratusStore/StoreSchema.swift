import Foundation
import GRDB
import Stratus
import StratusModel

/// The record types a model's synced tables become, as ``StratusStore/initializeSchema()`` writes
/// them into the development schema: one record type per synced table, one field per mirrored
/// column, typed by the column's affinity (`INTEGER` → `INT64`, `REAL` → `DOUBLE`, `TEXT` →
/// `STRING`, `BLOB` → `BYTES` and its `<column>_ckAsset` `ASSETID`), relationships as `STRING`.
enum StoreSchema {
    /// The schema of `model`'s synced tables, with the indexes development gives new fields; with
    /// `softDeletes` (a store of the public database), the deletion mark and the modification time
    /// its polling sorts by.
    static func schema(of model: StoreModel, softDeletes: Bool, in db: GRDB.Database) throws -> Schema {
        var schema = Schema()
        for table in model.syncedTables {
            guard case .synced(let recordType) = table.configuration else { continue }
            var fields: [String: FieldSchema] = [:]
            for (name, type) in try fieldTypes(of: table, softDeletes: softDeletes, in: db) {
                fields[name] = FieldSchema(type: type, indexes: .automatic(for: type))
            }
            if softDeletes { fields["___modTime"] = FieldSchema(type: .timestamp, indexes: .automatic(for: .timestamp)) }
            schema.recordTypes[recordType] = RecordTypeSchema(fields: fields)
        }
        return schema
    }

    /// A record of each synced table with every field set, in `zoneID`: saving them in development
    /// creates the record types and fields. `assetFile` is the content of every asset field.
    static func representativeRecords(
        of model: StoreModel, softDeletes: Bool, zoneID: RecordZone.ID, assetFile: URL, in db: GRDB.Database
    ) throws -> [Stratus.Record] {
        try model.syncedTables.map { table in
            guard case .synced(let recordType) = table.configuration else { preconditionFailure("a synced table") }
            var record = Stratus.Record(recordType: recordType, recordID: Stratus.Record.ID(zoneID: zoneID))
            for (name, type) in try fieldTypes(of: table, softDeletes: softDeletes, in: db) {
                let value: RecordFieldValue =
                    switch type {
                    case .int64: .int64(0)
                    case .double: .double(0)
                    case .bytes: .bytes(Data([0]))
                    case .asset: .asset(Asset(fileURL: assetFile))
                    default: .string("")
                    }
                record.setFieldValue(value, forKey: name)
            }
            return record
        }
    }

    /// The fields of a synced table and their types.
    private static func fieldTypes(of table: StoreTable, softDeletes: Bool, in db: GRDB.Database) throws -> [String: FieldType] {
        let columns = try StoreColumns(table, in: db)
        var types: [String: FieldType] = softDeletes ? [RecordMapping.deletedKey: .int64] : [:]
        for column in columns.fields {
            if columns.relationships.contains(column) {
                types[column] = .string
                continue
            }
            switch columns.affinities[column] ?? .blob {
            case .integer: types[column] = .int64
            case .real: types[column] = .double
            case .text: types[column] = .string
            case .blob, .numeric:
                // The model checker refuses NUMERIC columns; a BLOB column has an asset field too.
                types[column] = .bytes
                types[RecordMapping.assetKey(column)] = .asset
            }
        }
        return types
    }
}

/// The mirrored columns each synced table had when the store last opened, kept in
/// `stratusstore_mirror` (`columns:<table>`), so that an app upgrade that adds columns to a synced
/// table is noticed: the rows this device already holds were applied without them, and their
/// records, which may carry values for them (written by devices upgraded first), are needed again.
enum StoreColumnVersions {
    private static func key(_ table: String) -> String { "columns:" + table }

    /// The synced tables of `model` that gained mirrored columns since they were last recorded
    /// (none the first time).
    static func widenedTables(of model: StoreModel, in db: GRDB.Database) throws -> [String] {
        try model.syncedTables.compactMap { table in
            guard let stored = try recorded(table.name, in: db) else { return nil }
            return Set(try StoreColumns(table, in: db).fields).isSubset(of: Set(stored)) ? nil : table.name
        }
    }

    /// Records the current mirrored columns of `model`'s synced tables; the known records of a
    /// table that gained columns have their change tags cleared, so that its records are applied
    /// again when fetched, not skipped as already held.
    static func noteColumns(of model: StoreModel, in db: GRDB.Database) throws {
        let widened = Set(try widenedTables(of: model, in: db))
        for table in model.syncedTables {
            let current = try StoreColumns(table, in: db).fields.sorted()
            if widened.contains(table.name) {
                try db.execute(sql: "UPDATE stratusstore_records SET change_tag = NULL WHERE table_name = ?", arguments: [table.name])
            }
            if try recorded(table.name, in: db) != current {
                try StoreMetadata.setValue(try JSONEncoder().encode(current), for: key(table.name), in: db)
            }
        }
    }

    private static func recorded(_ table: String, in db: GRDB.Database) throws -> [String]? {
        try StoreMetadata.value(key(table), in: db).flatMap(Data.fromDatabaseValue).map {
            try JSONDecoder().decode([String].self, from: $0)
        }
    }
}
