import Foundation
import Hummingbird
import StratusModel
import StratusStorage

/// Turns a `records/query` request into a storage query, checking it against the schema: in
/// production every field must exist with the index its comparator or sort needs; in development
/// fields nobody has saved yet simply match nothing.
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

    /// The query's record type schema, or `nil` in development when no record of the type was ever
    /// saved (the result is then empty).
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
        func field(_ name: String, path: String, needs index: FieldIndexes) throws -> FieldSchema? {
            guard let field = type.fields[name] else {
                guard environment == .development else {
                    throw StratusError.badRequest(
                        "\(path).fieldName '\(name)' is not a field of record type '\(query.recordType)' in the "
                            + "production schema")
                }
                return nil
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
            if let schema = try field(filter.fieldName, path: path, needs: index),
                let violation = filter.violation(forFieldType: schema.type)
            {
                throw StratusError.badRequest("\(path): \(violation)")
            }
        }
        for (position, sort) in query.sortBy.enumerated() {
            let path = "query.sortBy[\(position)]"
            guard let schema = try field(sort.fieldName, path: path, needs: sort.relativeLocation == nil ? .sortable : .queryable)
            else { continue }
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
