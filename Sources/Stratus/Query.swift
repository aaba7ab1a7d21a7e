public import StratusModel

/// A search for records of one type (CloudKit's `CKQuery`).
///
/// ```swift
/// let query = Query(
///     recordType: "Note",
///     predicate: .beginsWith("title", "Groc") && .greaterThan("modified", lastWeek),
///     sortDescriptors: [.init(key: "modified", ascending: false)])
/// let (matches, cursor) = try await database.records(matching: query, inZoneWith: zoneID)
/// ```
public struct Query: Hashable, Sendable {
    /// The record type searched.
    public var recordType: String
    /// What a record must satisfy.
    public var predicate: Predicate
    /// The order of the results, most significant first.
    public var sortDescriptors: [SortDescriptor]

    /// Creates a query; by default it matches every record of the type, in the server's order
    /// (zone, then record name).
    public init(recordType: String, predicate: Predicate = .all, sortDescriptors: [SortDescriptor] = []) {
        self.recordType = recordType
        self.predicate = predicate
        self.sortDescriptors = sortDescriptors
    }

    /// Conditions on a record's fields, all of which must hold (the filters of CloudKit Web
    /// Services; CloudKit's native API takes an `NSPredicate`). Combine them with `&&`.
    ///
    /// String comparisons are case-sensitive and compare UTF-8 bytes; the token searches fold case
    /// and diacritics. In production, each field must have the index its comparison needs
    /// (QUERYABLE, SORTABLE for ranges and sorting, SEARCHABLE for tokens).
    public struct Predicate: Hashable, Sendable, CustomStringConvertible {
        let filters: [QueryFilter]

        /// Every record (CloudKit's `NSPredicate(value: true)`).
        public static let all = Predicate(filters: [])

        /// Both predicates hold.
        public static func && (lhs: Predicate, rhs: Predicate) -> Predicate {
            Predicate(filters: lhs.filters + rhs.filters)
        }

        public var description: String {
            filters.isEmpty
                ? "TRUEPREDICATE"
                : filters.map { "\($0.fieldName) \($0.comparator.rawValue) \($0.fieldValue)" }.joined(separator: " AND ")
        }

        private static func comparing(_ key: String, _ comparator: QueryComparator, _ value: some RecordValue) -> Predicate {
            Predicate(filters: [QueryFilter(comparator: comparator, fieldName: key, fieldValue: wireValue(value))])
        }

