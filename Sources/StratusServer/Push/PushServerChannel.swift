import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import NIOWebSocket
import Synchronization

/// The server's connections: HTTP/1 for every endpoint, and WebSockets for the push channel.
///
/// A request to `/push/1/{token}` that asks for a WebSocket is authenticated before it is upgraded;
/// the upgraded connection is then served by a ``PushConnection`` handler on its event loop. Every
/// other request is answered by the router, as Hummingbird's own HTTP/1 channel does. An upgrade
/// that is refused gets `400` (its reason is the answer of the same URL without an upgrade).
///
/// A connection is never left to hold a file descriptor for free: it must send its first request's
/// head within `requestHeadTimeout` (``FirstRequestDeadline``), its request bodies must keep their
/// pace (``BodyPaceHandler``), it is closed after `http.idleTimeout` between requests, and a request
/// that is not HTTP gets `400` and the connection is closed at once (NIO's protocol error handler).
struct PushServerChannel: ServerChildChannel, HTTPChannelHandler {
    /// What a connection became.
    enum Connection: Sendable {
        case http(NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>)
        case refusedUpgrade(NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>)
        case push
        /// Past a connection cap: answered `503` and closed by its only handler.
        case refused
    }

    struct Value: ServerChildChannelValue {
        let connection: EventLoopFuture<Connection>
        let channel: any Channel
    }

    let responder: Responder
    let push: PushEndpoints
    let heartbeat: TimeAmount
    let requestHeadTimeout: TimeAmount
    /// The caps on connections and bodies under way per client network.
    let admission: ConnectionAdmission
    /// Whether this channel admits connections; `false` when a channel in front (TLS) admitted them.
    let admitsConnections: Bool
    /// The pace request bodies must keep.
    let pace: RequestBodyPace
    let http: HTTP1Channel.Configuration

    init(
        responder: @escaping Responder, push: PushEndpoints, heartbeat: TimeAmount, requestHeadTimeout: TimeAmount,
        admission: ConnectionAdmission, admitsConnections: Bool, pace: RequestBodyPace, http: HTTP1Channel.Configuration
    ) {
        self.responder = Self.redirectingLateUpgrades(responder)
        self.push = push
        self.heartbeat = heartbeat
        self.requestHeadTimeout = requestHeadTimeout
        self.admission = admission
        self.admitsConnections = admitsConnections
        self.pace = pace
        self.http = http
    }

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        channel.eventLoop.makeCompletedFuture {
            guard !self.admitsConnections || self.admission.admit(channel) else {
                try channel.pipeline.syncOperations.addHandler(RefusingHandler())
                return Value(connection: channel.eventLoop.makeSucceededFuture(.refused), channel: channel)
            }
            let deadline = FirstRequestDeadline(timeout: self.requestHeadTimeout)
            try channel.pipeline.syncOperations.addHandler(deadline)
            let attempted = NIOLoopBoundBox(false, eventLoop: channel.eventLoop)
            let session = NIOLoopBoundBox<PushEndpoints.Session?>(nil, eventLoop: channel.eventLoop)
            let (push, hub, heartbeat) = (self.push, self.push.hub, self.heartbeat)
            let upgrader = NIOTypedWebSocketServerUpgrader<Connection>(
                shouldUpgrade: { channel, head in
                    attempted.value = true
                    let promise = channel.eventLoop.makePromise(of: PushEndpoints.Session?.self)
                    promise.completeWithTask {
                        let uri = URI(head.uri)
                        let prefix = "/push/1/"
                        guard uri.path.hasPrefix(prefix), let found = try? await push.authenticate(
                            token: String(uri.path.dropFirst(prefix.count)),
                            apiToken: uri.queryParameters["ckAPIToken"].map(String.init),
                            webAuthToken: uri.queryParameters["ckWebAuthToken"].map(String.init))
                        else { return nil }
                        return found
                    }
                    return promise.futureResult.map { found in
                        session.value = found
                        return found == nil ? nil : HTTPHeaders()
                    }
                },
                upgradePipelineHandler: { channel, _ in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.handler(type: FirstRequestDeadline.self).cancel()
                        guard let found = session.value else { throw ChannelError.inappropriateOperationForState }
                        try channel.pipeline.syncOperations.addHandler(
                            PushConnection(session: found, hub: hub, heartbeat: heartbeat))
                        return .push
                    }
                })
            let (http, pace, admission) = (self.http, self.pace, self.admission)
            var configuration = NIOUpgradableHTTPServerPipelineConfiguration<Connection>(
                upgradeConfiguration: NIOTypedHTTPServerUpgradeConfiguration(
                    upgraders: [upgrader],
                    notUpgradingCompletionHandler: { channel in
                        channel.eventLoop.makeCompletedFuture {
                            try channel.pipeline.syncOperations.handler(type: FirstRequestDeadline.self).cancel()
                            try channel.pipeline.syncOperations.addHandler(HTTP1ToHTTPServerCodec(secure: false))
                            try channel.pipeline.syncOperations.addHandlers(http.additionalChannelHandlers())
                            try channel.pipeline.syncOperations.addHandler(
                                BodyPaceHandler(pace: pace, admission: admission))
                            try channel.pipeline.syncOperations.addHandler(
                                HTTPConnectionStateHandler(idleTimeout: http.idleTimeout.map { .init($0) }, logger: logger))
                            let asyncChannel = try NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>(
                                wrappingChannelSynchronously: channel, configuration: .init(isOutboundHalfClosureEnabled: true))
                            return attempted.value ? .refusedUpgrade(asyncChannel) : .http(asyncChannel)
                        }
                    }))
            configuration.enablePipelining = false  // NIOAsyncChannel pipelines HTTP
            // What is not HTTP gets `400` and a close, before it reaches Hummingbird.
            configuration.enableErrorHandling = true
            configuration.enableResponseHeaderValidation = false  // Swift HTTP Types validate headers
            configuration.decoderConfiguration.maxHeaderFieldSize = http.httpDecoder.maxHeaderFieldSize
            configuration.decoderConfiguration.maxHeaderListSize = http.httpDecoder.maxHeaderListSize
            configuration.decoderConfiguration.maxHeaderFieldCount = http.httpDecoder.maxHeaderFieldCount
            let connection = try channel.pipeline.syncOperations.configureUpgradableHTTPServerPipeline(
                configuration: configuration)
            try channel.pipeline.syncOperations.addHandler(ClosingOnMalformedHTTP())
            return Value(connection: connection, channel: channel)
        }
    }

    func handle(value: Value, logger: Logger) async {
        do {
            switch try await value.connection.get() {
            case .http(let asyncChannel):
                await handleHTTP(asyncChannel: asyncChannel, logger: logger)
            case .refusedUpgrade(let asyncChannel):
                try await asyncChannel.executeThenClose { _, outbound in
                    try await outbound.write(
                        contentsOf: [
                            .head(HTTPResponse(status: .badRequest, headerFields: [.connection: "close", .contentLength: "0"])),
                            .end(nil),
                        ])
                }
            case .push, .refused:
                break  // The connection's handlers serve it from here, with no task.
            }
        } catch {
            logger.debug("a connection ended during its setup", metadata: ["error": "\(error)"])
        }
    }

    /// NIO upgrades only a connection's first request: a later request asking for a WebSocket is
    /// redirected to the same URL with the connection closed, so that the client asks again on a
    /// new connection (as Hummingbird's WebSocket channel does).
    private static func redirectingLateUpgrades(_ responder: @escaping Responder) -> Responder {
        struct ClosingAfterRedirect: Error {}
        return { request, writer, channel in
            guard request.headers[.upgrade]?.lowercased() == "websocket" else {
                return try await responder(request, writer, channel)
            }
            var location = request.uri.path
            if let query = request.uri.query { location += "?\(query)" }
            try await writer.writeResponse(
                HTTPResponse(status: .temporaryRedirect, headerFields: [.connection: "close", .location: location]))
            throw ClosingAfterRedirect()
        }
    }
}

