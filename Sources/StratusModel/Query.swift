/// How a query filter compares a record's field with the filter's value (CloudKit's
/// `QueryFilterComparator`).
///
/// String comparisons (`EQUALS`, `LESS_THAN`, `IN`, `LIST_CONTAINS`, `BEGINS_WITH`, …) are
/// case-sensitive and compare UTF-8 bytes, so that every store evaluates them the same way (see
/// ``QueryScalar``). Only the token comparators fold case and diacritics (see ``TextTokenizer``).
public enum QueryComparator: String, Sendable, Hashable, CaseIterable, WireEnum {
    /// The field equals the value.
    case equals = "EQUALS"
    /// The field differs from the value.
    case notEquals = "NOT_EQUALS"
    /// The field sorts before the value.
    case lessThan = "LESS_THAN"
    /// The field sorts before or equals the value.
    case lessThanOrEquals = "LESS_THAN_OR_EQUALS"
    /// The field sorts after the value.
    case greaterThan = "GREATER_THAN"
    /// The field sorts after or equals the value.
    case greaterThanOrEquals = "GREATER_THAN_OR_EQUALS"
    /// A `LOCATION` field lies within the filter's `distance` of the value.
    case near = "NEAR"
    /// The field's text holds every token of the value.
    case containsAllTokens = "CONTAINS_ALL_TOKENS"
    /// The field's text holds at least one token of the value.
    case containsAnyTokens = "CONTAINS_ANY_TOKENS"
    /// The field equals an element of the list value.
    case `in` = "IN"
    /// The field equals no element of the list value.
    case notIn = "NOT_IN"
    /// A list field has the value as an element.
    case listContains = "LIST_CONTAINS"
    /// A list field does not have the value as an element.
    case notListContains = "NOT_LIST_CONTAINS"
    /// A list field has at least one element of the list value.
    case listContainsAny = "LIST_CONTAINS_ANY"
    /// A list field has no element of the list value.
    case notListContainsAny = "NOT_LIST_CONTAINS_ANY"
    /// A list field has every element of the list value.
    case listContainsAll = "LIST_CONTAINS_ALL"
    /// A list field lacks at least one element of the list value.
    case notListContainsAll = "NOT_LIST_CONTAINS_ALL"
    /// A `STRING` field starts with the value.
    case beginsWith = "BEGINS_WITH"
    /// A `STRING` field does not start with the value.
    case notBeginsWith = "NOT_BEGINS_WITH"
    /// An element of a `STRING_LIST` field starts with the value.
    case listMemberBeginsWith = "LIST_MEMBER_BEGINS_WITH"
    /// No element of a `STRING_LIST` field starts with the value.
    case notListMemberBeginsWith = "NOT_LIST_MEMBER_BEGINS_WITH"

    /// Whether this comparator negates another; a record without the field satisfies exactly these.
    var isNegative: Bool {
        switch self {
        case .notEquals, .notIn, .notListContains, .notListContainsAny, .notListContainsAll, .notBeginsWith,
            .notListMemberBeginsWith:
            true
        default: false
        }
    }

    /// Whether this comparator searches text tokens.
    var isTokenSearch: Bool { self == .containsAllTokens || self == .containsAnyTokens }
}

/// One condition of a query (CloudKit's Filter Dictionary).
public struct QueryFilter: Hashable, Sendable, JSONDecodable {
    /// The field name that stands for every `STRING` and `STRING_LIST` field of a record, for the
    /// token comparators: `CONTAINS_ALL_TOKENS` on it needs every token somewhere in those fields.
    public static let allSearchableFields = "___all"

    /// How the field is compared.
    public var comparator: QueryComparator
    /// The field compared, or ``allSearchableFields``.
    public var fieldName: String
    /// The value compared with, as a Record Field Dictionary; a list for `IN`, `NOT_IN` and
    /// `LIST_CONTAINS_ANY`…`NOT_LIST_CONTAINS_ALL`.
    public var fieldValue: FieldValue
    /// For `NEAR` only: the radius around ``fieldValue`` in meters.
    public var distance: Double?