        /// The field equals `value`.
        public static func equals(_ key: String, _ value: some RecordValue) -> Predicate { comparing(key, .equals, value) }
        /// The field differs from `value`, or is absent.
        public static func notEquals(_ key: String, _ value: some RecordValue) -> Predicate {
            comparing(key, .notEquals, value)
        }
        /// The field sorts before `value`.
        public static func lessThan(_ key: String, _ value: some RecordValue) -> Predicate {
            comparing(key, .lessThan, value)
        }
        /// The field sorts before or equals `value`.
        public static func lessThanOrEquals(_ key: String, _ value: some RecordValue) -> Predicate {
            comparing(key, .lessThanOrEquals, value)
        }
        /// The field sorts after `value`.
        public static func greaterThan(_ key: String, _ value: some RecordValue) -> Predicate {
            comparing(key, .greaterThan, value)
        }
        /// The field sorts after or equals `value`.
        public static func greaterThanOrEquals(_ key: String, _ value: some RecordValue) -> Predicate {
            comparing(key, .greaterThanOrEquals, value)
        }
        /// The field equals one of `values`.
        public static func `in`<Element: RecordListElement>(_ key: String, _ values: [Element]) -> Predicate {
            comparing(key, .in, values)
        }
        /// The field equals none of `values`.
        public static func notIn<Element: RecordListElement>(_ key: String, _ values: [Element]) -> Predicate {
            comparing(key, .notIn, values)
        }
        /// A `STRING` field starts with `prefix` (case-sensitive).
        public static func beginsWith(_ key: String, _ prefix: String) -> Predicate { comparing(key, .beginsWith, prefix) }
        /// A `STRING` field does not start with `prefix`.
        public static func notBeginsWith(_ key: String, _ prefix: String) -> Predicate {
            comparing(key, .notBeginsWith, prefix)
        }
        /// A list field has `value` as an element.
        public static func listContains(_ key: String, _ value: some RecordListElement) -> Predicate {
            comparing(key, .listContains, value)
        }
        /// A list field does not have `value` as an element.
        public static func notListContains(_ key: String, _ value: some RecordListElement) -> Predicate {
            comparing(key, .notListContains, value)
        }
        /// A list field has at least one of `values`.
        public static func listContainsAny<Element: RecordListElement>(_ key: String, _ values: [Element]) -> Predicate {
            comparing(key, .listContainsAny, values)
        }
        /// A list field has none of `values`.
        public static func notListContainsAny<Element: RecordListElement>(_ key: String, _ values: [Element]) -> Predicate {
            comparing(key, .notListContainsAny, values)
        }
        /// A list field has every one of `values`.
        public static func listContainsAll<Element: RecordListElement>(_ key: String, _ values: [Element]) -> Predicate {
            comparing(key, .listContainsAll, values)
        }
        /// A list field lacks at least one of `values`.
        public static func notListContainsAll<Element: RecordListElement>(_ key: String, _ values: [Element]) -> Predicate {
            comparing(key, .notListContainsAll, values)
        }
        /// An element of a `STRING_LIST` field starts with `prefix`.
        public static func listMemberBeginsWith(_ key: String, _ prefix: String) -> Predicate {
            comparing(key, .listMemberBeginsWith, prefix)
        }
        /// No element of a `STRING_LIST` field starts with `prefix`.
        public static func notListMemberBeginsWith(_ key: String, _ prefix: String) -> Predicate {
            comparing(key, .notListMemberBeginsWith, prefix)
        }
        /// The text of field `key` (or, when `key` is `nil`, of every SEARCHABLE string field) holds
        /// every word of `text`, ignoring case and diacritics (CloudKit's `self CONTAINS`).
        public static func containsAllTokens(_ text: String, in key: String? = nil) -> Predicate {
            comparing(key ?? QueryFilter.allSearchableFields, .containsAllTokens, text)
        }
        /// The text of field `key` (or of every SEARCHABLE string field) holds at least one word of `text`.
        public static func containsAnyTokens(_ text: String, in key: String? = nil) -> Predicate {
            comparing(key ?? QueryFilter.allSearchableFields, .containsAnyTokens, text)
        }
        /// A `LOCATION` field lies within `radius` meters of `location`.
        public static func near(_ key: String, _ location: Location, radius: Double) -> Predicate {
            Predicate(
                filters: [
                    QueryFilter(comparator: .near, fieldName: key, fieldValue: .location(location), distance: radius)
                ])
        }

        /// The wire form of a predicate value. References keep their record name only: a query
        /// matches them within the zones it searches.
        private static func wireValue(_ value: some RecordValue) -> FieldValue {
            value.recordFieldValue.wireValue { StratusModel.Reference(recordName: $0.recordID.recordName) }
        }
    }

    /// An order of the results (CloudKit's `NSSortDescriptor` on a field).
    public struct SortDescriptor: Hashable, Sendable {
        let wire: QuerySort

        /// Sorts by field `key`, smallest first unless `ascending` is false.
        public init(key: String, ascending: Bool = true) {
            wire = QuerySort(fieldName: key, ascending: ascending)
        }

        /// Sorts by the distance of `LOCATION` field `key` from `location`, nearest first unless
        /// `ascending` is false.
        public static func distance(_ key: String, from location: Location, ascending: Bool = true) -> SortDescriptor {
            SortDescriptor(wire: QuerySort(fieldName: key, ascending: ascending, relativeLocation: location))
        }

        private init(wire: QuerySort) { self.wire = wire }
    }

    /// Where a query's results continue (CloudKit's `CKQueryOperation.Cursor`): pass it to
    /// ``Database/records(continuingMatchFrom:desiredKeys:resultsLimit:)`` for the next page.
    public struct Cursor: Hashable, Sendable {
        let query: Query
        let zoneID: RecordZone.ID?
        let marker: String
    }

    var wire: StratusModel.Query {
        StratusModel.Query(recordType: recordType, filterBy: predicate.filters, sortBy: sortDescriptors.map(\.wire))
    }
}
