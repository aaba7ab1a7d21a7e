import CoreMetrics
import Foundation
import Hummingbird
import StratusModel
import StratusStorage

/// The CloudKit Web Services endpoints under `/database/1/{container}/{environment}/{database}/`.
struct DatabaseEndpoints: Sendable {
    let storage: any RecordStorage & ShareStorage & SchemaStorage & AccountStorage
    let authenticator: Authenticator
    let configuration: ServerConfiguration
    let tokens: SyncTokenCodec
    let assets: AssetStore?
    /// Every write of records and zones, which publishes what it commits.
    let changeWriter: ChangeWriter
    /// The quotas writes and uploads are held to.
    let quotas: QuotaKeeper
    /// Pages of change feeds read before they are asked for.
    let prefetch: FeedPagePrefetch

    var limits: Limits { configuration.limits }
    var metrics: ServerMetrics { configuration.metrics }

    func addRoutes(to router: Router<StratusRequestContext>) {
        router.on(Endpoints.zonesList, authorizedBy: authenticator) { request, context, access in try await listZones(request, context, access) }
        router.on(Endpoints.zonesLookup, authorizedBy: authenticator) { request, context, access in try await lookupZones(request, context, access) }
        router.on(Endpoints.zonesModify, authorizedBy: authenticator) { request, context, access in try await modifyZones(request, context, access) }
        router.on(Endpoints.zonesChanges, authorizedBy: authenticator) { request, context, access in try await databaseChanges(request, context, access) }
        router.on(Endpoints.recordsModify, authorizedBy: authenticator) { request, context, access in try await modifyRecords(request, context, access) }
        router.on(Endpoints.recordsLookup, authorizedBy: authenticator) { request, context, access in try await lookupRecords(request, context, access) }
        router.on(Endpoints.recordsQuery, authorizedBy: authenticator) { request, context, access in try await queryRecords(request, context, access) }
        router.on(Endpoints.recordsChanges, authorizedBy: authenticator) { request, context, access in try await recordChanges(request, context, access) }
        router.on(Endpoints.recordsDigest, authorizedBy: authenticator) { request, context, access in try await recordsDigest(request, context, access) }
        router.on(Endpoints.changesZone, authorizedBy: authenticator) { request, context, access in try await zoneChanges(request, context, access) }
        router.on(Endpoints.changesDatabase, authorizedBy: authenticator) { request, context, access in try await databaseChanges(request, context, access) }
        router.on(Endpoints.usersCaller, authorizedBy: authenticator) { request, context, access in try await caller(request, context, access) }
        router.on(Endpoints.usersCurrent, authorizedBy: authenticator) { request, context, access in try await currentUser(request, context, access) }
        addAssetRoutes(to: router)
    }


    /// A response `{"<key>": [ … ]}` whose items `writeItems` appends.
    func listResponse(
        _ key: String, capacity: Int = 256, _ writeItems: (inout JSONWriter) async throws -> Void
    ) async rethrows -> Response {
        var writer = JSONWriter(capacity: capacity)
        writer.beginObject()
        writer.key(key)
        writer.beginArray()
        try await writeItems(&writer)
        writer.endArray()
        writer.endObject()
        return .json(writer)
    }

    /// The `downloadURL`s of assets in `zone`: signed, expiring URLs that work as returned (Apple's
    /// way) when this server stores assets.
    func downloadURLs(
        _ target: DatabaseRequest, zone: String, in database: DatabaseLocator
    ) -> @Sendable (_ recordName: String, _ field: String, _ checksum: String) -> String {
        assets?.downloadURLs(baseURL: target.baseURL, database: database, zone: zone)
            ?? target.assetURL(zone: zone)
    }

    func checkCount(_ count: Int, field: String, limit: Int) throws {
        guard count > 0 else { throw StratusError.badRequest("\(field) must not be empty") }
        guard count <= limit else {
            throw StratusError.badRequest("\(field) has \(count) items; the limit is \(limit) per request")
        }
    }

    func resultsLimit(_ requested: Int?, field: String = "resultsLimit") throws -> Int {
        guard let requested else { return limits.maxRecordsPerResponse }
        guard requested > 0 else { throw StratusError.badRequest("\(field) must be at least 1") }
        return min(requested, limits.maxRecordsPerResponse)
    }

