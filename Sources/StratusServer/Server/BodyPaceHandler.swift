import HTTPTypes
import NIOCore
import NIOHTTPTypes
import StratusModel

/// Holds each request body of a connection (or of an HTTP/2 stream) to its ``RequestBodyPace`` and
/// its network to its share of bodies under way, and closes a connection whose request was answered
/// before its body arrived instead of reading the rest.
///
/// It sits between the HTTP codec and the server's handling of requests:
/// - A request head that announces a body takes a slot of its network (``ConnectionAdmission``);
///   without one it is answered `503 TRY_AGAIN_LATER` here, never reaching a handler.
/// - While the body arrives, the time the server spends waiting for it is counted (from a read asked
///   for to the data read), and a body that falls behind the pace closes the connection.
/// - An answer that ends before the request's body did (an error, most often) says
///   `Connection: close`, and the connection closes once it is written: over HTTP/1 its output is
///   shut first and what the client still sends is dropped for at most ``lingerTime``, so that the
///   client reads the answer instead of a reset; an HTTP/2 stream is reset (RFC 9113 §8.1).
final class BodyPaceHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    /// How long an HTTP/1 connection answered before its body ended drops what still comes before closing.
    static let lingerTime = TimeAmount.seconds(2)
    /// How often a body under way is checked against the pace.
    static let checkInterval = TimeAmount.milliseconds(500)

    private struct Body {
        /// The network's slot, when one was taken.
        var holdsSlot: Bool
        var received = 0
        /// Time the server spent waiting for the client, not counting the read asked for now.
        var waited = TimeAmount.zero
        /// When the read the server is waiting for was asked for.
        var waitingSince: NIODeadline?
        var check: Scheduled<Void>?
    }

    private let pace: RequestBodyPace
    private let admission: ConnectionAdmission
    /// Whether the channel is an HTTP/1 connection (shut and lingered) rather than an HTTP/2 stream.
    private let lingers: Bool
    private var network = ""
    private var unlimited = false
    /// The request whose body is arriving.
    private var body: Body?
    /// Whether the answer to the current request began before its body ended.
    private var answeredEarly = false
    /// Whether what arrives is dropped: the request was refused or answered, and the connection closes.
    private var dropping = false

    init(pace: RequestBodyPace, admission: ConnectionAdmission, lingers: Bool) {
        self.pace = pace
        self.admission = admission
        self.lingers = lingers
    }

    func handlerAdded(context: ChannelHandlerContext) {
        // An HTTP/2 stream's remote address is its connection's.
        network = ConnectionAdmission.network(of: context.channel)
        unlimited = admission.isUnlimited(context.channel)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        endBody()
    }

    // MARK: Inbound

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !dropping else { return }
        switch unwrapInboundIn(data) {
        case .head(let head):
            answeredEarly = false
            if Self.announcesBody(head) {
                guard admission.beginBody(from: network, unlimited: unlimited) else {
                    refuse(context)
                    return
                }
                beginBody(context, holdsSlot: true)
            }
        case .body(let bytes):
            if body == nil {
                // An HTTP/2 request need not announce its body.
                beginBody(context, holdsSlot: admission.beginBody(from: network, unlimited: unlimited))
            }
            body?.received += bytes.readableBytes
        case .end:
            endBody()
        }
        context.fireChannelRead(data)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if var waiting = body, let since = waiting.waitingSince {
            waiting.waited = waiting.waited + (.now() - since)
            waiting.waitingSince = nil
            body = waiting
        }
        context.fireChannelReadComplete()
    }

    func read(context: ChannelHandlerContext) {
        if body != nil, body?.waitingSince == nil { body?.waitingSince = .now() }
        context.read()
    }

    // MARK: Outbound

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(var response) where body != nil:
            // Answered before the body ended: the rest will not be read.
            answeredEarly = true
            endBody()
            response.headerFields[.connection] = "close"
            context.write(wrapOutboundOut(.head(response)), promise: promise)
        case .end where answeredEarly:
            let written = context.eventLoop.makePromise(of: Void.self)
            written.futureResult.assumeIsolated().whenComplete { [self] _ in closeAfterAnswer(context) }
            promise?.completeWith(written.futureResult)
            context.write(data, promise: written)
        default:
            context.write(data, promise: promise)
        }
    }

    // MARK: Bodies

    /// Whether an HTTP/1 head says a body follows (HTTP/2 bodies are noticed as they come).
    private static func announcesBody(_ head: HTTPRequest) -> Bool {
        if head.headerFields[.transferEncoding] != nil { return true }
        return (head.headerFields[.contentLength].flatMap(Int.init) ?? 0) > 0
    }

    private func beginBody(_ context: ChannelHandlerContext, holdsSlot: Bool) {
        body = Body(holdsSlot: holdsSlot)
        scheduleCheck(context)
    }

    private func scheduleCheck(_ context: ChannelHandlerContext) {
        body?.check = context.eventLoop.assumeIsolated().scheduleTask(in: Self.checkInterval) { [self] in
            guard let body else { return }
            let waited = body.waited + (body.waitingSince.map { .now() - $0 } ?? .zero)
            if pace.isBehind(received: body.received, waited: Duration(waited)) {
                admission.shedSlowBody()
                endBody()
                dropping = true
                context.close(promise: nil)
            } else {
                scheduleCheck(context)
            }
        }
    }

    /// The body ended, or will not be read further: its slot and its check go.
    private func endBody() {
        guard let ended = body else { return }
        body = nil
        ended.check?.cancel()
        if ended.holdsSlot { admission.endBody(from: network) }
    }

    /// Answers a request past its network's share of bodies with `503`, and closes the connection.
    private func refuse(_ context: ChannelHandlerContext) {
        var writer = JSONWriter()
        ErrorDictionary(
            serverErrorCode: .tryAgainLater,
            reason: "too many requests from your network are sending their bodies at once; retry after the retryAfter seconds",
            retryAfter: 1, uuid: RequestTrace.nextID()
        ).write(to: &writer)
        let bytes = writer.bytes
        let head = HTTPResponse(
            status: .serviceUnavailable,
            headerFields: [
                .contentType: "application/json; charset=utf-8", .contentLength: String(bytes.count), .retryAfter: "1",
                .connection: "close",
            ])
        answeredEarly = true
        dropping = true
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(ByteBuffer(bytes: bytes))), promise: nil)
        // Through this handler's own write, which closes the connection once the answer is out.
        write(context: context, data: wrapOutboundOut(.end(nil)), promise: nil)
        context.flush()
    }

    /// Closes the connection once an answer that came before the end of its request's body is
    /// written: an HTTP/1 connection shuts its output and drops what still comes for a while, so the
    /// client reads the answer before the connection goes; an HTTP/2 stream closes at once.
    private func closeAfterAnswer(_ context: ChannelHandlerContext) {
        dropping = true
        guard lingers else {
            context.close(promise: nil)
            return
        }
        let channel = context.channel
        let shut = context.eventLoop.makePromise(of: Void.self)
        shut.futureResult.whenFailure { _ in channel.close(promise: nil) }
        context.close(mode: .output, promise: shut)
        context.eventLoop.scheduleTask(in: Self.lingerTime) { channel.close(promise: nil) }
    }
}