    /// Creates a filter.
    public init(comparator: QueryComparator, fieldName: String, fieldValue: FieldValue, distance: Double? = nil) {
        self.comparator = comparator
        self.fieldName = fieldName
        self.fieldValue = fieldValue
        self.distance = distance
    }

    /// Decodes a Filter Dictionary. Checks what does not depend on the field's type: a known
    /// comparator, a non-empty field name, and a positive `distance` with `NEAR` and only there.
    /// ``violation(forFieldType:)`` checks the rest.
    public init(json: JSONValue) throws {
        let object = try json.object()
        comparator = try object.decode("comparator")
        fieldName = try SystemFieldName.queriedField(in: object)
        fieldValue = try object.decode("fieldValue")
        let searched: String? = if comparator.isTokenSearch, case .string(let text) = fieldValue { text } else { nil }
        let values = searched.map { TextTokenizer.tokens($0).count } ?? fieldValue.queryScalars.count
        if values > Limits.maxValuesPerList {
            throw JSONDecodingError(
                .invalid, "holds \(values) \(searched == nil ? "values" : "search tokens"); a filter holds at most "
                    + "\(Limits.maxValuesPerList)", at: [.key("fieldValue")])
        }
        distance = try object.decodeIfPresent("distance")
        switch (comparator, distance) {
        case (.near, nil):
            throw JSONDecodingError(.missing, "", at: [.key("distance")])
        case (.near, let distance?) where distance <= 0:
            throw JSONDecodingError(.invalid, "must be more than 0 meters", at: [.key("distance")])
        case (.near, _), (_, nil):
            break
        case (_, _?):
            throw JSONDecodingError(
                .invalid, "applies only to NEAR, not \(comparator.rawValue)", at: [.key("distance")])
        }
    }
}