    // MARK: Zones

    private func zoneDictionary(_ zone: ZoneState, zoneID: ZoneID) -> ZoneDictionary {
        let isDefault = zone.name == ZoneID.defaultZoneName
        return ZoneDictionary(
            zoneID: zoneID,
            syncToken: isDefault || zone.deleted ? nil : tokens.token(for: zone.currentPosition, kind: .zone),
            atomic: zone.deleted ? nil : !isDefault,
            deleted: zone.deleted ? true : nil)
    }

    func listZones(_ request: Request, _ context: StratusRequestContext, _ access: DatabaseAccess) async throws -> Response {
        let target = access.target
        let zones: [ZoneDictionary]
        if target.scope == .shared {
            zones = try await storage.sharedZones(
                user: try access.requireUser(), container: target.container, environment: target.environment
            ).map { zoneDictionary($0.zone, zoneID: ZoneID(zoneName: $0.zone.name, ownerRecordName: $0.owner)) }
        } else {
            zones = try await storage.zones(in: access.locator).map {
                zoneDictionary($0, zoneID: try target.wireZoneID($0.name))
            }
        }
        var writer = JSONWriter()
        writer.beginObject()
        writer.field("zones", array: zones)
        writer.endObject()
        return .json(writer)
    }

    func lookupZones(_ request: Request, _ context: StratusRequestContext, _ access: DatabaseAccess) async throws -> Response {
        let target = access.target
        let body = try await request.decodeJSON(LookupZonesRequest.self, limit: limits.maxSmallRequestBodyBytes)
        try checkCount(body.zones.count, field: "zones", limit: limits.maxOperationsPerRequest)
        for (index, zoneID) in body.zones.enumerated() {
            _ = try target.zoneName(zoneID, field: "zones[\(index)]", limits: limits)
        }
        return try await listResponse("zones") { writer in
            for (index, zoneID) in body.zones.enumerated() {
                let reached: ZoneAccess?
                do {
                    reached = try await access.zone(zoneID, field: "zones[\(index)]", limits: limits, shares: storage)
                } catch let error as StratusError where error.code == .zoneNotFound {
                    reached = nil
                }
                if let reached, let zone = try await storage.zone(named: reached.name, in: reached.locator) {
                    zoneDictionary(zone, zoneID: reached.wireZoneID).write(to: &writer)
                } else {
                    ErrorDictionary(
                        serverErrorCode: .zoneNotFound, reason: "zone '\(zoneID.zoneName)' does not exist",
                        zoneID: reached?.wireZoneID ?? zoneID, uuid: RequestTrace.nextID()
                    ).write(to: &writer)
                }
            }
        }
    }

    func modifyZones(_ request: Request, _ context: StratusRequestContext, _ access: DatabaseAccess) async throws -> Response {
        let target = access.target
        let locator = access.locator
        let body = try await request.decodeJSON(ModifyZonesRequest.self, limit: limits.maxSmallRequestBodyBytes)
        try checkCount(body.operations.count, field: "operations", limit: limits.maxOperationsPerRequest)
        let names = try body.operations.enumerated().map { index, operation in
            try target.zoneName(operation.zoneID, field: "operations[\(index)].zone.zoneID", limits: limits)
        }
        return try await listResponse("zones") { writer in
            for (operation, name) in zip(body.operations, names) {
                let zoneID = try target.wireZoneID(name)
                func fail(_ code: ServerErrorCode, _ reason: String) {
                    ErrorDictionary(serverErrorCode: code, reason: reason, zoneID: zoneID, uuid: RequestTrace.nextID())
                        .write(to: &writer)
                }
                switch operation.operationType {
                case .create where name == ZoneID.defaultZoneName:
                    fail(.badRequest, "the default zone always exists and cannot be created")
                case .create:
                    let (zone, _) = try await changeWriter.createZone(
                        named: name, in: locator, timestamp: configuration.clock.milliseconds, origin: PushHub.Origin(target))
                    zoneDictionary(zone, zoneID: zoneID).write(to: &writer)
                case .delete where name == ZoneID.defaultZoneName:
                    fail(.badRequest, "the default zone cannot be deleted")
                case .delete:
                    if try await changeWriter.deleteZone(
                        named: name, in: locator, timestamp: configuration.clock.milliseconds, origin: PushHub.Origin(target))
                    {
                        ZoneDictionary(zoneID: zoneID, deleted: true).write(to: &writer)
                    } else {
                        fail(.zoneNotFound, "zone '\(name)' does not exist")
                    }
                }
            }
        }
    }

