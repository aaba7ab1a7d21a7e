import PostgresNIO
public import StratusModel
public import StratusStorage

/// The ``ShareStorage`` role: reads of the share index.
extension PostgresStorage {
    public func shareMemberships(
        zone: String, in database: DatabaseLocator, user: String
    ) async throws -> [ShareMembership] {
        try await read { connection in
            try await connection.run(
                """
                SELECT p.record_name, p.permission, p.status FROM share_participants p
                JOIN zones z ON z.id = p.zone_id AND NOT z.deleted
                JOIN databases d ON d.id = z.database_id
                WHERE d.container_id = \(database.container) AND d.environment = \(database.environment.rawValue)
                    AND d.scope = \(database.scope.rawValue) AND d.owner = \(database.owner) AND z.name = \(zone)
                    AND p.user_record_name = \(user)
                ORDER BY p.record_name
                """, logger: logger
            ).decode((String, String, String).self).collect().compactMap { row in
                guard let permission = SharePermission(rawValue: row.1), let status = ShareAcceptanceStatus(rawValue: row.2)
                else { return nil }
                return ShareMembership(shareRecordName: row.0, permission: permission, status: status)
            }
        }
    }

    public func share(shortGUID: String) async throws -> LocatedShare? {
        try await read { connection in
            let rows = try await connection.run(
                """
                SELECT s.zone_id, s.record_name, z.name, d.owner, d.container_id, d.environment FROM shares s
                JOIN zones z ON z.id = s.zone_id AND NOT z.deleted
                JOIN databases d ON d.id = z.database_id
                WHERE s.short_guid = \(shortGUID) AND d.scope = \(DatabaseScope.private.rawValue)
                """, logger: logger
            ).decode((Int64, String, String, String, String, String).self).collect()
            guard let row = rows.first, let environment = ContainerEnvironment(rawValue: row.5),
                let record = try await fetchRecords(connection, zoneID: row.0, names: [row.1])[row.1], !record.deleted
            else { return nil }
            return LocatedShare(
                database: DatabaseLocator(container: row.4, environment: environment, scope: .private, owner: row.3),
                zone: row.2, record: record)
        }
    }

    public func acceptedParticipants(zone: String, in database: DatabaseLocator) async throws -> [String] {
        try await read { connection in
            try await connection.run(
                """
                SELECT DISTINCT p.user_record_name FROM share_participants p
                JOIN zones z ON z.id = p.zone_id AND NOT z.deleted
                JOIN databases d ON d.id = z.database_id
                WHERE d.container_id = \(database.container) AND d.environment = \(database.environment.rawValue)
                    AND d.scope = \(database.scope.rawValue) AND d.owner = \(database.owner) AND z.name = \(zone)
                    AND p.status = \(ShareAcceptanceStatus.accepted.rawValue) AND p.user_record_name != d.owner
                """, logger: logger
            ).decode(String.self).collect()
        }
    }

    public func sharedZones(
        user: String, container: String, environment: ContainerEnvironment
    ) async throws -> [SharedZone] {
        try await read { connection in
            try await connection.run(
                """
                SELECT DISTINCT z.id, z.name, z.seq, z.purged_seq, z.deleted, d.owner FROM share_participants p
                JOIN zones z ON z.id = p.zone_id AND NOT z.deleted
                JOIN databases d ON d.id = z.database_id
                WHERE p.user_record_name = \(user) AND p.status = \(ShareAcceptanceStatus.accepted.rawValue)
                    AND d.container_id = \(container) AND d.environment = \(environment.rawValue)
                    AND d.scope = \(DatabaseScope.private.rawValue) AND d.owner != p.user_record_name
                ORDER BY d.owner, z.name
                """, logger: logger
            ).decode((Int64, String, Int64, Int64, Bool, String).self).collect().map {
                SharedZone(
                    owner: $0.5,
                    zone: ZoneState(name: $0.1, id: $0.0, sequence: $0.2, purgedSequence: $0.3, deleted: $0.4))
            }
        }
    }
}
