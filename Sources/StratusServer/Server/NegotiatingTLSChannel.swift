import HTTPTypes
import HummingbirdCore
import HummingbirdHTTP2
import Logging
import NIOCore
import NIOHTTP2
import NIOHTTPTypes
import NIOSSL
import NIOTLS

/// A TLS connection that speaks HTTP/2 when the client offers it (ALPN `h2`) and HTTP/1.1 otherwise.
///
/// A connection is counted against the caps before its handshake (past a cap it is closed at once:
/// no HTTP answer is possible before the handshake) and must complete the handshake within the
/// request-head deadline. Then HTTP/1.1 goes to the server's own channel (``PushServerChannel``:
/// head deadline, idle timeout, the push WebSocket upgrade); HTTP/2 to Hummingbird's, closed after
/// the idle timeout without an open stream, its streams after the idle timeout without a byte.
struct NegotiatingTLSChannel: ServerChildChannel, HTTPChannelHandler {
    typealias Negotiated = NIONegotiatedHTTPVersion<PushServerChannel.Value, HTTP2Channel.Value?>

    struct Value: ServerChildChannelValue {
        let negotiated: EventLoopFuture<Negotiated>
        let channel: any Channel
    }

    let http1: PushServerChannel
    let http2: HTTP2Channel
    let context: NIOSSLContext
    let admission: ConnectionAdmission

    var responder: Responder { http1.responder }

    /// `http1` must not admit connections itself (its `admitsConnections` is `false`): this channel
    /// does, with its `admission`, before the handshake. Each HTTP/2 stream keeps `http1`'s body pace.
    init(http1: PushServerChannel, idleTimeout: Duration, tls: TLSConfiguration) throws {
        var tls = tls
        tls.applicationProtocols = NIOHTTP2SupportedALPNProtocols
        context = try NIOSSLContext(configuration: tls)
        self.http1 = http1
        admission = http1.admission
        let (pace, admission) = (http1.pace, http1.admission)
        http2 = HTTP2Channel(
            responder: http1.responder,
            configuration: HTTP2ChannelConfiguration(
                idleTimeout: idleTimeout,
                // A client that keeps a stream open past a stop's GOAWAY cannot hold the stop.
                gracefulCloseTimeout: .seconds(10),
                streamConfiguration: HTTP1Channel.Configuration(
                    additionalChannelHandlers: [
                        DroppingConnectionHeader(), BodyPaceHandler(pace: pace, admission: admission),
                    ],
                    idleTimeout: TimeAmount(idleTimeout))))
    }

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        channel.eventLoop.makeCompletedFuture {
            guard admission.admit(channel) else {
                channel.close(promise: nil)
                return Value(negotiated: channel.eventLoop.makeSucceededFuture(.http2(nil)), channel: channel)
            }
            try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context))
            // The handshake must finish within the head deadline.
            let handshakeDeadline = channel.eventLoop.scheduleTask(in: http1.requestHeadTimeout) {
                channel.close(promise: nil)
            }
            channel.closeFuture.whenComplete { _ in handshakeDeadline.cancel() }
            let negotiation = NIOTypedApplicationProtocolNegotiationHandler<Negotiated> { result in
                handshakeDeadline.cancel()
                switch result {
                case .negotiated("h2"): return http2.setup(channel: channel, logger: logger).map { .http2($0) }
                default: return http1.setup(channel: channel, logger: logger).map { .http1_1($0) }
                }
            }
            try channel.pipeline.syncOperations.addHandler(negotiation)
            return Value(negotiated: negotiation.protocolNegotiationResult, channel: channel)
        }
    }

    func handle(value: Value, logger: Logger) async {
        do {
            switch try await value.negotiated.get() {
            case .http1_1(let connection): await http1.handle(value: connection, logger: logger)
            case .http2(let connection?): await http2.handle(value: connection, logger: logger)
            case .http2(nil): return  // refused past a cap, already closed
            }
        } catch {
            logger.debug("TLS negotiation failed", metadata: ["error": "\(error)"])
        }
    }
}

/// Drops `Connection` from answers on HTTP/2 streams, where connection-specific header fields are
/// forbidden (RFC 9113 §8.2.2): the answers that close an HTTP/1.1 connection say so with it.
private final class DroppingConnectionHeader: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard case .head(var head) = unwrapOutboundIn(data), head.headerFields[.connection] != nil else {
            return context.write(data, promise: promise)
        }
        head.headerFields[.connection] = nil
        context.write(wrapOutboundOut(.head(head)), promise: promise)
    }
}