    // MARK: Records

    func modifyRecords(_ request: Request, _ context: StratusRequestContext, _ access: DatabaseAccess) async throws -> Response {
        let target = access.target
        let user = try access.requireUser()
        let body = try await ModifyRecordsRequest(
            jsonBytes: request.jsonBodyBytes(limit: limits.maxRequestBodyBytes), limits: limits)
        if target.scope == .shared, let shareName = ShareRules.leavingCandidate(body.operations) {
            let leaving = try access.leavingShare()
            let zone = try await leaving.zone(body.zoneID, field: "zoneID", limits: limits, shares: storage)
            if zone.memberships.contains(where: { $0.shareRecordName == shareName }) {
                return try await leaveShare(shareName, zone: zone, access: leaving, user: user)
            }
        }
        let zone = try await access.zone(body.zoneID, field: "zoneID", limits: limits, shares: storage)
        let zoneName = zone.name
        try checkCount(body.operations.count, field: "operations", limit: limits.maxOperationsPerRequest)
        // Fields sent without a type take the schema's type for them; the schema is read only then
        // (a field's type never changes once known, so reading it outside the write is safe).
        let schema = body.operations.contains { !$0.record.untypedFieldNames.isEmpty }
            ? try await storage.schema(container: target.container, environment: target.environment) : nil
        var writes = try RecordValidator(limits: limits).writes(for: body.operations, zoneName: zoneName, schema: schema)
        for index in writes.indices {
            try admitAssets(&writes[index], field: "operations[\(index)].record.fields", container: target.container)
        }
        try await ShareRules(writer: changeWriter).prepare(&writes, operations: body.operations, zone: zone, user: user)
        let context = WriteContext(
            userRecordName: user, deviceID: target.deviceID, timestamp: configuration.clock.milliseconds,
            enforcesGrants: access.enforcesGrants, limits: limits, participantShares: zone.participantShares,
            quota: try await quotas.writeQuota(container: target.container))
        let outcome = try await metrics.timingStorageWrite {
            try await changeWriter.modifyRecords(
                writes, zone: zoneName, in: zone.locator,
                atomic: (body.atomic ?? true) && zoneName != ZoneID.defaultZoneName, context: context)
        }
        let results = outcome.results
        metrics.recordsWritten(results.count { if case .success = $0 { true } else { false } })
        quotas.noteWritten(container: target.container, changes: outcome.changes)

        let zoneID = zone.wireZoneID
        let zoneIDJSON = zoneID.jsonBytes
        let assetURL = downloadURLs(target, zone: zoneName, in: zone.locator)
        let shareKeys = target.shareKeys
        let numbersAsStrings = body.numbersAsStrings ?? false
        // Records go back only to a caller who may read them: a refused write's stored record
        // (`EXISTS`, `CONFLICT`) not at all, a saved one with its system fields alone (a public
        // type may let anyone write and only its creator read).
        var readSchema = Schema()
        if access.enforcesGrants {
            readSchema = if let schema { schema } else {
                try await storage.schema(container: target.container, environment: target.environment)
            }
        }
        let readable = results.map { result -> Bool in
            guard case .success(let record) = result else { return false }
            return access.mayRead(record, in: zone, schema: readSchema)
        }
        return await listResponse("records", capacity: 256 * results.count) { writer in
            for (index, result) in results.enumerated() {
                switch result {
                case .success(let record):
                    // No fields, no asset URLs.
                    let desiredKeys = readable[index] ? (body.operations[index].desiredKeys ?? body.desiredKeys).map(Set.init) : []
                    record.write(
                        to: &writer, zoneIDJSON: zoneIDJSON, desiredKeys: desiredKeys, numbersAsStrings: numbersAsStrings,
                        assetURL: assetURL, shareKeys: shareKeys, hidesRootParent: zone.participantShares != nil)
                case .failure(let failure):
                    metrics.itemFailed(failure.code.rawValue)
                    ErrorDictionary(
                        serverErrorCode: failure.code, reason: failure.reason, recordName: writes[index].recordName,
                        uuid: RequestTrace.nextID(),
                        serverRecord: try? failure.serverRecord.flatMap { access.mayRead($0, in: zone, schema: readSchema) ? $0 : nil }?
                            .dictionary(zoneID: zoneID, assetURL: assetURL, shareKeys: shareKeys)
                    ).write(to: &writer)
                }
            }
        }
    }

