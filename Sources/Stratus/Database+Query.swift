import StratusModel

extension Database {
    /// The first page of records matching `query` (CloudKit's
    /// `records(matching:inZoneWith:desiredKeys:resultsLimit:)`).
    ///
    /// - Parameters:
    ///   - query: The record type, predicate and sort order.
    ///   - zoneID: The zone searched; `nil` searches every zone of the database.
    ///   - desiredKeys: The fields fetched; `nil` fetches all.
    ///   - resultsLimit: The most records in this page; the server's maximum by default.
    /// - Returns: The matches in order, each fetched or failed on its own, and a cursor when more
    ///   follow.
    public func records(
        matching query: Query, inZoneWith zoneID: RecordZone.ID? = nil, desiredKeys: [String]? = nil,
        resultsLimit: Int? = nil
    ) async throws -> (matchResults: [(Record.ID, Result<Record, CloudError>)], queryCursor: Query.Cursor?) {
        try await page(of: query, zoneID: zoneID, marker: nil, desiredKeys: desiredKeys, resultsLimit: resultsLimit)
    }

    /// The next page of a query's matches (CloudKit's
    /// `records(continuingMatchFrom:desiredKeys:resultsLimit:)`). Records that did not change
    /// between pages are neither repeated nor skipped.
    public func records(
        continuingMatchFrom cursor: Query.Cursor, desiredKeys: [String]? = nil, resultsLimit: Int? = nil
    ) async throws -> (matchResults: [(Record.ID, Result<Record, CloudError>)], queryCursor: Query.Cursor?) {
        try await page(
            of: cursor.query, zoneID: cursor.zoneID, marker: cursor.marker, desiredKeys: desiredKeys,
            resultsLimit: resultsLimit)
    }

    private func page(
        of query: Query, zoneID: RecordZone.ID?, marker: String?, desiredKeys: [String]?, resultsLimit: Int?
    ) async throws -> (matchResults: [(Record.ID, Result<Record, CloudError>)], queryCursor: Query.Cursor?) {
        let answer = try await call(
            Endpoints.recordsQuery.erased,
            body: QueryRecordsRequest(
                zoneID: zoneID.map(wireZoneID), resultsLimit: resultsLimit, query: query.wire,
                continuationMarker: marker, desiredKeys: desiredKeys, zoneWide: zoneID == nil ? true : nil),
            idempotent: true, as: RecordsResponse.self)
        var ids: [Record.ID] = []
        var matches: [Result<Record, CloudError>] = []
        for item in answer.records {
            guard case .success(let wire) = item, let recordName = wire.recordName else {
                throw CloudError(.serverRejectedRequest, "the server answered a query with an item that is not a record")
            }
            let recordZone = wire.zoneID.map(self.zoneID) ?? zoneID ?? .default
            ids.append(Record.ID(recordName: recordName, zoneID: recordZone))
            matches.append(Result { () throws(CloudError) in try record(wire, zoneID: recordZone) })
        }
        let cursor = answer.continuationMarker.map { Query.Cursor(query: query, zoneID: zoneID, marker: $0) }
        return (Array(zip(ids, await downloadingAssets(of: matches))), cursor)
    }
}