/// Closes the connection once NIO's protocol error handler has answered what is not HTTP with `400`,
/// so a malformed request costs the server nothing more.
final class ClosingOnMalformedHTTP: ChannelInboundHandler, Sendable {
    typealias InboundIn = NIOAny

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if error is HTTPParserError { context.close(promise: nil) }
        context.fireErrorCaught(error)
    }
}

/// Closes a connection that has not sent the head of its first request within `timeout`: one that
/// sends nothing, or sends it a byte at a time. The pipeline cancels it once the head has come (see
/// ``PushServerChannel``); later requests are bounded by the idle timeout between requests.
final class FirstRequestDeadline: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer

    private let timeout: TimeAmount
    private let state = Mutex<(task: Scheduled<Void>?, cancelled: Bool)>((nil, false))

    init(timeout: TimeAmount) {
        self.timeout = timeout
    }

    func handlerAdded(context: ChannelHandlerContext) {
        let channel = context.channel
        let task = context.eventLoop.scheduleTask(in: timeout) { [self] in
            if !state.withLock({ $0.cancelled }) { channel.close(promise: nil) }
        }
        state.withLock { $0.task = task }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        cancel()
    }

    /// The head came: the connection stays.
    func cancel() {
        state.withLock { state in
            state.cancelled = true
            state.task?.cancel()
        }
    }
}

/// Answers a connection past a cap with `503` and `Retry-After`, and closes it.
final class RefusingHandler: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer
    static let refusal = "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nRetry-After: 1\r\nContent-Length: 0\r\n\r\n"

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { refuse(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        refuse(context)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {}

    private func refuse(_ context: ChannelHandlerContext) {
        let channel = context.channel
        context.writeAndFlush(NIOAny(ByteBuffer(string: Self.refusal))).whenComplete { _ in channel.close(promise: nil) }
    }
}