    /// A participant leaves a share by deleting it from their shared database: they become
    /// `REMOVED` in the share, in one write of the share record, and the share's records (the zone,
    /// when it was their last share in it) leave their shared database. Answers as the deletion was
    /// asked.
    private func leaveShare(
        _ shareName: String, zone: ZoneAccess, access: DatabaseAccess, user: String
    ) async throws -> Response {
        guard let record = try await storage.lookupRecords(names: [shareName], zone: zone.name, in: zone.locator)[0]
        else { throw DatabaseAccess.notShared(zone.name) }
        let target = access.target
        let share = LocatedShare(database: zone.locator, zone: zone.name, record: record)
        _ = try await ShareRules(writer: changeWriter).changeParticipant(
            of: share, user: user, deviceID: target.deviceID, timestamp: configuration.clock.milliseconds, limits: limits
        ) { state in
            guard let at = state.participants.firstIndex(where: { $0.userRecordName == user }),
                state.participants[at].status != .removed
            else { return nil }
            var changed = state
            changed.participants[at].status = .removed
            return changed
        }
        return await listResponse("records") { writer in
            RecordDictionary(recordName: shareName, deleted: true, zoneID: zone.wireZoneID)
                .write(to: &writer)
        }
    }

    func lookupRecords(_ request: Request, _ context: StratusRequestContext, _ access: DatabaseAccess) async throws -> Response {
        let target = access.target
        let body = try await request.decodeJSON(LookupRecordsRequest.self, limit: limits.maxSmallRequestBodyBytes)
        let zone = try await access.zone(body.zoneID, field: "zoneID", limits: limits, shares: storage)
        let zoneName = zone.name
        try checkCount(body.records.count, field: "records", limit: limits.maxRecordsPerResponse)
        for (index, item) in body.records.enumerated() {
            if let violation = limits.violation(ofName: item.recordName) {
                throw StratusError.badRequest("records[\(index)].recordName \(violation)")
            }
        }
        let found = try await metrics.timingStorageRead("lookup") {
            try await storage.lookupRecords(names: body.records.map(\.recordName), zone: zoneName, in: zone.locator)
        }
        let zoneIDJSON = zone.wireZoneID.jsonBytes
        let assetURL = downloadURLs(target, zone: zoneName, in: zone.locator)
        let shareKeys = target.shareKeys
        let schema = access.enforcesGrants
            ? try await storage.schema(container: target.container, environment: target.environment) : Schema()
        metrics.recordsRead(found.count { $0 != nil }, via: "lookup")
        return await listResponse("records", capacity: 512 * found.count) { writer in
            for (item, found) in zip(body.records, found) {
                let record = found.flatMap { zone.reveals($0) ? $0 : nil }
                if let record,
                    !access.readAccess(recordType: record.recordType, schema: schema)
                        .allows(creator: record.created.userRecordName)
                {
                    ErrorDictionary(
                        serverErrorCode: .accessDenied,
                        reason: "the schema does not grant you READ on record '\(item.recordName)' of type '\(record.recordType)'",
                        recordName: item.recordName, uuid: RequestTrace.nextID()
                    ).write(to: &writer)
                } else if let record {
                    record.write(
                        to: &writer, zoneIDJSON: zoneIDJSON, desiredKeys: (item.desiredKeys ?? body.desiredKeys).map(Set.init),
                        numbersAsStrings: body.numbersAsStrings ?? false, assetURL: assetURL, shareKeys: shareKeys,
                        hidesRootParent: zone.participantShares != nil)
                } else {
                    ErrorDictionary(
                        serverErrorCode: .notFound, reason: "record '\(item.recordName)' does not exist",
                        recordName: item.recordName, uuid: RequestTrace.nextID()
                    ).write(to: &writer)
                }
            }
        }
    }

