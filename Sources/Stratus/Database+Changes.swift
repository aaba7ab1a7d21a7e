import StratusModel

/// One page of a zone's changes (what CloudKit's `recordZoneChanges(inZoneWith:since:)` returns).
public struct RecordZoneChanges: Sendable {
    /// A deleted record.
    public struct Deletion: Hashable, Sendable {
        /// The deleted record's ID.
        public var recordID: Record.ID
        /// The deleted record's type.
        public var recordType: String
    }

    /// Records created or changed since the token, in their latest state, each fetched or failed on
    /// its own (an asset file that could not be downloaded fails its record).
    public var modificationResultsByID: [Record.ID: Result<Record, CloudError>]
    /// Records deleted since the token. A record created and deleted since then also appears here:
    /// ignore deletions of records you never had.
    public var deletions: [Deletion]
    /// Where this page ends: store it once the page is applied, and read on from it.
    public var changeToken: ServerChangeToken
    /// Whether more changes follow; read again with ``changeToken``.
    public var moreComing: Bool
}

/// One page of a database's zone changes (what CloudKit's `databaseChanges(since:)` returns).
public struct DatabaseChanges: Sendable {
    /// A deleted zone.
    public struct Deletion: Hashable, Sendable {
        /// Why a zone is gone.
        public enum Reason: Sendable, Hashable {
            /// It was deleted.
            case deleted
        }
        /// The deleted zone.
        public var zoneID: RecordZone.ID
        /// Why it is gone.
        public var reason: Reason
    }

    /// Zones created, or with records changed, since the token: read their changes.
    public var modifications: [RecordZone.ID]
    /// Zones deleted since the token: drop your copy of them. A zone deleted and created again
    /// appears here and in ``modifications``.
    public var deletions: [Deletion]
    /// Where this page ends: store it once the page is applied, and read on from it.
    public var changeToken: ServerChangeToken
    /// Whether more changes follow; read again with ``changeToken``.
    public var moreComing: Bool
}

extension Database {
    /// One page of the changes in a custom zone since `changeToken` (CloudKit's
    /// `recordZoneChanges(inZoneWith:since:desiredKeys:resultsLimit:)`); `nil` reads from the
    /// beginning. Private and shared databases only.
    ///
    /// - Throws: ``CloudError`` `changeTokenExpired` when the server no longer knows what changed
    ///   since the token: read again from `nil` and drop local records the full read did not return.
    ///   `zoneNotFound` when the zone is gone.
    public func recordZoneChanges(
        inZoneWith zoneID: RecordZone.ID, since changeToken: ServerChangeToken?, desiredKeys: [String]? = nil,
        resultsLimit: Int? = nil
    ) async throws -> RecordZoneChanges {
        let answer = try await call(
            "records/changes",
            body: RecordChangesRequest(
                zoneID: wireZoneID(zoneID), syncToken: changeToken?.rawValue, resultsLimit: resultsLimit,
                desiredKeys: desiredKeys),
            idempotent: true, as: RecordChangesResponse.self)
        var changedIDs: [Record.ID] = []
        var changed: [Result<Record, CloudError>] = []
        var deletions: [RecordZoneChanges.Deletion] = []
        for wire in answer.records {
            guard let recordName = wire.recordName else { continue }
            let recordID = Record.ID(recordName: recordName, zoneID: zoneID)
            if wire.deleted == true {
                deletions.append(.init(recordID: recordID, recordType: wire.recordType ?? ""))
            } else {
                changedIDs.append(recordID)
                changed.append(Result { () throws(CloudError) in try record(wire, zoneID: zoneID) })
            }
        }
        let modifications = Dictionary(zip(changedIDs, await downloadingAssets(of: changed))) { $1 }
        return RecordZoneChanges(
            modificationResultsByID: modifications, deletions: deletions,
            changeToken: ServerChangeToken(rawValue: answer.syncToken), moreComing: answer.moreComing)
    }

    /// One page of the zones changed in this database since `changeToken` (CloudKit's
    /// `databaseChanges(since:resultsLimit:)`); `nil` reads from the beginning. Private and shared
    /// databases only.
    ///
    /// - Throws: ``CloudError`` `changeTokenExpired`: read again from `nil`.
    public func databaseChanges(since changeToken: ServerChangeToken?, resultsLimit: Int? = nil) async throws -> DatabaseChanges {
        let answer = try await call(
            "changes/database", body: DatabaseChangesRequest(syncToken: changeToken?.rawValue, resultsLimit: resultsLimit),
            idempotent: true, as: DatabaseChangesResponse.self)
        var modifications: [RecordZone.ID] = []
        var deletions: [DatabaseChanges.Deletion] = []
        for zone in answer.zones {
            if zone.deleted == true {
                deletions.append(.init(zoneID: zoneID(zone.zoneID), reason: .deleted))
            } else {
                modifications.append(zoneID(zone.zoneID))
            }
        }
        return DatabaseChanges(
            modifications: modifications, deletions: deletions,
            changeToken: ServerChangeToken(rawValue: answer.syncToken), moreComing: answer.moreComing)
    }
}