extension QueryFilter {
    /// Why this filter cannot apply to a field of type `fieldType` (the field's type in the record
    /// or schema), or `nil` when it can. The sentence names the comparator, the field and the rule.
    ///
    /// Values compare with fields of their own type; besides, `INT64` and `DOUBLE` compare with each
    /// other, and `TIMESTAMP` with `INT64` (so an untagged number can filter a `TIMESTAMP` field).
    /// `UNKNOWN_LIST` (an empty list of unknown type) passes wherever a list does. For
    /// ``allSearchableFields`` the field type is not consulted: only the token comparators with a
    /// `STRING` value apply.
    public func violation(forFieldType fieldType: FieldType) -> String? {
        if let distance, comparator != .near {
            return "distance (\(distance)) applies only to NEAR, not \(comparator.rawValue)"
        }
        let name = comparator.rawValue
        let valueType = fieldValue.type
        guard fieldName != Self.allSearchableFields else {
            guard comparator.isTokenSearch else {
                return "\(name) does not apply to '\(fieldName)' (every STRING and STRING_LIST field); use "
                    + "CONTAINS_ALL_TOKENS or CONTAINS_ANY_TOKENS"
            }
            guard valueType == .string else {
                return "\(name) needs a value of type STRING for '\(fieldName)', not \(valueType.rawValue)"
            }
            return nil
        }
        lazy var field = fieldDescription(fieldType)
        switch comparator {
        case .equals, .notEquals, .lessThan, .lessThanOrEquals, .greaterThan, .greaterThanOrEquals, .in, .notIn:
            if fieldType.isList {
                let use = comparator.listCounterpart?.rawValue ?? "the LIST_ comparators"
                return "\(name) does not apply to \(field); use \(use)"
            }
            let accepted = fieldType.comparableTypes
            guard !accepted.isEmpty else { return "\(name) does not apply to \(field)" }
            guard comparator == .in || comparator == .notIn else {
                return scalarViolation(accepted: accepted, fieldType: fieldType)
            }
            return listViolation(accepted: accepted, example: fieldType.listType, fieldType: fieldType)
        case .listContains, .notListContains, .listContainsAny, .notListContainsAny, .listContainsAll,
            .notListContainsAll:
            guard fieldType.isList else {
                let use = comparator.scalarCounterpart.map { "; use \($0.rawValue)" } ?? ""
                return "\(name) applies to list fields, not \(field)\(use)"
            }
            let accepted = fieldType.elementType?.comparableTypes ?? FieldType.queryScalarTypes
            guard !accepted.isEmpty else { return "\(name) does not apply to \(field)" }
            guard comparator == .listContains || comparator == .notListContains else {
                let example = fieldType == .unknownList ? nil : fieldType
                return listViolation(accepted: accepted, example: example, fieldType: fieldType)
            }
            return scalarViolation(accepted: accepted, fieldType: fieldType)
        case .beginsWith, .notBeginsWith:
            guard fieldType == .string else {
                let use = fieldType.isList ? "; use LIST_MEMBER_BEGINS_WITH" : ""
                return "\(name) applies to STRING fields, not \(field)\(use)"
            }
            return scalarViolation(accepted: [.string], fieldType: fieldType)
        case .listMemberBeginsWith, .notListMemberBeginsWith:
            guard fieldType == .stringList || fieldType == .unknownList else {
                let use = fieldType == .string ? "; use BEGINS_WITH" : ""
                return "\(name) applies to STRING_LIST fields, not \(field)\(use)"
            }
            return scalarViolation(accepted: [.string], fieldType: fieldType)
        case .containsAllTokens, .containsAnyTokens:
            guard fieldType == .string || fieldType == .stringList || fieldType == .unknownList else {
                return "\(name) applies to STRING fields and STRING_LIST fields, not \(field)"
            }
            return scalarViolation(accepted: [.string], fieldType: fieldType)
        case .near:
            guard fieldType == .location else { return "NEAR applies to LOCATION fields, not \(field)" }
            guard valueType == .location, let distance, distance > 0 else {
                return "NEAR needs a LOCATION value and a distance in meters (more than 0) for \(field)"
            }
            return nil
        }
    }

    /// The rule for comparators whose value is a scalar of one of the `accepted` types.
    private func scalarViolation(accepted: [FieldType], fieldType: FieldType) -> String? {
        let valueType = fieldValue.type
        guard !accepted.contains(valueType) else { return nil }
        return "\(comparator.rawValue) needs \(valueDescription(accepted)) for \(fieldDescription(fieldType)), "
            + "not \(valueType.rawValue)"
    }

    /// The rule for comparators whose value is a list of `accepted` elements; `example` names a
    /// suitable list type.
    private func listViolation(accepted: [FieldType], example: FieldType?, fieldType: FieldType) -> String? {
        guard case .list(let elementType, _) = fieldValue else {
            let example = example.map { " (e.g. \($0.rawValue))" } ?? ""
            return "\(comparator.rawValue) needs a list value\(example) for \(fieldDescription(fieldType))"
        }
        guard let elementType, !accepted.contains(elementType) else { return nil }
        return "\(comparator.rawValue) needs a list of \(valueDescription(accepted, plural: true)) for "
            + "\(fieldDescription(fieldType)), not \(fieldValue.type.rawValue)"
    }

    /// "STRING field 'title'".
    private func fieldDescription(_ fieldType: FieldType) -> String { "\(fieldType.rawValue) field '\(fieldName)'" }

    /// "a value of type INT64, DOUBLE or TIMESTAMP", or with `plural` "INT64, DOUBLE or TIMESTAMP values".
    private func valueDescription(_ types: [FieldType], plural: Bool = false) -> String {
        var names = types.map(\.rawValue)
        let last = names.removeLast()
        let list = names.isEmpty ? last : names.joined(separator: ", ") + " or " + last
        return plural ? "\(list) values" : "a value of type \(list)"
    }
}