    // MARK: Change feeds

    /// The most page ends a `records/changes` answer hands out (``HTTPField/Name/stratusPagesAhead``):
    /// two windows of the Swift SDK's read-ahead, so that it learns the next window's starts a
    /// window before it needs them.
    static let maxPagesAhead = 64

    /// Reads one page of a zone's changes (``ZoneChangesRead``); its JSON is written when asked.
    private func readZoneChanges(
        _ zone: RecordChangesRequest, field: String, access: DatabaseAccess
    ) async throws -> ZoneChangesRead {
        guard let requestedZoneID = zone.zoneID else { throw StratusError.badRequest("\(field).zoneID is required") }
        let target = access.target
        let zoneName = try target.zoneName(requestedZoneID, field: "\(field).zoneID", limits: limits)
        guard zoneName != ZoneID.defaultZoneName else {
            throw StratusError.badRequest(
                "\(field).zoneID: change feeds cover custom zones; the default zone has none (as in CloudKit)")
        }
        let zoneAccess = try await access.zone(requestedZoneID, field: "\(field).zoneID", limits: limits, shares: storage)
        let since = try tokens.position(from: zone.syncToken, kind: .zone, field: "\(field).syncToken")
        let limit = try resultsLimit(zone.resultsLimit, field: "\(field).resultsLimit")
        let page = try await metrics.timingStorageRead("changes") {
            try await storage.recordChanges(
                zone: zoneName, in: zoneAccess.locator, after: since, limit: limit, recordTypes: zone.recordTypes.map(Set.init))
        }
        let zoneIDJSON = zoneAccess.wireZoneID.jsonBytes
        let assetURL = downloadURLs(target, zone: zoneName, in: zoneAccess.locator)
        let shareKeys = target.shareKeys
        let desiredKeys = zone.desiredKeys.map(Set.init)
        let numbersAsStrings = zone.numbersAsStrings ?? false
        let syncToken = tokens.token(for: page.position, kind: .zone)
        let fieldBytes = page.records.reduce(0) { $0 + $1.fieldsJSON.count }
        return ZoneChangesRead(syncToken: syncToken, moreComing: page.moreComing, fieldBytes: fieldBytes) {
            // Room for the whole page (a record's other keys take a few hundred bytes), so that it
            // is not copied as it grows.
            var writer = JSONWriter(capacity: fieldBytes + page.records.count * 512 + 1024)
            writer.beginObject()
            writer.key("zoneID")
            writer.raw(zoneIDJSON)
            writer.key("records")
            writer.beginArray()
            for found in page.records {
                guard let record = zoneAccess.feedEntry(found, since: since?.sequence) else { continue }
                record.write(
                    to: &writer, zoneIDJSON: zoneIDJSON, desiredKeys: desiredKeys, numbersAsStrings: numbersAsStrings,
                    assetURL: assetURL, shareKeys: shareKeys, hidesRootParent: zoneAccess.participantShares != nil)
            }
            writer.endArray()
            writer.field("syncToken", syncToken)
            writer.field("moreComing", page.moreComing)
            writer.endObject()
            return ZoneChangesPage(
                body: writer.bytes, zoneName: zoneName, locator: zoneAccess.locator, limit: limit,
                position: page.position, syncToken: syncToken, moreComing: page.moreComing,
                recordsRead: page.records.count)
        }
    }

