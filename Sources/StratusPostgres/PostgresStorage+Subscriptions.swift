import Foundation
import Logging
import NIOCore
import PostgresNIO
public import StratusModel
public import StratusStorage
import Synchronization

/// The ``SubscriptionStorage`` role (the type conforms through ``StratusStorage``).
extension PostgresStorage {
    // MARK: Subscriptions

    public func subscriptions(in database: DatabaseLocator, subscriber: String?) async throws -> [StoredSubscription] {
        let rows = try await read { connection in
            try await connection.run(
                """
                SELECT subscriber, definition, created_ms FROM subscriptions
                WHERE container_id = \(database.container) AND environment = \(database.environment.rawValue)
                    AND scope = \(database.scope.rawValue) AND owner = \(database.owner)
                    AND (\(subscriber)::text IS NULL OR subscriber = \(subscriber))
                ORDER BY subscriber, subscription_id
                """, logger: logger
            ).decode((String, ByteBuffer, Int64).self).collect()
        }
        return try rows.map { row in
            // Definitions were written by saveSubscription, so they decode.
            StoredSubscription(
                database: database, subscriber: row.0,
                definition: try SubscriptionDictionary(jsonBytes: Array(row.1.readableBytesView)), createdAt: row.2)
        }
    }

    public func saveSubscription(_ subscription: StoredSubscription) async throws {
        let database = subscription.database
        let definition = ByteBuffer(bytes: subscription.definition.jsonBytes)
        try await execute(
            """
            INSERT INTO subscriptions
                (container_id, environment, scope, owner, subscriber, subscription_id, definition, created_ms)
            VALUES (\(database.container), \(database.environment.rawValue), \(database.scope.rawValue),
                \(database.owner), \(subscription.subscriber), \(subscription.subscriptionID), \(definition),
                \(subscription.createdAt))
            ON CONFLICT (container_id, environment, scope, owner, subscriber, subscription_id)
            DO UPDATE SET definition = excluded.definition
            """)
    }

    public func deleteSubscription(id: String, subscriber: String, in database: DatabaseLocator) async throws -> Bool {
        try await !column(
            Int32.self,
            """
            DELETE FROM subscriptions
            WHERE container_id = \(database.container) AND environment = \(database.environment.rawValue)
                AND scope = \(database.scope.rawValue) AND owner = \(database.owner)
                AND subscriber = \(subscriber) AND subscription_id = \(id)
            RETURNING 1
            """
        ).isEmpty
    }

    // MARK: Push tokens

    public func createPushToken(hash: String, token: PushTokenInfo) async throws {
        try await requireContainer(token.container)
        try await execute(
            """
            INSERT INTO push_tokens
                (token_hash, container_id, environment, user_record_name, device_id, created_ms, used_ms)
            VALUES (\(hash), \(token.container), \(token.environment.rawValue), \(token.userRecordName),
                \(token.deviceID), \(token.createdAt), \(token.usedAt))
            """)
    }

    public func pushToken(hash: String) async throws -> PushTokenInfo? {
        try await read { connection in
            try await connection.run(
                """
                SELECT container_id, environment, user_record_name, device_id, created_ms, used_ms
                FROM push_tokens WHERE token_hash = \(hash)
                """, logger: logger
            ).decode((String, String, String?, String?, Int64, Int64).self).collect().first.map {
                PushTokenInfo(
                    container: $0.0, environment: ContainerEnvironment(rawValue: $0.1) ?? .development,
                    userRecordName: $0.2, deviceID: $0.3, createdAt: $0.4, usedAt: $0.5)
            }
        }
    }

    public func registerPushToken(
        hash: String, userRecordName: String, deviceID: String?, timestamp: Int64
    ) async throws -> Bool {
        try await !column(
            Int32.self,
            """
            UPDATE push_tokens SET user_record_name = \(userRecordName), device_id = \(deviceID), used_ms = \(timestamp)
            WHERE token_hash = \(hash) RETURNING 1
            """
        ).isEmpty
    }

    public func markPushTokenUsed(hash: String, timestamp: Int64) async throws {
        try await execute("UPDATE push_tokens SET used_ms = greatest(used_ms, \(timestamp)) WHERE token_hash = \(hash)")
    }

    public func purgePushTokens(unusedSince timestamp: Int64) async throws -> Int {
        try await column(
            Int32.self,
            """
            WITH endpoints AS (DELETE FROM push_endpoints WHERE used_ms < \(timestamp) RETURNING 1),
                tokens AS (DELETE FROM push_tokens WHERE used_ms < \(timestamp) RETURNING 1)
            SELECT 1 FROM endpoints UNION ALL SELECT 1 FROM tokens
            """
        ).count
    }

    // MARK: Push endpoints

    public func registerPushEndpoint(_ endpoint: PushEndpointInfo, keepingAtMost limit: Int) async throws {
        try await requireContainer(endpoint.container)
        try await transaction { connection in
            try await connection.run(
                """
                INSERT INTO push_endpoints (endpoint_id, container_id, environment, user_record_name, device_id,
                    channel, address, public_key, auth_secret, created_ms, used_ms)
                VALUES (\(endpoint.id), \(endpoint.container), \(endpoint.environment.rawValue),
                    \(endpoint.userRecordName), \(endpoint.deviceID), \(endpoint.channel.rawValue), \(endpoint.address),
                    \(endpoint.publicKey), \(endpoint.authSecret), \(endpoint.createdAt), \(endpoint.usedAt))
                ON CONFLICT (endpoint_id) DO UPDATE SET user_record_name = excluded.user_record_name,
                    device_id = excluded.device_id, used_ms = excluded.used_ms
                """, logger: logger)
            try await connection.run(
                """
                DELETE FROM push_endpoints WHERE endpoint_id IN (
                    SELECT endpoint_id FROM push_endpoints
                    WHERE container_id = \(endpoint.container) AND environment = \(endpoint.environment.rawValue)
                        AND user_record_name = \(endpoint.userRecordName)
                    ORDER BY used_ms DESC, endpoint_id OFFSET \(limit))
                """, logger: logger)
        }
    }

    public func pushEndpoints(
        container: String, environment: ContainerEnvironment, userRecordName: String
    ) async throws -> [PushEndpointInfo] {
        try await read { connection in
            try await connection.run(
                """
                SELECT endpoint_id, device_id, channel, address, public_key, auth_secret, created_ms, used_ms
                FROM push_endpoints
                WHERE container_id = \(container) AND environment = \(environment.rawValue)
                    AND user_record_name = \(userRecordName)
                ORDER BY used_ms DESC, endpoint_id
                """, logger: logger
            ).decode((String, String?, String, String, String?, String?, Int64, Int64).self).collect().compactMap { row in
                guard let channel = PushEndpointInfo.Channel(rawValue: row.2) else { return nil }
                return PushEndpointInfo(
                    id: row.0, container: container, environment: environment, userRecordName: userRecordName,
                    deviceID: row.1, channel: channel, address: row.3, publicKey: row.4, authSecret: row.5,
                    createdAt: row.6, usedAt: row.7)
            }
        }
    }

    public func deletePushEndpoint(id: String) async throws -> Bool {
        try await !column(Int32.self, "DELETE FROM push_endpoints WHERE endpoint_id = \(id) RETURNING 1").isEmpty
    }
}