extension QueryComparator {
    /// The comparator to use instead on a list field.
    fileprivate var listCounterpart: QueryComparator? {
        switch self {
        case .equals: .listContains
        case .notEquals: .notListContains
        case .in: .listContainsAny
        case .notIn: .notListContainsAny
        default: nil
        }
    }

    /// The comparator to use instead on a scalar field.
    fileprivate var scalarCounterpart: QueryComparator? {
        switch self {
        case .listContains: .equals
        case .notListContains: .notEquals
        case .listContainsAny: .in
        case .notListContainsAny: .notIn
        default: nil
        }
    }
}

extension FieldType {
    /// The scalar types that queries compare (``FieldValue/queryScalars`` is not empty for them).
    fileprivate static let queryScalarTypes: [FieldType] = [.string, .int64, .double, .timestamp, .reference]

    /// The value types a field of this type compares with; empty when the type does not compare.
    fileprivate var comparableTypes: [FieldType] {
        switch self {
        case .string: [.string]
        case .int64: [.int64, .double, .timestamp]
        case .double: [.double, .int64]
        case .timestamp: [.timestamp, .int64]
        case .reference: [.reference]
        default: []
        }
    }
}

/// The order of a query's results (CloudKit's Sort Descriptor Dictionary).
public struct QuerySort: Hashable, Sendable, JSONDecodable {
    /// The field sorted by.
    public var fieldName: String
    /// Smallest first (the default) or largest first.
    public var ascending: Bool
    /// When set, records sort by the distance of their `LOCATION` field from this place.
    public var relativeLocation: Location?

    /// Creates a sort descriptor.
    public init(fieldName: String, ascending: Bool = true, relativeLocation: Location? = nil) {
        self.fieldName = fieldName
        self.ascending = ascending
        self.relativeLocation = relativeLocation
    }

    /// Decodes a Sort Descriptor Dictionary; `relativeLocation` is a Location Dictionary, as
    /// Apple's samples send it, or a Record Field Dictionary of type `LOCATION`.
    public init(json: JSONValue) throws {
        let object = try json.object()
        fieldName = try SystemFieldName.queriedField(in: object)
        ascending = try object.decodeIfPresent("ascending") ?? true
        if let plain = object["relativeLocation"], (try? plain.object())?["latitude"] != nil {
            relativeLocation = try withJSONPath(.key("relativeLocation")) { try Location(json: plain) }
            return
        }
        switch try object.decodeIfPresent("relativeLocation", as: FieldValue.self) {
        case nil: relativeLocation = nil
        case .location(let location): relativeLocation = location
        case let other?:
            throw JSONDecodingError(
                .invalid, "must be a LOCATION field value, not \(other.type.rawValue)", at: [.key("relativeLocation")])
        }
    }
}

/// What a query selects (CloudKit's Query Dictionary): records of one type that satisfy every
/// filter, in the order of the sort descriptors.
public struct Query: Hashable, Sendable, JSONDecodable {
    /// The record type searched.
    public var recordType: String
    /// Conditions that all hold for a result.
    public var filterBy: [QueryFilter]
    /// Sort descriptors, most significant first.
    public var sortBy: [QuerySort]

    /// Creates a query.
    public init(recordType: String, filterBy: [QueryFilter] = [], sortBy: [QuerySort] = []) {
        self.recordType = recordType
        self.filterBy = filterBy
        self.sortBy = sortBy
    }

    /// Decodes a Query Dictionary; `filterBy` and `sortBy` default to empty.
    public init(json: JSONValue) throws {
        let object = try json.object()
        recordType = try object.decode("recordType")
        filterBy = try object.decodeIfPresent("filterBy") ?? []
        sortBy = try object.decodeIfPresent("sortBy") ?? []
    }
}