    /// The page `zone` asks for: handed over from the pages read ahead when one is kept under `key`
    /// and more pages follow it (``FeedPagePrefetch``), read otherwise; counted; and with a `key`,
    /// the pages after it read ahead.
    private func servedPage(
        _ zone: RecordChangesRequest, field: String, access: DatabaseAccess, readAhead key: FeedPagePrefetch.Key?
    ) async throws -> ZoneChangesPage {
        let page: ZoneChangesPage
        if let key, let prepared = await prefetch.take(key), prepared.moreComing {
            page = prepared
        } else {
            page = try await readZoneChanges(zone, field: field, access: access).write()
        }
        metrics.recordsRead(page.recordsRead, via: "changes")
        metrics.feedPageServed("zone")
        if let key, page.moreComing {
            var next = key
            next.request.syncToken = page.syncToken
            prefetch.readAhead(next, depth: FeedPagePrefetch.depth) { [self] request in
                try await readZoneChanges(request, field: field, access: access)
            }
        }
        return page
    }

    /// Where the page `zone` asks for is kept when read ahead (``FeedPagePrefetch``): for the owner
    /// of a private database reading it page by page (neither asking for page ends nor saying that
    /// it reads ahead itself); `nil` otherwise.
    private func prefetchKey(
        _ zone: RecordChangesRequest, access: DatabaseAccess, pagesAhead: Int?, request: Request
    ) -> FeedPagePrefetch.Key? {
        guard pagesAhead == nil, request.headers[.stratusReadsAhead]?.lowercased() != "true",
            access.target.scope == .private
        else { return nil }
        return FeedPagePrefetch.Key(request: zone, locator: access.locator, baseURL: access.target.baseURL)
    }

    /// The page ends a `records/changes` request asks for (``HTTPField/Name/stratusPagesAhead``), at
    /// most ``maxPagesAhead``; `nil` when it asks for none.
    private func pagesAhead(_ request: Request) throws -> Int? {
        guard let text = request.headers[.stratusPagesAhead] else { return nil }
        guard let count = Int(text.trimmingCharacters(in: .whitespaces)), count >= 1 else {
            throw StratusError.badRequest("the X-Stratus-Pages-Ahead header must be a whole number of at least 1")
        }
        return min(count, Self.maxPagesAhead)
    }

    func recordChanges(_ request: Request, _ context: StratusRequestContext, _ access: DatabaseAccess) async throws -> Response {
        let body = try await request.decodeJSON(RecordChangesRequest.self, limit: limits.maxSmallRequestBodyBytes)
        let pagesAhead = try pagesAhead(request)
        let key = prefetchKey(body, access: access, pagesAhead: pagesAhead, request: request)
        let page = try await servedPage(body, field: "the request", access: access, readAhead: key)
        var response = Response.json(bytes: page.body)
        // A Stratus extension: the head says where the next page starts, and where the pages after it
        // end when the client asked (see docs/protocol.md).
        response.headers[.stratusSyncToken] = page.syncToken
        response.headers[.stratusMoreComing] = page.moreComing ? "true" : "false"
        if let pagesAhead, page.moreComing {
            let ends = try await storage.recordChangePageEnds(
                zone: page.zoneName, in: page.locator, after: page.position, limit: page.limit,
                recordTypes: body.recordTypes.map(Set.init), count: pagesAhead)
            if !ends.isEmpty {
                response.headers[.stratusFollowingSyncTokens] = ends.map { tokens.token(for: $0, kind: .zone) }
                    .joined(separator: ",")
            }
        }
        return response
    }

