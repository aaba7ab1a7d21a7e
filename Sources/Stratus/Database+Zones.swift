import StratusModel

extension Database {
    /// Every zone of the database, the default zone first (CloudKit's `allRecordZones()`).
    public func allRecordZones() async throws -> [RecordZone] {
        let answer = try await connection.call(.database(databaseScope, Endpoints.zonesList.erased), as: ZonesResponse.self)
        return try answer.zones.map { try $0.mapError(CloudError.init).map(recordZone).get() }
    }

    /// The zone with `zoneID` (CloudKit's `recordZone(for:)`).
    ///
    /// - Throws: ``CloudError`` `zoneNotFound` when it does not exist.
    public func recordZone(for zoneID: RecordZone.ID) async throws -> RecordZone {
        guard let result = try await recordZones(for: [zoneID])[zoneID] else {
            throw CloudError(.internalError, "the server did not answer for zone \(zoneID)")
        }
        return try result.get()
    }

    /// The zones with `zoneIDs`, each found or failed on its own (CloudKit's `recordZones(for:)`).
    public func recordZones(for zoneIDs: [RecordZone.ID]) async throws -> [RecordZone.ID: Result<RecordZone, CloudError>] {
        let limits = try await connection.limits()
        var results: [RecordZone.ID: Result<RecordZone, CloudError>] = [:]
        for chunk in Array(Set(zoneIDs)).chunked(into: limits.maxOperationsPerRequest) {
            let answer = try await call(
                Endpoints.zonesLookup.erased, body: LookupZonesRequest(zones: chunk.map(wireZoneID)), idempotent: true,
                as: ZonesResponse.self)
            for (zoneID, item) in zip(chunk, answer.zones) {
                results[zoneID] = item.mapError(CloudError.init).map(recordZone)
            }
        }
        return results
    }

    /// Creates a zone in the private database and returns it; a zone that exists is returned as it
    /// is (CloudKit's `save(_:)` for zones).
    @discardableResult
    public func save(_ zone: RecordZone) async throws -> RecordZone {
        guard let result = try await modifyRecordZones(saving: [zone], deleting: []).saveResults[zone.zoneID] else {
            throw CloudError(.internalError, "the server did not answer for zone \(zone.zoneID)")
        }
        return try result.get()
    }

    /// Deletes a zone and every record in it; returns its ID (CloudKit's `deleteRecordZone(withID:)`).
    ///
    /// - Throws: ``CloudError`` `zoneNotFound` when it does not exist.
    @discardableResult
    public func deleteRecordZone(withID zoneID: RecordZone.ID) async throws -> RecordZone.ID {
        guard let result = try await modifyRecordZones(saving: [], deleting: [zoneID]).deleteResults[zoneID] else {
            throw CloudError(.internalError, "the server did not answer for zone \(zoneID)")
        }
        try result.get()
        return zoneID
    }

    /// Creates and deletes zones, each succeeding or failing on its own (CloudKit's
    /// `modifyRecordZones(saving:deleting:)`). Zones exist in the private database only.
    public func modifyRecordZones(
        saving zonesToSave: [RecordZone], deleting zoneIDsToDelete: [RecordZone.ID]
    ) async throws -> ModifyResults<RecordZone.ID, RecordZone> {
        let operations =
            zonesToSave.map { ModifyZonesRequest.Operation(operationType: .create, zoneID: wireZoneID($0.zoneID)) }
            + zoneIDsToDelete.map { ModifyZonesRequest.Operation(operationType: .delete, zoneID: wireZoneID($0)) }
        let ids = zonesToSave.map(\.zoneID) + zoneIDsToDelete
        let limits = try await connection.limits()
        var results = ModifyResults<RecordZone.ID, RecordZone>(itemID: CloudError.ItemID.zone)
        for chunk in Array(zip(ids, operations)).chunked(into: limits.maxOperationsPerRequest) {
            let answer = try await call(
                Endpoints.zonesModify.erased, body: ModifyZonesRequest(operations: chunk.map(\.1)),
                // Creating a zone twice gives the same zone; deleting twice fails the second time.
                idempotent: chunk.allSatisfy { $0.1.operationType == .create }, as: ZonesResponse.self)
            for ((zoneID, operation), item) in zip(chunk, answer.zones) {
                let result = item.mapError(CloudError.init)
                switch operation.operationType {
                case .create: results.saveResults[zoneID] = result.map(recordZone)
                case .delete: results.deleteResults[zoneID] = result.map { _ in () }
                }
            }
        }
        return results
    }

    /// A zone from the server's zone dictionary.
    func recordZone(_ wire: ZoneDictionary) -> RecordZone {
        var zone = RecordZone(zoneID: zoneID(wire.zoneID))
        zone.capabilities = wire.atomic == true ? [.fetchChanges, .atomic] : []
        zone.currentChangeToken = wire.syncToken.map(ServerChangeToken.init(rawValue:))
        return zone
    }
}
