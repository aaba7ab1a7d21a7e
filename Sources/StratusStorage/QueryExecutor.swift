public import StratusModel

/// What a backend provides for queries; ``QueryExecutor`` does the rest, so every backend answers
/// a query the same way. Zones are named; the reader was made for the zones the query covers.
///
/// The methods are asynchronous because PostgreSQL's driver is; each step is one read, and steps
/// of one query may see different committed states. The executor copes: every record it returns
/// is checked against the filters as read, and paging goes by the last key returned.
public protocol QueryIndexReader: Sendable {
    /// The zones the query covers.
    var zones: [String] { get }
    /// The value entries of `field` in `zone` within `range`, ordered by (value, record's creation
    /// time, record name) ascending or descending, strictly after `after` in that order, at most
    /// `limit` of them.
    func scanValues(
        zone: String, field: String, range: ScalarRange, descending: Bool, after: IndexPosition?, limit: Int
    ) async throws -> [IndexPosition]
    /// The names of the records the source selects, in every covered zone, each once.
    func candidates(_ source: CandidateSource) async throws -> [(zone: String, name: String)]
    /// The live records of `zone` with these names, in any order.
    func records(zone: String, names: [String]) async throws -> [StoredRecord]
}

/// Where a record stands in a field's index: the field's value, then the record's creation time
/// and name, which order records of equal values (the order the index keeps them in, so that a
/// new record's entries go after the others of its value).
public struct IndexPosition: Sendable, Equatable {
    /// The field's value.
    public var value: QueryScalar
    /// When the record was created (milliseconds).
    public var created: Int64
    /// The record's name.
    public var name: String

    /// A position.
    public init(value: QueryScalar, created: Int64, name: String) {
        self.value = value
        self.created = created
        self.name = name
    }
}

/// Runs queries over a ``QueryIndexReader``.
///
/// Two plans:
/// - **ordered scan**, when the result's order is one indexed scalar field: the query sorts by that
///   one field, or has no sort and a filter (`EQUALS`, a range, `BEGINS_WITH`) on it. Index entries
///   are read in order from the cursor, the records fetched in batches and checked against every
///   filter, until the page is full. Its cost follows the entries read, not the zone's size.
/// - **candidates**, otherwise: the most selective indexed filter picks candidate records (or, with
///   none, every record of the type); they are checked, sorted and cut after the cursor.
///
/// Ties are broken by zone, then creation time, then record name (the order index entries are kept
/// in), so paging never repeats or skips a record that did not change in between.
public enum QueryExecutor {
    /// Runs a query.
    ///
    /// A zone-wide query whose zones may become more or fewer between its pages (`zoneWide`; not in
    /// the public database, whose one zone is its default) always takes the candidates plan: a
    /// marker of one plan means nothing to the other.
    public static func run(_ query: RecordQuery, zoneWide: Bool, reader: some QueryIndexReader) async throws -> QueryPage {
        if !zoneWide, reader.zones.count == 1, let plan = orderedScan(query) {
            return try await scan(query, plan, zone: reader.zones[0], reader: reader)
        }
        return try await collect(query, reader: reader)
    }

    private struct ScanPlan {
        var field: String
        var range: ScalarRange
        var descending: Bool
    }

    private static func isIndexed(_ field: String, _ query: RecordQuery) -> Bool {
        guard let schema = query.fields[field] else { return false }
        return !schema.indexes.isDisjoint(with: [.queryable, .sortable]) && !schema.type.isList
            && schema.type != .location
    }

    private static func orderedScan(_ query: RecordQuery) -> ScanPlan? {
        let field: String
        let descending: Bool
        if query.sorts.count == 1, query.sorts[0].relativeLocation == nil, isIndexed(query.sorts[0].fieldName, query) {
            field = query.sorts[0].fieldName
            descending = !query.sorts[0].ascending
        } else if query.sorts.isEmpty,
            let filter = query.filters.first(where: { ScalarRange.of($0) != nil && isIndexed($0.fieldName, query) })
        {
            field = filter.fieldName
            descending = false
        } else {
            return nil
        }
        let range = query.filters.filter { $0.fieldName == field }.compactMap(ScalarRange.of)
            .reduce(ScalarRange.all) { $0.intersection($1) }
        return ScanPlan(field: field, range: range, descending: descending)
    }