    /// `records/digest` (a Stratus extension): a ``RecordSetDigest`` of the live records of a zone,
    /// read through the change feed as the caller may see it, and the sync token of that state.
    /// Writes that land while it reads move the zone past the state being digested: it reads again,
    /// and answers `TRY_AGAIN_LATER` if the zone never holds still for a whole read.
    func recordsDigest(_ request: Request, _ context: StratusRequestContext, _ access: DatabaseAccess) async throws -> Response {
        let target = access.target
        let body = try await request.decodeJSON(ZoneDigestRequest.self, limit: limits.maxSmallRequestBodyBytes)
        guard let requestedZoneID = body.zoneID else { throw StratusError.badRequest("zoneID is required") }
        let zoneName = try target.zoneName(requestedZoneID, field: "zoneID", limits: limits)
        guard zoneName != ZoneID.defaultZoneName else {
            throw StratusError.badRequest("zoneID: digests cover custom zones; the default zone has no change feed")
        }
        let zoneAccess = try await access.zone(requestedZoneID, field: "zoneID", limits: limits, shares: storage)
        attempts: for _ in 0..<3 {
            var digest = RecordSetDigest()
            var position: ChangePosition?
            var state: ZoneState?
            do {
                repeat {
                    let page = try await storage.recordChanges(
                        zone: zoneName, in: zoneAccess.locator, after: position, limit: limits.maxRecordsPerResponse,
                        recordTypes: nil)
                    let digested = state ?? page.zone
                    state = digested
                    for found in page.records {
                        guard found.sequence <= digested.sequence, page.zone.id == digested.id else { continue attempts }
                        guard let record = zoneAccess.feedEntry(found, since: nil), !record.deleted else { continue }
                        let fields = try record.decodeFields().filter { !RecordHierarchy.isReserved($0.key) }
                        digest.add(recordName: record.name, recordType: record.recordType, fields: fields)
                    }
                    metrics.recordsRead(page.records.count, via: "digest")
                    position = page.moreComing ? page.position : nil
                } while position != nil
                // A backend may read the zone's state and its records in separate snapshots: a write
                // between them moves a record past the state read. The zone must not have moved.
                if let digested = state {
                    let after = try await storage.recordChanges(
                        zone: zoneName, in: zoneAccess.locator, after: digested.currentPosition, limit: 1, recordTypes: nil)
                    guard after.zone.id == digested.id, after.zone.sequence == digested.sequence else { continue attempts }
                }
            } catch let error as StratusError where error.code == .changeTokenExpired {
                // The zone was deleted and made again, or its tombstones purged, during the read.
                continue attempts
            }
            guard let state else { break }
            var writer = JSONWriter()
            writer.beginObject()
            writer.key("zoneID")
            writer.raw(zoneAccess.wireZoneID.jsonBytes)
            writer.field("syncToken", tokens.token(for: state.currentPosition, kind: .zone))
            writer.field("recordCount", Int64(digest.recordCount))
            writer.field("digest", digest.hexDigest)
            writer.endObject()
            return .json(writer)
        }
        throw StratusError(.tryAgainLater, "zone '\(zoneName)' changed during every read of its digest; try again")
    }

    func zoneChanges(_ request: Request, _ context: StratusRequestContext, _ access: DatabaseAccess) async throws -> Response {
        let target = access.target
        let body = try await request.decodeJSON(ZoneChangesRequest.self, limit: limits.maxSmallRequestBodyBytes)
        try checkCount(body.zones.count, field: "zones", limit: limits.maxOperationsPerRequest)
        return try await listResponse("zones", capacity: 64 << 10) { writer in
            for (index, var zone) in body.zones.enumerated() {
                zone.resultsLimit = zone.resultsLimit ?? body.resultsLimit
                zone.desiredKeys = zone.desiredKeys ?? body.desiredKeys
                zone.recordTypes = zone.recordTypes ?? body.recordTypes
                zone.numbersAsStrings = zone.numbersAsStrings ?? body.numbersAsStrings
                do {
                    // A client reading one zone page by page is read ahead for, as on `records/changes`.
                    let key = body.zones.count == 1
                        ? prefetchKey(zone, access: access, pagesAhead: nil, request: request) : nil
                    let page = try await servedPage(zone, field: "zones[\(index)]", access: access, readAhead: key)
                    writer.raw(page.body)
                } catch let error as StratusError {
                    metrics.itemFailed(error.code.rawValue)
                    let zoneID = target.scope == .shared
                        ? zone.zoneID : zone.zoneID.flatMap { try? target.wireZoneID($0.zoneName) } ?? zone.zoneID
                    ErrorDictionary(
                        serverErrorCode: error.code, reason: error.reason, zoneID: zoneID, uuid: RequestTrace.nextID()
                    ).write(to: &writer)
                }
            }
        }
    }

