import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import StratusModel
import Synchronization
import WSClient

extension Container {
    /// The signed-in user's notifications, as the server sends them.
    ///
    /// Iterating connects: the SDK creates a push token, registers it to the user and this device
    /// (whose own changes are then not reported to it), and opens a WebSocket to the token's URL.
    /// When the connection drops it reconnects, waiting longer after each failure (the container's
    /// `RetryPolicy` backoff, without its attempt limit); where WebSockets are blocked it long-polls
    /// the same URL over plain HTTP instead. ``PushEvent/missedNotifications`` reports gaps. The
    /// sequence ends with `notAuthenticated` when the session ends, and when iteration stops.
    ///
    /// ```swift
    /// for try await event in container.notifications() {
    ///     try await fetchChanges()   // whichever the event: a notification, or a gap
    /// }
    /// ```
    public func notifications() -> AsyncThrowingStream<PushEvent, any Error> {
        let channel = PushChannel(container: self)
        return AsyncThrowingStream { continuation in
            let task = Task { await channel.run(continuation) }
            continuation.onTermination = { _ in task.cancel() }
        }
    }
}

/// Keeps a push connection open and turns its messages into ``PushEvent``s.
struct PushChannel: Sendable {
    let container: Container

    var connection: Connection { container.connection }

    /// The largest message accepted: a notification with three desired fields fits many times.
    private static let maxMessageBytes = 1 << 20

    func run(_ continuation: AsyncThrowingStream<PushEvent, any Error>.Continuation) async {
        /// The registered push token's URL.
        var token: String?
        var failures = 0
        // A transport of the app's carries requests, not connections: it long-polls.
        var webSocketsBlocked = connection.configuration.pushTransport == .longPolling || connection.configuration.httpTransport != nil
        while !Task.isCancelled {
            var connected = false
            do {
                let current: String
                if let token {
                    current = token
                } else {
                    current = try await register()
                }
                token = current
                let url = connection.authorized(current)
                connected = webSocketsBlocked
                    ? try await longPoll(url, continuation) : try await webSocket(url, continuation)
            } catch let error as CloudError where error.code == .notAuthenticated {
                continuation.finish(throwing: error)
                return
            } catch let error as WebSocketClientError where error == .webSocketUpgradeFailed {
                // The upgrade says nothing of why; the same URL over plain HTTP does.
                switch await diagnose(token) {
                case .webSocketsBlocked: webSocketsBlocked = true
                case .tokenRefused: token = nil
                case .unreachable: break
                }
            } catch {
                if Task.isCancelled { break }
                connection.logger.info("push: the connection failed", metadata: ["stratus.error": "\(error)"])
            }
            failures = connected ? 1 : failures + 1
            let delay = connection.configuration.retryPolicy.backoff(afterFailures: failures)
            do { try await connection.configuration.clock.sleep(for: delay) } catch { break }
        }
        continuation.finish()
    }

    /// A new push token, registered to the signed-in user and this device: its URL.
    private func register() async throws -> String {
        let created = try await connection.call(
            .container(Endpoints.tokensCreate.erased),
            body: CreatePushTokenRequest(apnsEnvironment: ContainerEnvironment(rawValue: connection.environment.rawValue)),
            idempotent: true, as: PushTokenResponse.self)
        let registered = try await connection.call(
            .container(Endpoints.tokensRegister.erased), body: RegisterPushTokenRequest(apnsToken: created.apnsToken),
            idempotent: true, as: PushTokenResponse.self)
        guard let url = registered.webcourierURL else {
            throw CloudError(.serverRejectedRequest, "tokens/register answered without a webcourierURL")
        }
        return url
    }

    /// Reads the WebSocket until it closes; returns whether it was connected at all.
    private func webSocket(
        _ url: String, _ continuation: AsyncThrowingStream<PushEvent, any Error>.Continuation
    ) async throws -> Bool {
        let opened = Mutex(false)
        let heartbeat = Duration.seconds(30)
        try await WebSocketClient.connect(
            url: url,
            configuration: WebSocketClientConfiguration(
                maxFrameSize: Self.maxMessageBytes, autoPing: .enabled(timePeriod: heartbeat)),
            logger: connection.logger
        ) { inbound, _, _ in
            opened.withLock { $0 = true }
            for try await message in inbound.messages(maxSize: Self.maxMessageBytes) {
                guard case .text(let text) = message else { continue }
                try deliver(PushMessage(jsonBytes: Array(text.utf8)), continuation)
            }
        }
        return opened.withLock { $0 }
    }

    /// Long-polls until a poll fails; returns whether any poll succeeded.
    private func longPoll(
        _ url: String, _ continuation: AsyncThrowingStream<PushEvent, any Error>.Continuation
    ) async throws -> Bool {
        var polled = false
        while !Task.isCancelled {
            let answer = try await poll(url, timeout: 30)
            if !polled { deliverConnected(missed: answer.missedNotifications, continuation) }
            else if answer.missedNotifications { continuation.yield(.missedNotifications) }
            polled = true
            for notification in answer.notifications { try deliver(.notification(notification), continuation) }
        }
        return polled
    }

    private func poll(_ url: String, timeout: Int) async throws -> PushPollResponse {
        let reply = try await connection.send(
            .GET, .url(url + "&timeout=\(timeout)"), body: nil, idempotent: true)
        do {
            return try PushPollResponse(jsonBytes: Array(reply.body.readableBytesView))
        } catch {
            throw CloudError(.serverRejectedRequest, "the push channel's answer could not be read: \(error)")
        }
    }

    private enum Diagnosis {
        case webSocketsBlocked, tokenRefused, unreachable
    }

    /// Why a WebSocket upgrade failed, as a plain HTTP request to the same URL tells.
    private func diagnose(_ token: String?) async -> Diagnosis {
        guard let token else { return .unreachable }
        do {
            _ = try await poll(connection.authorized(token), timeout: 0)
            return .webSocketsBlocked
        } catch let error as CloudError where error.code == .notAuthenticated {
            // The token was refused (it was purged, or is another user's): register a new one, which
            // fails with notAuthenticated in turn if the session itself is over.
            return .tokenRefused
        } catch {
            return .unreachable
        }
    }

    private func deliver(_ message: PushMessage, _ continuation: AsyncThrowingStream<PushEvent, any Error>.Continuation)
        throws
    {
        switch message {
        case .connected(let missed):
            deliverConnected(missed: missed, continuation)
        case .notification(let wire):
            let database = container.database(with: Database.Scope(rawValue: wire.databaseScope.rawValue) ?? .private)
            continuation.yield(.notification(PushNotification(wire, in: database)))
        case .missedNotifications:
            continuation.yield(.missedNotifications)
        }
    }

    private func deliverConnected(missed: Bool, _ continuation: AsyncThrowingStream<PushEvent, any Error>.Continuation) {
        connection.logger.debug("push: connected", metadata: ["stratus.missedNotifications": "\(missed)"])
        if missed { continuation.yield(.missedNotifications) }
    }
}
