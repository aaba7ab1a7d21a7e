import Foundation
import GRDB
import GRDBSQLite
public import StratusModel
public import StratusStorage
import Synchronization

/// The ``SubscriptionStorage`` role (the type conforms through ``StratusStorage``).
extension SQLiteStorage {
    // MARK: Subscriptions

    public func subscriptions(in database: DatabaseLocator, subscriber: String?) async throws -> [StoredSubscription] {
        try await pool.read { db in
            var sql = """
                SELECT subscriber, definition, created_ms FROM subscriptions
                WHERE container_id = ? AND environment = ? AND scope = ? AND owner = ?
                """
            var arguments: StatementArguments = [
                database.container, database.environment.rawValue, database.scope.rawValue, database.owner,
            ]
            if let subscriber {
                sql += " AND subscriber = ?"
                arguments += [subscriber]
            }
            return try Row.fetchAll(db, sql: sql + " ORDER BY subscriber, subscription_id", arguments: arguments).map { row in
                StoredSubscription(
                    database: database, subscriber: row["subscriber"],
                    // Definitions were written by saveSubscription, so they decode.
                    definition: try SubscriptionDictionary(jsonBytes: [UInt8](row["definition"] as Data)),
                    createdAt: row["created_ms"])
            }
        }
    }

    public func saveSubscription(_ subscription: StoredSubscription) async throws {
        let database = subscription.database
        try await pool.write { db in
            try db.execute(
                sql: """
                    INSERT INTO subscriptions
                        (container_id, environment, scope, owner, subscriber, subscription_id, definition, created_ms)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                    ON CONFLICT (container_id, environment, scope, owner, subscriber, subscription_id)
                    DO UPDATE SET definition = excluded.definition
                    """,
                arguments: [
                    database.container, database.environment.rawValue, database.scope.rawValue, database.owner,
                    subscription.subscriber, subscription.subscriptionID, Data(subscription.definition.jsonBytes),
                    subscription.createdAt,
                ])
        }
    }

    public func deleteSubscription(id: String, subscriber: String, in database: DatabaseLocator) async throws -> Bool {
        try await pool.write { db in
            try db.execute(
                sql: """
                    DELETE FROM subscriptions WHERE container_id = ? AND environment = ? AND scope = ? AND owner = ?
                    AND subscriber = ? AND subscription_id = ?
                    """,
                arguments: [
                    database.container, database.environment.rawValue, database.scope.rawValue, database.owner,
                    subscriber, id,
                ])
            return db.changesCount > 0
        }
    }

    // MARK: Push tokens

    public func createPushToken(hash: String, token: PushTokenInfo) async throws {
        try await pool.write { db in
            try Self.requireContainer(db, token.container)
            try db.execute(
                sql: """
                    INSERT INTO push_tokens (token_hash, container_id, environment, user_record_name, device_id, created_ms, used_ms)
                    VALUES (?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    hash, token.container, token.environment.rawValue, token.userRecordName, token.deviceID,
                    token.createdAt, token.usedAt,
                ])
        }
    }

    public func pushToken(hash: String) async throws -> PushTokenInfo? {
        try await pool.read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM push_tokens WHERE token_hash = ?", arguments: [hash]).map { row in
                PushTokenInfo(
                    container: row["container_id"],
                    environment: ContainerEnvironment(rawValue: row["environment"]) ?? .development,
                    userRecordName: row["user_record_name"], deviceID: row["device_id"], createdAt: row["created_ms"],
                    usedAt: row["used_ms"])
            }
        }
    }

    public func registerPushToken(
        hash: String, userRecordName: String, deviceID: String?, timestamp: Int64
    ) async throws -> Bool {
        try await pool.write { db in
            try db.execute(
                sql: "UPDATE push_tokens SET user_record_name = ?, device_id = ?, used_ms = ? WHERE token_hash = ?",
                arguments: [userRecordName, deviceID, timestamp, hash])
            return db.changesCount > 0
        }
    }

    public func markPushTokenUsed(hash: String, timestamp: Int64) async throws {
        try await pool.write { db in
            try db.execute(
                sql: "UPDATE push_tokens SET used_ms = max(used_ms, ?) WHERE token_hash = ?", arguments: [timestamp, hash])
        }
    }

    public func purgePushTokens(unusedSince timestamp: Int64) async throws -> Int {
        try await pool.write { db in
            try db.execute(sql: "DELETE FROM push_tokens WHERE used_ms < ?", arguments: [timestamp])
            let tokens = db.changesCount
            try db.execute(sql: "DELETE FROM push_endpoints WHERE used_ms < ?", arguments: [timestamp])
            return tokens + db.changesCount
        }
    }

    // MARK: Push endpoints

    public func registerPushEndpoint(_ endpoint: PushEndpointInfo, keepingAtMost limit: Int) async throws {
        try await pool.write { db in
            try Self.requireContainer(db, endpoint.container)
            try db.execute(
                sql: """
                    INSERT INTO push_endpoints (endpoint_id, container_id, environment, user_record_name, device_id,
                        channel, address, public_key, auth_secret, created_ms, used_ms)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    ON CONFLICT (endpoint_id) DO UPDATE SET user_record_name = excluded.user_record_name,
                        device_id = excluded.device_id, used_ms = excluded.used_ms
                    """,
                arguments: [
                    endpoint.id, endpoint.container, endpoint.environment.rawValue, endpoint.userRecordName,
                    endpoint.deviceID, endpoint.channel.rawValue, endpoint.address, endpoint.publicKey,
                    endpoint.authSecret, endpoint.createdAt, endpoint.usedAt,
                ])
            try db.execute(
                sql: """
                    DELETE FROM push_endpoints WHERE endpoint_id IN (
                        SELECT endpoint_id FROM push_endpoints
                        WHERE container_id = ? AND environment = ? AND user_record_name = ?
                        ORDER BY used_ms DESC, endpoint_id LIMIT -1 OFFSET ?)
                    """,
                arguments: [endpoint.container, endpoint.environment.rawValue, endpoint.userRecordName, limit])
        }
    }

    public func pushEndpoints(
        container: String, environment: ContainerEnvironment, userRecordName: String
    ) async throws -> [PushEndpointInfo] {
        try await pool.read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT * FROM push_endpoints WHERE container_id = ? AND environment = ? AND user_record_name = ?
                    ORDER BY used_ms DESC, endpoint_id
                    """,
                arguments: [container, environment.rawValue, userRecordName]
            ).compactMap { row in
                guard let channel = PushEndpointInfo.Channel(rawValue: row["channel"]) else { return nil }
                return PushEndpointInfo(
                    id: row["endpoint_id"], container: row["container_id"], environment: environment,
                    userRecordName: row["user_record_name"], deviceID: row["device_id"], channel: channel,
                    address: row["address"], publicKey: row["public_key"], authSecret: row["auth_secret"],
                    createdAt: row["created_ms"], usedAt: row["used_ms"])
            }
        }
    }

    public func deletePushEndpoint(id: String) async throws -> Bool {
        try await pool.write { db in
            try db.execute(sql: "DELETE FROM push_endpoints WHERE endpoint_id = ?", arguments: [id])
            return db.changesCount > 0
        }
    }
}