    /// `changes/database` and `zones/changes`: custom zones changed, created or deleted since a token.
    func databaseChanges(_ request: Request, _ context: StratusRequestContext, _ access: DatabaseAccess) async throws -> Response {
        let target = access.target
        let body = try await request.decodeJSON(DatabaseChangesRequest.self, limit: limits.maxSmallRequestBodyBytes)
        metrics.feedPageServed("database")
        if target.scope == .shared { return try await sharedDatabaseChanges(body, access: access) }
        let page = try await storage.databaseChanges(
            in: access.locator, after: tokens.position(from: body.syncToken, kind: .database),
            limit: resultsLimit(body.resultsLimit))
        var writer = JSONWriter()
        writer.beginObject()
        writer.field("zones", array: try page.zones.map { zoneDictionary($0, zoneID: try target.wireZoneID($0.name)) })
        writer.field("syncToken", tokens.token(for: page.position, kind: .database))
        writer.field("moreComing", page.moreComing)
        writer.endObject()
        return .json(writer)
    }

    /// The shared database's zone feed: the zones shared with the caller that are new or changed
    /// since the token (``SharedFeedPosition``), and as deleted those that left it.
    private func sharedDatabaseChanges(_ body: DatabaseChangesRequest, access: DatabaseAccess) async throws -> Response {
        let target = access.target
        let previous = try tokens.sharedPosition(from: body.syncToken)?.zones ?? []
        let current = try await storage.sharedZones(
            user: try access.requireUser(), container: target.container, environment: target.environment)
        let seen = Dictionary(previous.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        let limit = try resultsLimit(body.resultsLimit)
        var reported: [ZoneDictionary] = []
        var next: [SharedFeedPosition.Zone] = []
        var moreComing = false
        for shared in current {
            let zone = SharedFeedPosition.Zone(
                id: shared.zone.id, sequence: shared.zone.sequence, owner: shared.owner, name: shared.zone.name)
            if let known = seen[zone.id], known.sequence >= zone.sequence {
                next.append(known)
            } else if reported.count == limit {
                moreComing = true
                if let known = seen[zone.id] { next.append(known) }
            } else {
                reported.append(zoneDictionary(shared.zone, zoneID: ZoneID(zoneName: zone.name, ownerRecordName: zone.owner)))
                next.append(zone)
            }
        }
        let currentIDs = Set(current.map(\.zone.id))
        for gone in previous where !currentIDs.contains(gone.id) {
            if reported.count == limit {
                moreComing = true
                next.append(gone)
            } else {
                reported.append(ZoneDictionary(zoneID: ZoneID(zoneName: gone.name, ownerRecordName: gone.owner), deleted: true))
            }
        }
        var writer = JSONWriter()
        writer.beginObject()
        writer.field("zones", array: reported)
        writer.field("syncToken", tokens.token(for: SharedFeedPosition(zones: next)))
        writer.field("moreComing", moreComing)
        writer.endObject()
        return .json(writer)
    }

    // MARK: Users

    func caller(_ request: Request, _ context: StratusRequestContext, _ access: DatabaseAccess) async throws -> Response {
        let target = access.target
        let recordName = try access.requireUser()
        let user = try await storage.user(container: target.container, recordName: recordName)
        func writeIdentity(to writer: inout JSONWriter) {
            writer.field("userRecordName", recordName)
            writer.key("nameComponents")
            writer.beginObject()
            writer.field("nickname", user?.username)
            writer.endObject()
        }
        // Apple's reference answers `users`, an array of the one identity; its keys are also at the
        // top level, where Stratus answered them before (and its SDK reads them).
        var writer = JSONWriter()
        writer.beginObject()
        writer.key("users")
        writer.beginArray()
        writer.beginObject()
        writeIdentity(to: &writer)
        writer.endObject()
        writer.endArray()
        writeIdentity(to: &writer)
        writer.endObject()
        return .json(writer)
    }

    func currentUser(_ request: Request, _ context: StratusRequestContext, _ access: DatabaseAccess) async throws -> Response {
        let target = access.target
        let recordName = try access.requireUser()
        // As Apple answers it: the names only of a user who made themselves discoverable.
        let user = try await storage.user(container: target.container, recordName: recordName)
        let named = user?.discoverable == true ? user : nil
        return .json(CurrentUserResponse(userRecordName: recordName, firstName: named?.givenName, lastName: named?.familyName))
    }
}
