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
/// notification carries the sender's ID, then each message after a newline, as many as fit
/// PostgreSQL's payload limit (8000 bytes): a burst of messages costs one `NOTIFY`. A message too
/// large for that (or holding a newline byte) is written to `instance_messages`, and a notification
/// of its own carries its row ID after `@`. A lost listening connection is opened again after a
/// pause, and the listener then hears ``InstanceMessage/gap``.
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

    func broadcast(_ messages: [[UInt8]]) async throws {
        let logger = logger
        try await client.withConnection { connection in
            var payload = instanceID
            var packed = 0
            func notify(_ payload: String) async throws {
                try await connection.run("SELECT pg_notify(\(Self.channel), \(payload))", logger: logger)
            }
            var storedAny = false
            for message in messages {
                let inline = message.count + 1 + instanceID.utf8.count <= Self.inlineLimit && !message.contains(UInt8(ascii: "\n"))
                if inline, payload.utf8.count + 1 + message.count <= Self.inlineLimit {
                    payload += "\n" + String(decoding: message, as: UTF8.self)
                    packed += 1
                    continue
                }
                // The messages packed so far go first, so that the other instances keep the order.
                if packed > 0 { try await notify(payload) }
                payload = instanceID
                packed = 0
                if inline {
                    payload += "\n" + String(decoding: message, as: UTF8.self)
                    packed = 1
                    continue
                }
                let id = try await connection.run(
                    """
                    INSERT INTO instance_messages (payload, created_ms) VALUES (\(ByteBuffer(bytes: message)), \(Timestamp.now.milliseconds))
                    RETURNING id
                    """, logger: logger
                ).decode(Int64.self).collect()[0]
                try await notify(instanceID + "\n@\(id)")
                storedAny = true
            }
            if packed > 0 { try await notify(payload) }
            if storedAny {
                try await connection.run(
                    "DELETE FROM instance_messages WHERE created_ms < \(Timestamp.now.milliseconds - Self.retentionMilliseconds)",
                    logger: logger)
            }
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
                            for message in try await self.messages(in: notification.payload, connection) {
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

    /// The messages a notification carries; none for this instance's own.
    private func messages(in payload: String, _ connection: PostgresConnection) async throws -> [[UInt8]] {
        guard let newline = payload.firstIndex(of: "\n"), payload[..<newline] != instanceID else { return [] }
        let body = payload[payload.index(after: newline)...]
        guard body.hasPrefix("@"), let id = Int64(body.dropFirst()) else {
            return body.split(separator: "\n", omittingEmptySubsequences: false).map { Array($0.utf8) }
        }
        return try await connection.run("SELECT payload FROM instance_messages WHERE id = \(id)", logger: logger)
            .decode(ByteBuffer.self).collect().first.map { [Array($0.readableBytesView)] } ?? []
    }
}
