import Foundation
import Hummingbird
import StratusModel
import StratusStorage

/// Turns a `records/query` request into a storage query, checking it against the schema, as
/// CloudKit does: every field must be one of the record type's (development adds a field when a
/// record is first saved with it), and in production have the index its comparator or sort needs.
struct QueryValidator {
    let schema: Schema
    let environment: ContainerEnvironment
    let limits: Limits

    /// The index a comparator reads.
    static func index(for comparator: QueryComparator) -> FieldIndexes {
        switch comparator {
        case .containsAllTokens, .containsAnyTokens: .searchable
        case .lessThan, .lessThanOrEquals, .greaterThan, .greaterThanOrEquals: .sortable
        default: .queryable
        }
    }

    private func indexName(_ index: FieldIndexes) -> String {
        index == .searchable ? "SEARCHABLE" : index == .sortable ? "SORTABLE" : "QUERYABLE"
    }

    /// The query's record type schema; `NOT_FOUND` naming it when the schema has no such type (in
    /// development: no record of the type was saved yet), as CloudKit answers "Did not find record type".
    func requireRecordType(of query: Query) throws -> RecordTypeSchema {
        guard let type = try recordType(of: query) else {
            throw StratusError(
                .notFound,
                "query.recordType '\(query.recordType)' is not in the development schema: no record of that type has been "
                    + "saved yet (CloudKit: Did not find record type)")
        }
        return type
    }

    /// The query's record type schema, or `nil` in development when no record of the type was ever
    /// saved (a subscription may wait for the type's first record).
    func recordType(of query: Query) throws -> RecordTypeSchema? {
        if let violation = RecordValidator(limits: limits).violation(ofIdentifier: query.recordType) {
            throw StratusError.badRequest("query.recordType '\(query.recordType)' \(violation)")
        }
        guard let type = schema.recordTypes[query.recordType] else {
            guard environment == .development else {
                throw StratusError.badRequest("query.recordType '\(query.recordType)' is not in the production schema")
            }
            return nil
        }
        return type
    }

    /// Checks filters and sorts against the record type's fields.
    func check(_ query: Query, type: RecordTypeSchema) throws {
        func field(_ name: String, path: String, needs index: FieldIndexes) throws -> FieldSchema {
            guard let field = type.fields[name] else {
                throw StratusError.badRequest(
                    "\(path).fieldName '\(name)' is not a field of record type '\(query.recordType)' in the "
                        + (environment == .development
                            ? "development schema: no record of the type has held it yet"
                            : "production schema"))
            }
            if environment == .production, field.indexes.isDisjoint(with: index) {
                throw StratusError.badRequest(
                    "\(path).fieldName '\(name)' of record type '\(query.recordType)' is not \(indexName(index)) in "
                        + "the production schema; add the index in development and deploy it")
            }
            return field
        }
        for (position, filter) in query.filterBy.enumerated() {
            let path = "query.filterBy[\(position)]"
            let index = Self.index(for: filter.comparator)
            if filter.fieldName == QueryFilter.allSearchableFields {
                guard index == .searchable else {
                    throw StratusError.badRequest(
                        "\(path).fieldName '\(QueryFilter.allSearchableFields)' is only for CONTAINS_ALL_TOKENS and "
                            + "CONTAINS_ANY_TOKENS")
                }
                continue
            }
            if let violation = filter.violation(forFieldType: try field(filter.fieldName, path: path, needs: index).type) {
                throw StratusError.badRequest("\(path): \(violation)")
            }
        }
        for (position, sort) in query.sortBy.enumerated() {
            let path = "query.sortBy[\(position)]"
            let schema = try field(sort.fieldName, path: path, needs: sort.relativeLocation == nil ? .sortable : .queryable)
            if sort.relativeLocation != nil, schema.type != .location {
                throw StratusError.badRequest(
                    "\(path).relativeLocation sorts by distance, so '\(sort.fieldName)' must be a LOCATION field, not "
                        + schema.type.rawValue)
            }
            if sort.relativeLocation == nil, schema.type.isList || [.location, .bytes, .asset].contains(schema.type) {
                throw StratusError.badRequest(
                    "\(path): records cannot be sorted by \(schema.type.rawValue) field '\(sort.fieldName)'"
                        + (schema.type == .location ? "; give relativeLocation to sort by distance" : ""))
            }
        }
    }
}
