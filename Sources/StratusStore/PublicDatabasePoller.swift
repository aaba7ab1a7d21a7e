import Foundation
import GRDB
import Stratus

/// Reads what changed in the public database, which has no change feed: record type by record
/// type, by modification time, from the position the last poll reached (kept in the mirror's
/// table, in the transaction that applies each page).
struct PublicDatabasePoller: Sendable {
    let database: Stratus.Database

    /// How far before the last modification a poll saw the next poll starts: a save stamped earlier
    /// but committed after that poll read is still found (records already held are skipped by
    /// their change tag).
    static let overlap: TimeInterval = 60

    /// The mirror keys of the poll positions, one per record type; a purge removes them, so that
    /// the next poll reads every row again.
    static let positionPrefix = "poll_position."

    /// Reads the records of `recordType` changed since the position kept in `pool`, a page at a
    /// time, handing each page to `apply` with a write that keeps the position it reached (to run
    /// in the transaction that applies the page).
    func poll(
        _ recordType: String, in pool: DatabasePool, isolation: isolated (any Actor)? = #isolation,
        apply: ([Stratus.Record], _ keepPosition: @escaping @Sendable (GRDB.Database) throws -> Void) async throws -> Void
    ) async throws {
        let positionKey = Self.positionPrefix + recordType
        let position = try await pool.read { db in try StoreMetadata.value(positionKey, in: db).flatMap(Double.fromDatabaseValue) }
        let since = position.map { Date(timeIntervalSince1970: $0 - Self.overlap) }
        let query = Query(
            recordType: recordType, predicate: since.map { .greaterThanOrEquals("___modTime", $0) } ?? .all,
            sortDescriptors: [Query.SortDescriptor(key: "___modTime")])
        var page: (matchResults: [(Stratus.Record.ID, Result<Stratus.Record, CloudError>)], queryCursor: Query.Cursor?)
        do {
            page = try await database.records(matching: query, inZoneWith: RecordZone.ID())
        } catch let error as CloudError where error.code == .unknownItem {
            // No record of this type was ever saved: the schema does not know it yet.
            return
        }
        while true {
            let records = page.matchResults.compactMap { try? $0.1.get() }
            if let reached = records.compactMap(\.modificationDate).max() {
                let seconds = max(position ?? 0, reached.timeIntervalSince1970)
                try await apply(records) { db in try StoreMetadata.setValue(seconds, for: positionKey, in: db) }
            }
            guard let cursor = page.queryCursor else { return }
            page = try await database.records(continuingMatchFrom: cursor)
        }
    }
}
