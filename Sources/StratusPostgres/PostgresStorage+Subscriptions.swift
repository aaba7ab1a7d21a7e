import Foundation
import Logging
import NIOCore
import PostgresNIO
import StratusModel
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
        try await column(Int32.self, "DELETE FROM push_tokens WHERE used_ms < \(timestamp) RETURNING 1").count
    }
}
