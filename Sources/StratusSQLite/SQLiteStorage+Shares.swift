import GRDB
public import StratusModel
public import StratusStorage

/// The ``ShareStorage`` role: reads of the share index.
extension SQLiteStorage {
    public func shareMemberships(
        zone: String, in database: DatabaseLocator, user: String
    ) async throws -> [ShareMembership] {
        try await pool.read { db in
            guard let databaseID = try Self.existingDatabase(db, database),
                let zone = try Self.liveZone(db, databaseID, zone)
            else { return [] }
            return try Row.fetchAll(
                db.cachedStatement(
                    sql: """
                        SELECT record_name, permission, status FROM share_participants
                        WHERE zone_id = ? AND user_record_name = ? ORDER BY record_name
                        """),
                arguments: [zone.id, user]
            ).compactMap { Self.membership($0[0], permission: $0[1], status: $0[2]) }
        }
    }

    /// A membership from its stored columns, `nil` if they hold what this build does not know.
    static func membership(_ name: String, permission: String, status: String) -> ShareMembership? {
        guard let permission = SharePermission(rawValue: permission), let status = ShareAcceptanceStatus(rawValue: status)
        else { return nil }
        return ShareMembership(shareRecordName: name, permission: permission, status: status)
    }

    public func share(shortGUID: String) async throws -> LocatedShare? {
        try await pool.read { db in
            guard
                let row = try Row.fetchOne(
                    db,
                    sql: """
                        SELECT shares.zone_id, shares.record_name, zones.name, databases.owner, databases.container_id,
                            databases.environment FROM shares
                        JOIN zones ON zones.id = shares.zone_id AND zones.deleted = 0
                        JOIN databases ON databases.id = zones.database_id
                        WHERE shares.short_guid = ? AND databases.scope = ?
                        """,
                    arguments: [shortGUID, DatabaseScope.private.rawValue]),
                let environment = ContainerEnvironment(rawValue: row[5]),
                let record = try Self.fetchRecord(db, zoneID: row[0], name: row[1]), !record.deleted
            else { return nil }
            return LocatedShare(
                database: DatabaseLocator(container: row[4], environment: environment, scope: .private, owner: row[3]),
                zone: row[2], record: record)
        }
    }

    public func acceptedParticipants(zone: String, in database: DatabaseLocator) async throws -> [String] {
        try await pool.read { db in
            guard let databaseID = try Self.existingDatabase(db, database),
                let zone = try Self.liveZone(db, databaseID, zone)
            else { return [] }
            return try String.fetchAll(
                db,
                sql: """
                    SELECT DISTINCT user_record_name FROM share_participants
                    WHERE zone_id = ? AND status = ? AND user_record_name != ?
                    """,
                arguments: [zone.id, ShareAcceptanceStatus.accepted.rawValue, database.owner])
        }
    }

    public func sharedZones(
        user: String, container: String, environment: ContainerEnvironment
    ) async throws -> [SharedZone] {
        try await pool.read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT DISTINCT zones.*, databases.owner AS owner FROM share_participants
                    JOIN zones ON zones.id = share_participants.zone_id AND zones.deleted = 0
                    JOIN databases ON databases.id = zones.database_id
                    WHERE share_participants.user_record_name = ? AND share_participants.status = ?
                        AND databases.container_id = ? AND databases.environment = ? AND databases.scope = ?
                        AND databases.owner != share_participants.user_record_name
                    ORDER BY databases.owner, zones.name
                    """,
                arguments: [
                    user, ShareAcceptanceStatus.accepted.rawValue, container, environment.rawValue,
                    DatabaseScope.private.rawValue,
                ]
            ).map { SharedZone(owner: $0["owner"], zone: Self.zoneState($0)) }
        }
    }
}