/// The body of `records/query`.
public struct QueryRecordsRequest: Hashable, Sendable, JSONDecodable {
    /// The zone searched; the default zone when absent.
    public var zoneID: ZoneID?
    /// The most records to return in this page.
    public var resultsLimit: Int?
    /// What to search for.
    public var query: Query
    /// Where the previous page ended; absent for the first page.
    public var continuationMarker: String?
    /// Fields to return; `nil` means all.
    public var desiredKeys: [String]?
    /// Whether to search every zone of the database rather than one.
    public var zoneWide: Bool?
    /// Whether to write INT64 and DOUBLE values as strings.
    public var numbersAsStrings: Bool?

    /// Creates a request.
    public init(
        zoneID: ZoneID? = nil, resultsLimit: Int? = nil, query: Query, continuationMarker: String? = nil,
        desiredKeys: [String]? = nil, zoneWide: Bool? = nil, numbersAsStrings: Bool? = nil
    ) {
        self.zoneID = zoneID
        self.resultsLimit = resultsLimit
        self.query = query
        self.continuationMarker = continuationMarker
        self.desiredKeys = desiredKeys
        self.zoneWide = zoneWide
        self.numbersAsStrings = numbersAsStrings
    }

    /// Decodes the request body.
    public init(json: JSONValue) throws {
        let object = try json.object()
        zoneID = try object.decodeIfPresent("zoneID")
        resultsLimit = try object.decodeIfPresent("resultsLimit")
        query = try object.decode("query")
        continuationMarker = try object.decodeIfPresent("continuationMarker")
        desiredKeys = try object.decodeIfPresent("desiredKeys")
        zoneWide = try object.decodeIfPresent("zoneWide")
        numbersAsStrings = try object.decodeIfPresent("numbersAsStrings")
    }
}

extension QueryFilter: JSONWritable {
    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("comparator", comparator.rawValue)
        writer.field("fieldName", fieldName)
        writer.field("fieldValue", fieldValue)
        if let distance {
            writer.key("distance")
            writer.double(distance)
        }
        writer.endObject()
    }
}

extension QuerySort: JSONWritable {
    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("fieldName", fieldName)
        writer.field("ascending", ascending)
        writer.field("relativeLocation", relativeLocation.map(FieldValue.location))
        writer.endObject()
    }
}

extension Query: JSONWritable {
    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("recordType", recordType)
        writer.field("filterBy", array: filterBy)
        writer.field("sortBy", array: sortBy)
        writer.endObject()
    }
}

extension QueryRecordsRequest: JSONWritable {
    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("zoneID", zoneID)
        writer.field("resultsLimit", resultsLimit.map(Int64.init))
        writer.field("query", query)
        writer.field("continuationMarker", continuationMarker)
        writer.field("desiredKeys", desiredKeys)
        writer.field("zoneWide", zoneWide)
        writer.field("numbersAsStrings", numbersAsStrings)
        writer.endObject()
    }
}

/// The system fields a filter or sort may name with `systemFieldName` (the key Apple's web library
/// uses), and the query fields they stand for.
enum SystemFieldName {
    static let queryFields: [String: String] = [
        "recordName": "___recordID", "createdTimestamp": "___createTime", "modifiedTimestamp": "___modTime",
        "createdUserRecordName": "___createdBy", "modifiedUserRecordName": "___modifiedBy",
    ]

    /// The field a Filter or Sort Descriptor Dictionary names: its `fieldName`, or the query field its
    /// `systemFieldName` stands for.
    static func queriedField(in object: JSONObject) throws -> String {
        if let system: String = try object.decodeIfPresent("systemFieldName") {
            guard let field = queryFields[system] else {
                throw JSONDecodingError(
                    .invalid,
                    "unknown system field '\(system)'; expected one of " + queryFields.keys.sorted().joined(separator: ", "),
                    at: [.key("systemFieldName")])
            }
            return field
        }
        let fieldName: String = try object.decode("fieldName")
        guard !fieldName.isEmpty else {
            throw JSONDecodingError(.invalid, "must not be empty", at: [.key("fieldName")])
        }
        return fieldName
    }
}
