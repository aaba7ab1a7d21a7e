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
