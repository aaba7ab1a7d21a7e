import Foundation
import Hummingbird
import StratusModel
import StratusStorage

extension DatabaseEndpoints {
    /// `records/query`.
    func queryRecords(_ request: Request, _ context: StratusRequestContext, _ access: DatabaseAccess) async throws -> Response {
        let target = access.target
        let body = try await request.decodeJSON(QueryRecordsRequest.self, limit: limits.maxSmallRequestBodyBytes)
        let zones: [String]?
        let locator: DatabaseLocator
        // The wire ID of each zone a page holds records of.
        let wireZoneID: (String) throws -> ZoneID
        // The shares whose records the caller sees (a participant of hierarchical shares); `nil`: all.
        var shares: Set<String>?
        if body.zoneID == nil, body.zoneWide == true {
            guard target.scope != .shared else {
                throw StratusError.badRequest(
                    "zoneWide queries cover the caller's own zones; in the shared database name a zone in zoneID")
            }
            zones = nil
            locator = access.locator
            wireZoneID = target.wireZoneID
        } else {
            let zone = try await access.zone(body.zoneID, field: "zoneID", limits: limits, shares: storage)
            zones = [zone.name]
            locator = zone.locator
            wireZoneID = { _ in zone.wireZoneID }
            shares = zone.participantShares.map { Set($0.keys) }
        }
        let schema = try await storage.schema(container: target.container, environment: target.environment)
        let validator = QueryValidator(schema: schema, environment: target.environment, limits: limits)
        let query = body.query
        let type = try validator.requireRecordType(of: query)
        try validator.check(query, type: type)
        let readAccess = access.readAccess(recordType: query.recordType, schema: schema)
        if readAccess == .none {
            throw StratusError(
                .accessDenied,
                "the schema does not grant READ on record type '\(query.recordType)' to "
                    + (target.userRecordName == nil ? "callers who are not signed in" : "you"))
        }
        let after = try QueryMarker.decode(body.continuationMarker, recordType: query.recordType, tokens: tokens)
        var createdBy: String?
        if case .createdBy(let user) = readAccess { createdBy = user }
        let recordQuery = RecordQuery(
            recordType: query.recordType, filters: query.filterBy, sorts: query.sortBy, fields: type.fields,
            createdBy: createdBy, shares: shares, limit: try resultsLimit(body.resultsLimit), after: after)
        let page = try await metrics.timingStorageRead("query") {
            try await storage.queryRecords(recordQuery, zones: zones, in: locator)
        }
        let desiredKeys = body.desiredKeys.map(Set.init)
        let numbersAsStrings = body.numbersAsStrings ?? false
        var zoneIDs: [String: [UInt8]] = [:]
        var writer = JSONWriter(capacity: 512 * page.items.count + 64)
        writer.beginObject()
        writer.key("records")
        writer.beginArray()
        var assetURLs: [String: @Sendable (String, String, String) -> String] = [:]
        let shareKeys = target.shareKeys
        for item in page.items {
            if zoneIDs[item.zone] == nil {
                zoneIDs[item.zone] = try wireZoneID(item.zone).jsonBytes
                assetURLs[item.zone] = downloadURLs(target, zone: item.zone, in: locator)
            }
            item.record.write(
                to: &writer, zoneIDJSON: zoneIDs[item.zone]!, desiredKeys: desiredKeys, numbersAsStrings: numbersAsStrings,
                assetURL: assetURLs[item.zone], shareKeys: shareKeys, hidesRootParent: shares != nil)
        }
        writer.endArray()
        metrics.recordsRead(page.items.count, via: "query")
        if let cursor = page.cursor {
            writer.field("continuationMarker", QueryMarker.encode(cursor, recordType: query.recordType, tokens: tokens))
        }
        writer.endObject()
        return .json(writer)
    }
}