    private static func scan(
        _ query: RecordQuery, _ plan: ScanPlan, zone: String, reader: some QueryIndexReader
    ) async throws -> QueryPage {
        var after = query.after.flatMap { cursor in
            cursor.keys.first.map { value in
                // A cursor without a creation time resumes at its value and name's first entry in the
                // scan's direction: it may repeat an entry, never skip one.
                let created = cursor.created ?? (plan.descending ? .max : .min)
                return IndexPosition(value: value, created: created, name: cursor.name)
            }
        }
        var items: [QueryPage.Item] = []
        // Where each item stands in the index, as read there: the page ends at the last one's entry.
        var positions: [IndexPosition] = []
        var seen = Set<String>()
        let batchSize = min(max(query.limit + 1, 32), 1000)
        while items.count <= query.limit {
            let entries = try await reader.scanValues(
                zone: zone, field: plan.field, range: plan.range, descending: plan.descending, after: after,
                limit: batchSize)
            guard let last = entries.last else { break }
            after = last
            let records = try await reader.records(zone: zone, names: entries.map(\.name))
            let byName = Dictionary(records.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
            for entry in entries where items.count <= query.limit && seen.insert(entry.name).inserted {
                // Every filter, the driving field's too: the record is read apart from its entry,
                // and may have changed in between.
                guard let record = byName[entry.name], query.admit(record) else { continue }
                items.append(QueryPage.Item(zone: zone, record: record))
                positions.append(entry)
            }
            if entries.count < batchSize { break }
        }
        guard items.count > query.limit else { return QueryPage(items: items, cursor: nil) }
        items.removeLast()
        let last = positions[items.count - 1]
        return QueryPage(
            items: items, cursor: QueryCursor(keys: [last.value], zone: zone, created: last.created, name: last.name))
    }

    /// The most selective source of candidates the filters allow.
    private static func source(_ query: RecordQuery) -> CandidateSource {
        func indexed(_ filter: QueryFilter, _ option: FieldIndexes) -> Bool {
            query.fields[filter.fieldName]?.indexes.isDisjoint(with: option) == false
        }
        let valueIndex: FieldIndexes = [.queryable, .sortable]
        var best: (rank: Int, source: CandidateSource)?
        func consider(_ rank: Int, _ source: CandidateSource) {
            if best.map({ rank < $0.rank }) ?? true { best = (rank, source) }
        }
        for filter in query.filters {
            let field = filter.fieldName
            let scalars = filter.fieldValue.queryScalars
            let valueIndexed = indexed(filter, valueIndex)
            switch filter.comparator {
            case .equals, .listContains:
                if valueIndexed { consider(0, .values(field: field, scalars)) }
            case .in, .listContainsAny:
                if valueIndexed { consider(1, .values(field: field, scalars)) }
            case .listContainsAll:
                // Every list holds all of no values: an empty list selects nothing in the index.
                if valueIndexed, let first = scalars.first { consider(1, .values(field: field, [first])) }
            case .beginsWith, .lessThan, .lessThanOrEquals, .greaterThan, .greaterThanOrEquals:
                if valueIndexed, let range = ScalarRange.of(filter) { consider(2, .range(field: field, range)) }
            case .listMemberBeginsWith:
                if valueIndexed, case .text(let prefix) = scalars.first {
                    consider(2, .range(field: field, ScalarRange(lower: (.text(prefix), true),
                                                                  upper: (.text(prefix + "\u{10FFFF}"), false))))
                }
            case .containsAllTokens, .containsAnyTokens:
                let fields = field == QueryFilter.allSearchableFields
                    ? query.fields.filter { $0.value.indexes.contains(.searchable) }.keys.sorted()
                    : (query.fields[field]?.indexes.contains(.searchable) == true ? [field] : [])
                guard !fields.isEmpty, case .string(let text) = filter.fieldValue else { break }
                let tokens = TextTokenizer.tokens(text)
                consider(3, .tokens(fields: fields, filter.comparator == .containsAllTokens ? Array(tokens.prefix(1)) : tokens))
            case .near:
                guard valueIndexed, case .location(let center) = filter.fieldValue, let distance = filter.distance else {
                    break
                }
                // One degree of latitude is at least 110.5 km everywhere.
                let degrees = distance / 110_500
                consider(4, .latitudes(field: field, ScalarRange(lower: (.real(center.latitude - degrees), true),
                                                                 upper: (.real(center.latitude + degrees), true))))
            default:
                break
            }
        }
        return best?.source ?? .allOfType
    }

    private static func collect(_ query: RecordQuery, reader: some QueryIndexReader) async throws -> QueryPage {
        let candidates = try await reader.candidates(source(query))
        var rows: [(keys: [QueryScalar], item: QueryPage.Item)] = []
        for (zone, names) in Dictionary(grouping: candidates, by: \.zone).sorted(by: { $0.key < $1.key }) {
            let names = names.map(\.name)
            for start in stride(from: 0, to: names.count, by: 500) {
                for record in try await reader.records(
                    zone: zone, names: Array(names[start..<min(start + 500, names.count)]))
                {
                    guard query.shows(record), let fields = try? record.queryFields(), query.matches(fields) else { continue }
                    let keys = query.sorts.compactMap { $0.sortKey(fields) }
                    guard keys.count == query.sorts.count else { continue }
                    rows.append((keys, QueryPage.Item(zone: zone, record: record)))
                }
            }
        }
        let ascending = query.sorts.map(\.ascending)
        func position(_ row: (keys: [QueryScalar], item: QueryPage.Item)) -> QueryCursor {
            QueryCursor(
                keys: row.keys, zone: row.item.zone, created: row.item.record.created.timestamp,
                name: row.item.record.name)
        }
        func precedes(_ a: QueryCursor, _ b: QueryCursor) -> Bool {
            for (index, (x, y)) in zip(a.keys, b.keys).enumerated() where x != y {
                return ascending[index] ? x < y : y < x
            }
            if a.zone != b.zone { return a.zone.utf8.lexicographicallyPrecedes(b.zone.utf8) }
            if a.created != b.created { return (a.created ?? .min) < (b.created ?? .min) }
            return a.name.utf8.lexicographicallyPrecedes(b.name.utf8)
        }
        rows.sort { precedes(position($0), position($1)) }
        if let after = query.after, after.keys.count == query.sorts.count {
            rows.removeAll { !precedes(after, position($0)) }
        }
        guard rows.count > query.limit else { return QueryPage(items: rows.map(\.item), cursor: nil) }
        let page = rows.prefix(query.limit)
        return QueryPage(items: page.map(\.item), cursor: position(page[page.count - 1]))
    }
}
