import Foundation
import Logging
import NIOCore
import PostgresNIO
import StratusModel
import StratusStorage
import Synchronization

/// Messages between Stratus instances over PostgreSQL's `LISTEN`/`NOTIFY`.
///
/// Each instance listens on one channel through a connection of its pool kept for that purpose. A
/// message goes out as a notification: the sender's ID, a newline and the message, when that fits
/// PostgreSQL's payload limit (8000 bytes); a larger message is written to `instance_messages` and
/// the notification carries its row ID after `@`. A lost listening connection is opened again after
/// a pause, and the listener then hears ``InstanceMessage/gap``.
final class PostgresMessageBus: InstanceMessageBus {
    static let channel = "stratus_messages"
    /// Payloads up to this many bytes go in the notification itself.
    static let inlineLimit = 7_900
    /// How long large messages are kept for the other instances to read, in milliseconds.
    static let retentionMilliseconds: Int64 = 10 * 60 * 1000

    private let client: PostgresClient
    private let logger: Logger
    private let instanceID = UUID().uuidString

    init(client: PostgresClient, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    func broadcast(_ message: [UInt8]) async throws {
        let inline = instanceID + "\n" + String(decoding: message, as: UTF8.self)
        let logger = logger
        try await client.withConnection { connection in
            if inline.utf8.count <= Self.inlineLimit {
                try await connection.run("SELECT pg_notify(\(Self.channel), \(inline))", logger: logger)
                return
            }
            let now = Timestamp.now.milliseconds
            let id = try await connection.run(
                """
                INSERT INTO instance_messages (payload, created_ms) VALUES (\(ByteBuffer(bytes: message)), \(now))
                RETURNING id
                """, logger: logger
            ).decode(Int64.self).collect()[0]
            try await connection.run("SELECT pg_notify(\(Self.channel), \(instanceID + "\n@\(id)"))", logger: logger)
            try await connection.run(
                "DELETE FROM instance_messages WHERE created_ms < \(now - Self.retentionMilliseconds)", logger: logger)
        }
    }

    func listen(_ receive: @Sendable (InstanceMessage) async -> Void) async {
        var connected = false
        while !Task.isCancelled {
            do {
                try await client.withConnection { connection in
                    try await connection.listen(on: Self.channel) { notifications in
                        if connected { await receive(.gap) }
                        connected = true
                        for try await notification in notifications {
                            if let message = try await self.message(in: notification.payload, connection) {
                                await receive(.message(message))
                            }
                        }
                    }
                }
            } catch {
                if Task.isCancelled { break }
                logger.warning(
                    "instance messages: listening failed; trying again in a second",
                    metadata: ["error": "\(PostgresStorage.describe(error))"])
            }
            try? await Task.sleep(for: .seconds(1))
        }
    }

    /// The message a notification carries, or `nil` for this instance's own.
    private func message(in payload: String, _ connection: PostgresConnection) async throws -> [UInt8]? {
        guard let newline = payload.firstIndex(of: "\n"), payload[..<newline] != instanceID else { return nil }
        let body = payload[payload.index(after: newline)...]
        guard body.hasPrefix("@"), let id = Int64(body.dropFirst()) else { return Array(body.utf8) }
        return try await connection.run("SELECT payload FROM instance_messages WHERE id = \(id)", logger: logger)
            .decode(ByteBuffer.self).collect().first.map { Array($0.readableBytesView) }
    }
}
