import CoreMetrics
import NIOCore
import NIOWebSocket
import StratusModel

/// A push channel WebSocket, served by NIO handlers alone: no task waits on an idle connection,
/// which keeps the memory of a connected device small.
///
/// On the connection's event loop it registers the device with the hub, sends `connected`, and
/// writes the device's notifications whenever its queue has some and the socket can take them (a
/// slow reader makes the socket unwritable, and notifications then coalesce in the queue). It
/// answers pings, pings the client every heartbeat, closes connections that miss a pong, and
/// answers a close with a close.
final class PushConnection: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    private let session: PushEndpoints.Session
    private let hub: PushHub
    private let heartbeat: TimeAmount
    private var device: PushDevice?
    private var connection: UInt64 = 0
    private var context: ChannelHandlerContext?
    private var heartbeatTask: RepeatedTask?
    private var awaitingPong = false

    init(session: PushEndpoints.Session, hub: PushHub, heartbeat: TimeAmount) {
        self.session = session
        self.hub = hub
        self.heartbeat = heartbeat
    }

    /// Tells the connection, on its event loop, what its device's queue did.
    private struct Sink: PushSink {
        let handler: NIOLoopBound<PushConnection>

        func notificationsWaiting() {
            handler.eventLoop.execute { handler.value.drain() }
        }

        func close() {
            handler.eventLoop.execute { handler.value.close(code: .normalClosure) }
        }
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        let (device, connection, missed) = hub.registry.connect(
            tokenHash: session.tokenHash, owner: session.owner, deviceID: session.deviceID,
            sessionHash: session.sessionHash, sink: Sink(handler: bound))
        self.device = device
        self.connection = connection
        context.writeAndFlush(
            wrapOutboundOut(Self.text(PushMessage.connected(missedNotifications: missed).jsonBytes)), promise: nil)
        heartbeatTask = context.eventLoop.scheduleRepeatedTask(initialDelay: heartbeat, delay: heartbeat) { _ in
            bound.value.beat()
        }
        drain()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.opcode {
        case .ping:
            context.writeAndFlush(
                wrapOutboundOut(WebSocketFrame(fin: true, opcode: .pong, data: frame.unmaskedData)), promise: nil)
        case .pong:
            awaitingPong = false
        case .connectionClose:
            close(code: .normalClosure)
        default:
            break  // Clients have nothing to say on this channel.
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { drain() }
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        heartbeatTask?.cancel()
        heartbeatTask = nil
        device?.detach(connection)
        self.context = nil
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }

    /// Writes the waiting notifications while the socket can take them.
    private func drain() {
        guard let context, let device, context.channel.isWritable else { return }
        switch device.take(connection) {
        case .closed:
            close(code: .normalClosure)
        case .batch(let entries, let missed):
            guard missed || !entries.isEmpty else { return }
            if missed { context.write(wrapOutboundOut(Self.text(Self.missedMessage)), promise: nil) }
            for entry in entries { context.write(wrapOutboundOut(Self.text(entry.frame)), promise: nil) }
            context.flush()
            hub.configuration.metrics.notificationsSent(
                queuedAt: entries.map(\.queuedAt), now: hub.configuration.clock.milliseconds)
        }
    }

    /// A heartbeat: closes a connection whose last ping went unanswered, pings the others.
    private func beat() {
        guard let context else { return }
        guard !awaitingPong else {
            close(code: .goingAway)
            return
        }
        awaitingPong = true
        context.writeAndFlush(
            wrapOutboundOut(WebSocketFrame(fin: true, opcode: .ping, data: ByteBuffer(string: "stratus"))), promise: nil)
    }

    /// Sends a close frame and closes the connection.
    private func close(code: WebSocketErrorCode) {
        guard let context else { return }
        self.context = nil
        heartbeatTask?.cancel()
        var data = context.channel.allocator.buffer(capacity: 2)
        data.write(webSocketErrorCode: code)
        context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, data: data)))
            .whenComplete { _ in context.close(promise: nil) }
    }

    private static let missedMessage = PushMessage.missedNotifications.jsonBytes

    private static func text(_ bytes: [UInt8]) -> WebSocketFrame { text(ByteBuffer(bytes: bytes)) }

    private static func text(_ buffer: ByteBuffer) -> WebSocketFrame {
        WebSocketFrame(fin: true, opcode: .text, data: buffer)
    }
}
