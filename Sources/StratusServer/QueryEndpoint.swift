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

/// A `continuationMarker`: where a query's page ended, sealed so clients cannot alter it.
struct QueryMarker {
    private static let version: UInt8 = 1

    static func encode(_ cursor: QueryCursor, recordType: String, tokens: SyncTokenCodec) -> String {
        var writer = JSONWriter()
        writer.beginObject()
        writer.field("t", recordType)
        writer.key("k")
        writer.beginArray()
        for key in cursor.keys {
            switch key {
            case .integer(let value): writer.int(value)
            case .real(let value): writer.double(value)
            case .text(let value): writer.string(value)
            }
        }
        writer.endArray()
        writer.field("z", cursor.zone)
        writer.field("n", cursor.name)
        writer.endObject()
        return tokens.seal([version] + writer.bytes)
    }

    static func decode(_ marker: String?, recordType: String, tokens: SyncTokenCodec) throws -> QueryCursor? {
        guard let marker, !marker.isEmpty else { return nil }
        let bytes = try tokens.open(marker, field: "continuationMarker", what: "a continuation marker")
        guard bytes.first == version, let object = try? JSONValue.parse(Array(bytes.dropFirst())).object(),
            let type: String = try? object.decode("t"), let zone: String = try? object.decode("z"),
            let name: String = try? object.decode("n"), case .array(let keys)? = object["k"]
        else {
            throw StratusError.badRequest("continuationMarker is not a continuation marker issued by this server")
        }
        guard type == recordType else {
            throw StratusError.badRequest(
                "continuationMarker belongs to a query of record type '\(type)', not '\(recordType)'; "
                    + "pass it with the query that returned it")
        }
        let scalars: [QueryScalar] = keys.compactMap { key in
            switch key {
            case .integer(let value): .integer(value)
            case .double(let value): .real(value)
            case .string(let value): .text(value)
            default: nil
            }
        }
        return QueryCursor(keys: scalars, zone: zone, name: name)
    }
}

extension DatabaseEndpoints {
    /// `records/query`.
    func queryRecords(_ request: Request, _ context: StratusRequestContext) async throws -> Response {
        let target = try authenticator.authenticate(request, context: context)
        let access = try DatabaseAccess.authorize(.read, for: target, endpoint: "records/query")
        let locator = access.locator
        let body = try await request.decodeJSON(QueryRecordsRequest.self, limit: limits.maxRequestBodyBytes)
        let zones: [String]?
        if body.zoneID == nil, body.zoneWide == true {
            guard access.listsOwnZones else { throw DatabaseAccess.notShared("") }
            zones = nil
        } else {
            zones = [try access.zone(body.zoneID, field: "zoneID", limits: limits)]
        }
        let schema = try await storage.schema(container: target.container, environment: target.environment)
        let validator = QueryValidator(schema: schema, environment: target.environment, limits: limits)
        let query = body.query
        let type = try validator.recordType(of: query)
        if let type { try validator.check(query, type: type) }
        let readAccess = access.readAccess(recordType: query.recordType, schema: schema)
        if readAccess == .none {
            throw StratusError(
                .accessDenied,
                "the schema does not grant READ on record type '\(query.recordType)' to "
                    + (target.userRecordName == nil ? "callers who are not signed in" : "you"))
        }
        let after = try QueryMarker.decode(body.continuationMarker, recordType: query.recordType, tokens: tokens)
        let page: QueryPage
        if let type {
            var createdBy: String?
            if case .createdBy(let user) = readAccess { createdBy = user }
            page = try await storage.queryRecords(
                RecordQuery(
                    recordType: query.recordType, filters: query.filterBy, sorts: query.sortBy, fields: type.fields,
                    createdBy: createdBy, limit: resultsLimit(body.resultsLimit), after: after),
                zones: zones, in: locator)
        } else {
            page = QueryPage(items: [], cursor: nil)
        }
        let desiredKeys = body.desiredKeys.map(Set.init)
        let numbersAsStrings = body.numbersAsStrings ?? false
        var zoneIDs: [String: [UInt8]] = [:]
        var writer = JSONWriter(capacity: 512 * page.items.count + 64)
        writer.beginObject()
        writer.key("records")
        writer.beginArray()
        var assetURLs: [String: @Sendable (String, String, String) -> String] = [:]
        for item in page.items {
            if zoneIDs[item.zone] == nil {
                zoneIDs[item.zone] = try target.wireZoneID(item.zone).jsonBytes
                assetURLs[item.zone] = target.assetURL(zone: item.zone)
            }
            item.record.write(
                to: &writer, zoneIDJSON: zoneIDs[item.zone]!, desiredKeys: desiredKeys, numbersAsStrings: numbersAsStrings,
                assetURL: assetURLs[item.zone])
        }
        writer.endArray()
        if let cursor = page.cursor {
            writer.field("continuationMarker", QueryMarker.encode(cursor, recordType: query.recordType, tokens: tokens))
        }
        writer.endObject()
        return .json(writer)
    }
}
