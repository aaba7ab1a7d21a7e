public import StratusModel

/// A validated `records/query` as storage runs it.
public struct RecordQuery: Hashable, Sendable {
    /// The record type queried.
    public var recordType: String
    /// Every filter must match.
    public var filters: [QueryFilter]
    /// The order; records lacking a sort field are not in the result.
    public var sorts: [QuerySort]
    /// The type's fields as the schema defines them; only fields with index options have entries
    /// that a query can read instead of scanning the type's records.
    public var fields: [String: FieldSchema]
    /// Only records this user created, when set (a public type readable by its creators only).
    public var createdBy: String?
    /// Only records of these shares, when set (a participant of some hierarchies of a zone): the
    /// others are left out before the page and its continuation marker are made, so that neither
    /// tells of them.
    public var shares: Set<String>?
    /// At most this many records.
    public var limit: Int
    /// Where the previous page ended.
    public var after: QueryCursor?

    /// Creates a query.
    public init(
        recordType: String, filters: [QueryFilter] = [], sorts: [QuerySort] = [], fields: [String: FieldSchema] = [:],
        createdBy: String? = nil, shares: Set<String>? = nil, limit: Int, after: QueryCursor? = nil
    ) {
        self.createdBy = createdBy
        self.shares = shares
        self.recordType = recordType
        self.filters = filters
        self.sorts = sorts
        self.fields = fields
        self.limit = limit
        self.after = after
    }
}

extension RecordQuery {
    /// Whether a record may be in the result: of the query's type (the index and the record are
    /// read apart, and a name may be taken by a record of another type in between), and one the
    /// caller may see: created by the query's creator and in one of its shares, where it names them.
    func shows(_ record: StoredRecord) -> Bool {
        guard record.recordType == recordType else { return false }
        if let createdBy, record.created.userRecordName != createdBy { return false }
        if let shares, !(record.shareName.map(shares.contains) ?? false) { return false }
        return true
    }

    /// Whether a record belongs in the result: the caller may see it (``shows(_:)``) and it matches
    /// every filter. Without filters the record is not decoded.
    func admit(_ record: StoredRecord) -> Bool {
        guard shows(record) else { return false }
        guard !filters.isEmpty else { return true }
        guard let fields = try? record.queryFields() else { return false }
        return matches(fields)
    }

    /// Whether fields match every filter. A search of `___all` reads the SEARCHABLE fields, the
    /// ones whose tokens the index holds, so a query finds the same records whichever plan runs it,
    /// and a subscription with the same filters fires for the records it finds.
    public func matches(_ fields: [String: FieldValue]) -> Bool {
        filters.allSatisfy { filter in
            guard filter.fieldName == QueryFilter.allSearchableFields else { return filter.matches(fields) }
            return filter.matches(fields.filter { self.fields[$0.key]?.indexes.contains(.searchable) == true })
        }
    }
}

/// The position after the last record of a page: its sort keys, zone, creation time and name.
public struct QueryCursor: Hashable, Sendable {
    /// The record's keys in the query's order.
    public var keys: [QueryScalar]
    /// The record's zone.
    public var zone: String
    /// When the record was created (milliseconds); `nil` in a cursor that predates creation times
    /// in cursors, which then resumes at the first record of its keys in its zone, in the query's
    /// direction (it may repeat a record, never skip one).
    public var created: Int64?
    /// The record's name.
    public var name: String

    /// Creates a cursor.
    public init(keys: [QueryScalar], zone: String, created: Int64?, name: String) {
        self.keys = keys
        self.zone = zone
        self.created = created
        self.name = name
    }
}

/// One page of query results.
public struct QueryPage: Hashable, Sendable {
    /// A record and the zone it is in.
    public struct Item: Hashable, Sendable {
        /// The zone's name.
        public var zone: String
        /// The record.
        public var record: StoredRecord
    }

    /// The records, in the query's order.
    public var items: [Item]
    /// Where the next page starts; `nil` when this is the last page.
    public var cursor: QueryCursor?

    /// Creates a page.
    public init(items: [Item], cursor: QueryCursor?) {
        self.items = items
        self.cursor = cursor
    }
}

/// A range of index values; a missing bound is open.
public struct ScalarRange: Sendable {
    /// The lowest value and whether it is included.
    public var lower: (value: QueryScalar, inclusive: Bool)?
    /// The highest value and whether it is included.
    public var upper: (value: QueryScalar, inclusive: Bool)?

    /// The range of every value.
    public static let all = ScalarRange()

    /// Creates a range.
    public init(lower: (value: QueryScalar, inclusive: Bool)? = nil, upper: (value: QueryScalar, inclusive: Bool)? = nil) {
        self.lower = lower
        self.upper = upper
    }

    /// The range that a filter confines its field to, for the comparators an ordered index serves:
    /// `EQUALS`, the four range comparators and `BEGINS_WITH`; `nil` for the others.
    static func of(_ filter: QueryFilter) -> ScalarRange? {
        guard let value = filter.fieldValue.queryScalars.first, !filter.fieldValue.type.isList else { return nil }
        switch filter.comparator {
        case .equals: return ScalarRange(lower: (value, true), upper: (value, true))
        case .lessThan: return ScalarRange(upper: (value, false))
        case .lessThanOrEquals: return ScalarRange(upper: (value, true))
        case .greaterThan: return ScalarRange(lower: (value, false))
        case .greaterThanOrEquals: return ScalarRange(lower: (value, true))
        case .beginsWith:
            guard case .text(let prefix) = value else { return nil }
            // Every string that starts with `prefix` sorts below prefix + U+10FFFF, the largest code point.
            return ScalarRange(lower: (value, true), upper: (.text(prefix + "\u{10FFFF}"), false))
        default: return nil
        }
    }

    /// The intersection of two ranges.
    func intersection(_ other: ScalarRange) -> ScalarRange {
        var result = self
        if let bound = other.lower,
            result.lower.map({ bound.value > $0.value || (bound.value == $0.value && !bound.inclusive) }) ?? true
        {
            result.lower = bound
        }
        if let bound = other.upper,
            result.upper.map({ bound.value < $0.value || (bound.value == $0.value && !bound.inclusive) }) ?? true
        {
            result.upper = bound
        }
        return result
    }
}

/// Where a query's candidate records come from when it does not read an index in order.
public enum CandidateSource: Sendable {
    /// Records whose field has one of these values (or list elements).
    case values(field: String, [QueryScalar])
    /// Records whose field has a value in the range.
    case range(field: String, ScalarRange)
    /// Records with any of these tokens in one of these SEARCHABLE fields.
    case tokens(fields: [String], [String])
    /// Records with a location in the field inside the latitude range.
    case latitudes(field: String, ScalarRange)
    /// Every record of the type.
    case allOfType
}
