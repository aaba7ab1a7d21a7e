import Foundation
import GRDB

/// Why a model cannot be mirrored: every rule it breaks, each naming the table, the column and the rule.
public struct StoreModelError: Error, Equatable, CustomStringConvertible {
    /// One broken rule.
    public struct Violation: Sendable, Equatable, CustomStringConvertible {
        public var table: String
        /// The column, when the rule is about one.
        public var column: String?
        public var rule: String

        public var description: String {
            "table '\(table)'" + (column.map { ", column '\($0)'" } ?? "") + ": \(rule)"
        }
    }

    /// The broken rules, in the order of the model's tables.
    public var violations: [Violation]

    public var description: String {
        "the model cannot be mirrored:\n" + violations.map { "- \($0)" }.joined(separator: "\n")
    }
}

/// Checks a model against the tables as SQLite has them and the rules of mirroring (seed 001, and
/// what CloudKit and Core Data's mirroring require): a synced table has a single UUID primary key,
/// no unique constraint besides it (two devices may each create a row the constraint would refuse,
/// and the server cannot refuse either), and only columns that are optional or have a default (a
/// record may lack any field) with a declared type that gives their field one type; relationships are optional UUID columns with their inverse named,
/// never ordered, and never from a synced table to a local-only one.
enum StoreModelChecker {
    static func violations(of model: StoreModel, in db: Database) throws -> [StoreModelError.Violation] {
        var violations: [StoreModelError.Violation] = []
        func refuse(_ table: String, _ column: String?, _ rule: String) {
            violations.append(.init(table: table, column: column, rule: rule))
        }
        let names = model.tables.map(\.name)
        for duplicate in Set(names.filter { name in names.count(where: { $0 == name }) > 1 }).sorted() {
            refuse(duplicate, nil, "is declared more than once")
        }
        var recordTypes: [String: String] = [:]
        for table in model.tables {
            guard case .synced(let recordType) = table.configuration else { continue }
            if let other = recordTypes[recordType] {
                refuse(table.name, nil, "its record type '\(recordType)' is also the record type of '\(other)'")
            }
            recordTypes[recordType] = table.name
        }
        for table in model.tables {
            guard try db.tableExists(table.name) else {
                refuse(table.name, nil, "does not exist in the database")
                continue
            }
            let columns = try Row.fetchAll(db, sql: "PRAGMA table_info(\(table.name.quotedDatabaseIdentifier))")
            let byName = Dictionary(columns.map { (String($0["name"] as String), $0) }, uniquingKeysWith: { first, _ in first })
            let primaryKey = columns.filter { ($0["pk"] as Int) > 0 }
            if table.isSynced {
                if primaryKey.count != 1 {
                    refuse(table.name, nil, "a synced table needs a primary key of one UUID column")
                } else if let key = primaryKey.first,
                    !["TEXT", "BLOB"].contains((key["type"] as String).uppercased())
                {
                    refuse(
                        table.name, key["name"],
                        "the primary key of a synced table holds a UUID (declared TEXT or BLOB), not \(key["type"] as String)")
                } else if let key = primaryKey.first, !(key["notnull"] as Bool) {
                    refuse(table.name, key["name"], "the primary key of a synced table must be NOT NULL (it names the record)")
                }
                if let key = primaryKey.first?["name"] as String?, table.localColumns.contains(key) {
                    refuse(table.name, key, "the primary key names the record: it cannot be a local column")
                }
                for index in try Row.fetchAll(db, sql: "PRAGMA index_list(\(table.name.quotedDatabaseIdentifier))")
                where (index["unique"] as Bool) && (index["origin"] as String) != "pk" {
                    let indexName: String = index["name"]
                    let indexed = try Row.fetchAll(db, sql: "PRAGMA index_info(\(indexName.quotedDatabaseIdentifier))")
                        .compactMap { $0["name"] as String? }
                    refuse(
                        table.name, indexed.joined(separator: ", "),
                        "a synced table can have no unique constraint: two devices may each save a row it would refuse")
                }
                // Relationship columns have a rule of their own, below.
                let relationshipColumns = Set(table.relationships.map(\.column))
                for column in columns where (column["pk"] as Int) == 0 && (column["notnull"] as Bool)
                    && (column["dflt_value"] as String?) == nil && !relationshipColumns.contains(column["name"])
                {
                    refuse(
                        table.name, column["name"],
                        "a synced column must be optional or have a default: a record from the server may lack any field")
                }
                for column in columns where (column["pk"] as Int) == 0 && !table.localColumns.contains(column["name"])
                    && !relationshipColumns.contains(column["name"])
                    && ((column["type"] as String).isEmpty || ColumnAffinity(declaredType: column["type"]) == .numeric)
                {
                    refuse(
                        table.name, column["name"],
                        "a synced column needs a declared type of INTEGER, REAL, TEXT or BLOB affinity: its field holds one type")
                }
                for column in columns.map({ $0["name"] as String })
                where !table.localColumns.contains(column) && !Self.isFieldName(column) {
                    refuse(
                        table.name, column,
                        "a synced column is a record field: its name must be a letter then letters, digits or _ (at most 255)")
                }
                for local in table.localColumns.sorted() where byName[local] == nil {
                    refuse(table.name, local, "is declared local but the table has no such column")
                }
            }
            for relationship in table.relationships {
                guard let column = byName[relationship.column] else {
                    refuse(table.name, relationship.column, "the relationship's column does not exist")
                    continue
                }
                // What mirroring asks of a relationship binds the synced tables; a local-only table
                // relates as it likes.
                if table.isSynced, !["TEXT", "BLOB"].contains((column["type"] as String).uppercased()) {
                    refuse(table.name, relationship.column, "a relationship column holds a UUID (declared TEXT or BLOB)")
                }
                if table.isSynced, column["notnull"] as Bool {
                    refuse(
                        table.name, relationship.column,
                        "a relationship must be optional: the related row may arrive later or be deleted elsewhere")
                }
                if table.isSynced, relationship.inverse.isEmpty {
                    refuse(table.name, relationship.column, "the relationship needs its inverse on '\(relationship.destination)'")
                }
                if table.isSynced, relationship.ordered {
                    refuse(table.name, relationship.column, "a mirrored relationship cannot be ordered: CloudKit keeps no order")
                }
                guard let destination = model.table(named: relationship.destination) else {
                    refuse(
                        table.name, relationship.column,
                        "the relationship's destination '\(relationship.destination)' is not declared in the model")
                    continue
                }
                if table.isSynced, !destination.isSynced {
                    refuse(
                        table.name, relationship.column,
                        "a synced table cannot relate to the local-only table '\(destination.name)': the other devices would get a dangling reference")
                }
            }
        }
        return violations
    }

    /// Whether `name` can name a CloudKit field.
    static func isFieldName(_ name: String) -> Bool {
        guard let first = name.unicodeScalars.first, name.utf8.count <= 255, first.isASCII,
            CharacterSet.letters.contains(first)
        else { return false }
        return name.unicodeScalars.allSatisfy { $0.isASCII && (CharacterSet.alphanumerics.contains($0) || $0 == "_") }
    }
}
