public import StratusModel

/// One entry of the query index: a record's indexed field value, search token or location.
///
/// Backends keep these rows beside the records, rewritten with every write of the record, so that a
/// query reads an ordered range of entries instead of the zone's records.
public struct IndexEntry: Hashable, Sendable {
    /// What an entry holds.
    public enum Kind: Int, Sendable {
        /// A field value (one per element for a list), for equality, range, prefix and sorting.
        case value = 0
        /// A search token of a SEARCHABLE string field.
        case token = 1
        /// A location: `value` is the latitude, `longitude` the longitude.
        case location = 2
    }

    /// The field's name.
    public var field: String
    /// What the entry holds.
    public var kind: Kind
    /// The indexed scalar.
    public var value: QueryScalar
    /// The longitude of a ``Kind/location`` entry.
    public var longitude: Double?

    /// Creates an entry.
    public init(field: String, kind: Kind, value: QueryScalar, longitude: Double? = nil) {
        self.field = field
        self.kind = kind
        self.value = value
        self.longitude = longitude
    }

    /// Whether this entry comes before `other` in the index's key order among one record's entries:
    /// by field, kind, then value (field names are ASCII, so `String`'s order is their bytes' order).
    /// Written in this order, a record's index rows go into neighbouring places of the index's B-tree.
    public func precedes(_ other: IndexEntry) -> Bool {
        if field != other.field { return field < other.field }
        if kind != other.kind { return kind.rawValue < other.kind.rawValue }
        return value < other.value
    }

    /// The entries of a record under the schema's index options for its type; none for `nil`, a
    /// tombstone or a type the schema does not know.
    public static func entries(of record: StoredRecord?, schema: Schema) -> [IndexEntry] {
        var tokens = SearchTokens()
        return entries(of: record, schema: schema, tokens: &tokens)
    }

    /// ``entries(of:schema:)``, with the search tokens of strings kept in `tokens` for the next
    /// records: a writer indexing several records (a batch, a record and its previous version)
    /// tokenizes each distinct string once.
    public static func entries(of record: StoredRecord?, schema: Schema, tokens: inout SearchTokens) -> [IndexEntry] {
        guard let record, let type = schema.recordTypes[record.recordType] else { return [] }
        return entries(of: record, indexes: type.fields, tokens: &tokens)
    }

    /// The entries of a record under the index options of its type's fields. Fields without
    /// QUERYABLE, SORTABLE or SEARCHABLE get none, and a tombstone has none.
    public static func entries(
        of record: StoredRecord, indexes: [String: FieldSchema], tokens searchTokens: inout SearchTokens
    ) -> [IndexEntry] {
        guard !record.deleted, indexes.values.contains(where: { !$0.indexes.isEmpty }),
            let fields = try? record.decodeFields()
        else { return [] }
        var entries: [IndexEntry] = []
        // The indexed fields' values, looked up (the query's view of the record, ``StoredRecord/queryFields()``,
        // would copy every field to add the system fields, and a deployed schema indexes a few).
        for (name, schema) in indexes where !schema.indexes.isEmpty {
            guard let value = record.systemQueryField(name) ?? fields[name] else { continue }
            let options = schema.indexes
            if !options.isDisjoint(with: [.queryable, .sortable]) {
                let locations: [Location] = switch value {
                case .location(let location): [location]
                case .list(.location, let values): values.compactMap { if case .location(let l) = $0 { l } else { nil } }
                default: []
                }
                for location in locations {
                    entries.append(
                        IndexEntry(field: name, kind: .location, value: .real(location.latitude),
                                   longitude: location.longitude))
                }
                // A list may repeat an element; a scalar has one value, which needs no set.
                let scalars = value.queryScalars
                for scalar in scalars.count > 1 ? Array(Set(scalars)) : scalars {
                    entries.append(IndexEntry(field: name, kind: .value, value: scalar))
                }
            }
            if options.contains(.searchable) {
                let tokens: [String]
                switch value {
                case .string(let text): tokens = searchTokens.of(text)
                case .list(.string, _):
                    var unique = Set<String>()
                    for case .text(let text) in value.queryScalars { unique.formUnion(searchTokens.of(text)) }
                    tokens = Array(unique)
                default: tokens = []
                }
                for token in tokens {
                    entries.append(IndexEntry(field: name, kind: .token, value: .text(token)))
                }
            }
        }
        return entries
    }
}

/// The search tokens of strings (`TextTokenizer`), each string tokenized once for as long as the
/// value lives: one write request's worth.
public struct SearchTokens: Sendable {
    private var tokensByText: [String: [String]] = [:]

    /// An empty cache.
    public init() {}

    /// The search tokens of `text`.
    public mutating func of(_ text: String) -> [String] {
        if let tokens = tokensByText[text] { return tokens }
        let tokens = TextTokenizer.tokens(text)
        tokensByText[text] = tokens
        return tokens
    }
}

/// The query index entries a schema change adds to existing records: the fields of one record type
/// whose index options grew. A backend deletes those fields' entries in every zone of the
/// environment and inserts ``entries(of:)`` for each live record of the type, in the transaction
/// that stores the new schema.
public struct IndexBackfill: Hashable, Sendable {
    /// The record type whose records need entries.
    public var recordType: String
    /// Its fields whose index options grew.
    public var fields: Set<String>
    /// The schema in force from now on.
    public var schema: Schema

    /// The backfills from `old` to `new`, one per record type, in name order.
    public static func needed(from old: Schema, to new: Schema) -> [IndexBackfill] {
        new.recordTypes.keys.sorted().compactMap { typeName in
            let fields = Set(
                new.recordTypes[typeName]!.fields.filter { name, field in
                    !field.indexes.isEmpty
                        && !field.indexes.isSubset(of: old.recordTypes[typeName]?.fields[name]?.indexes ?? [])
                }.keys)
            return fields.isEmpty ? nil : IndexBackfill(recordType: typeName, fields: fields, schema: new)
        }
    }

    /// The entries of a record of ``recordType`` for the grown fields.
    public func entries(of record: StoredRecord) -> [IndexEntry] {
        IndexEntry.entries(of: record, schema: schema).filter { fields.contains($0.field) }
    }
}
