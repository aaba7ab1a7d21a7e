import HTTPTypes
import NIOCore
import NIOHTTPTypes
import StratusModel

/// Holds each request body of a connection (or of an HTTP/2 stream) to its ``RequestBodyPace`` and
/// its network to its share of bodies under way, and bounds what the server reads of a body it
/// answered before it arrived.
///
/// It sits between the HTTP codec and the server's handling of requests:
/// - A request head that announces a body takes a slot of its network (``ConnectionAdmission``);
///   without one it is answered `503 TRY_AGAIN_LATER` here, never reaching a handler, and the
///   connection closes.
/// - While the body arrives, the time the server spends waiting for it is counted (from a read asked
///   for to the data read), and a body that falls behind the pace closes the connection.
/// - An answer that ends before its request's body (an error, most often) leaves the rest of the
///   body at most ``lingerTime`` to arrive, at its pace, read and dropped; then the connection
///   closes. A client that sends its body whole before it reads the answer (most HTTP clients do,
///   and closing under them loses the answer: measured with AsyncHTTPClient) keeps its connection;
///   one that trickles, or sends more than it can in that time, is closed instead of drained.
final class BodyPaceHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    /// How long the rest of a body answered early may take to arrive before the connection closes.
    static let lingerTime = TimeAmount.seconds(5)
    /// How often a body under way is checked against the pace.
    static let checkInterval = TimeAmount.milliseconds(500)

    /// A body under way, which holds a slot of its network.
    private struct Body {
        var received = 0
        /// Time the server spent waiting for the client, not counting the read asked for now.
        var waited = TimeAmount.zero
        /// When the read the server is waiting for was asked for.
        var waitingSince: NIODeadline?
        var check: Scheduled<Void>?
        /// When the request was answered before its body ended: the end of the time its rest has.
        var lingerDeadline: Scheduled<Void>?
        /// Which body of the connection this is, so that an answer's end finds its own body.
        var generation: Int
    }

    private let pace: RequestBodyPace
    private let admission: ConnectionAdmission
    private var network = ""
    private var unlimited = false
    /// The request whose body is arriving.
    private var body: Body?
    /// How many bodies the connection began.
    private var generations = 0
    /// A head that announced no body, until its end comes: an HTTP/2 request need not announce its
    /// body, so one whose end does not come with its head is taken to have one.
    private var headAwaitingEnd = false
    /// The body whose request was answered before it ended, while the answer is written.
    private var answeredEarly: Int?
    /// Whether this handler refused the current request itself: what arrives of it is dropped, and
    /// the connection closes once it has.
    private var refused = false

    init(pace: RequestBodyPace, admission: ConnectionAdmission) {
        self.pace = pace
        self.admission = admission
    }

    func handlerAdded(context: ChannelHandlerContext) {
        // An HTTP/2 stream's remote address is its connection's.
        (network, unlimited) = admission.client(of: context.channel)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        endBody()
    }

    // MARK: Inbound

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let part = unwrapInboundIn(data)
        if refused {
            if case .end = part { context.close(promise: nil) }
            return
        }
        switch part {
        case .head(let head):
            if Self.announcesBody(head) {
                guard admission.beginBody(from: network, unlimited: unlimited) else {
                    refuse(context)
                    return
                }
                beginBody(context)
            } else {
                headAwaitingEnd = true
            }
        case .body(let bytes):
            guard body != nil || beginUnannouncedBody(context) else { return }
            body?.received += bytes.readableBytes
        case .end:
            headAwaitingEnd = false
            endBody()
        }
        context.fireChannelRead(data)
    }

    /// Begins the body of a request whose head did not announce one; `false`, with the stream
    /// closed, when its network has no slot left (the head has reached a handler, so no answer is
    /// possible here).
    private func beginUnannouncedBody(_ context: ChannelHandlerContext) -> Bool {
        headAwaitingEnd = false
        guard admission.beginBody(from: network, unlimited: unlimited) else {
            refused = true
            context.close(promise: nil)
            return false
        }
        beginBody(context)
        return true
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        // A head whose end did not come with it: its body is under way, and keeps the pace from now.
        if headAwaitingEnd, body == nil, !beginUnannouncedBody(context) {
            // The head already went on: the read's end goes after it, so the handling sees both.
            context.fireChannelReadComplete()
            return
        }
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
        case .head where body != nil:
            answeredEarly = body?.generation
            context.write(data, promise: promise)
        case .end where answeredEarly != nil:
            let generation = answeredEarly!
            answeredEarly = nil
            let written = context.eventLoop.makePromise(of: Void.self)
            written.futureResult.assumeIsolated().whenComplete { [self] _ in lingerAfterAnswer(context, generation) }
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

    /// Begins a body that holds a slot of its network.
    private func beginBody(_ context: ChannelHandlerContext) {
        generations += 1
        body = Body(generation: generations)
        scheduleCheck(context)
    }

    private func scheduleCheck(_ context: ChannelHandlerContext) {
        body?.check = context.eventLoop.assumeIsolated().scheduleTask(in: Self.checkInterval) { [self] in
            guard let body else { return }
            let waited = body.waited + (body.waitingSince.map { .now() - $0 } ?? .zero)
            if pace.isBehind(received: body.received, waited: Duration(waited)) {
                admission.shedSlowBody()
                closeUnfinished(context)
            } else {
                scheduleCheck(context)
            }
        }
    }

    /// The body ended, or will not be read further: its slot and its timers go.
    private func endBody() {
        guard let ended = body else { return }
        body = nil
        ended.check?.cancel()
        ended.lingerDeadline?.cancel()
        admission.endBody(from: network)
    }

    /// Closes the connection (or stream) with its body unfinished.
    private func closeUnfinished(_ context: ChannelHandlerContext) {
        endBody()
        refused = true
        context.close(promise: nil)
    }

    /// The answer to a request whose body (of `generation`) had not ended is written: the rest of
    /// the body has ``lingerTime`` to arrive (the server's handling reads and drops it), or the
    /// connection closes. A body that ended meanwhile (another request's may have begun) is left be.
    private func lingerAfterAnswer(_ context: ChannelHandlerContext, _ generation: Int) {
        guard body?.generation == generation else { return }
        body?.lingerDeadline = context.eventLoop.assumeIsolated().scheduleTask(in: Self.lingerTime) { [self] in
            if body != nil { closeUnfinished(context) }
        }
    }

    /// Answers a request past its network's share of bodies with `503`; the connection closes once
    /// the rest of the request has come, or after ``lingerTime``.
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
        refused = true
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(ByteBuffer(bytes: bytes))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        let channel = context.channel
        context.eventLoop.scheduleTask(in: Self.lingerTime) { channel.close(promise: nil) }
    }
}
