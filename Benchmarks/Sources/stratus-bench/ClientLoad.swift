import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix

/// The benches' HTTP clients where the client's own work must stay out of the measure (the batched
/// writers, the change-feed reader): keep-alive HTTP/1.1 connections on NIO's event loops, each
/// sending its next request as soon as the last answer ended, with nothing in between (no task per
/// request, no connection pool). The server shares the machine's two cores with its clients, and
/// AsyncHTTPClient, a general-purpose client, took about a fifth of them at 64 writers and an eighth
/// of a feed read: as clients on other machines would, these leave the cores to the server.
///
/// Every answer must be `200 OK`; what a request is, and what else an answer must hold, is the
/// ``RequestSource``'s.
final class ClientLoad: Sendable {
    private let channels: [any Channel]

    private init(channels: [any Channel]) {
        self.channels = channels
    }

    /// Opens `connections` connections to `host`:`port`.
    static func connect(host: String, port: Int, connections: Int) async throws -> ClientLoad {
        var channels: [any Channel] = []
        for _ in 0..<connections {
            let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .channelOption(.socketOption(.tcp_nodelay), value: 1)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHTTPClientHandlers()
                        try channel.pipeline.syncOperations.addHandler(RequestLoopHandler(host: host))
                    }
                }
                .connect(host: host, port: port).get()
            channels.append(channel)
        }
        return ClientLoad(channels: channels)
    }

    /// POSTs the bodies `source` gives to `path` (with its query), over every connection at once, until
    /// it gives no more; answers how long each request took from its first byte sent to its answer's
    /// last received, in seconds.
    func run(_ source: some RequestSource, to path: String) async throws -> [Double] {
        // A closed connection's handlers are gone: a run started on it would never end.
        guard channels.allSatisfy(\.isActive) else { throw BenchError("the server closed a client's connection") }
        let futures = channels.map { channel in
            let promise = channel.eventLoop.makePromise(of: [Double].self)
            channel.pipeline.fireUserInboundEventTriggered(
                RequestLoopHandler.Start(path: path, source: source, done: promise))
            return promise.futureResult
        }
        var latencies: [Double] = []
        for future in futures { latencies += try await future.get() }
        return latencies
    }

    func close() async {
        for channel in channels { try? await channel.close() }
    }
}

/// The requests of a ``ClientLoad`` run. It is asked on the connections' event loops, by every
/// connection of the run.
protocol RequestSource: Sendable {
    /// The body of a connection's next request, given the answer to its last (`nil` for its first);
    /// `nil` when the connection is done. Throws when the answer is not what the workload expects.
    func next(after answer: ByteBuffer?) throws -> [UInt8]?
}

/// Bodies sent each once, in order, by whichever connection is free; every answer must be free of
/// `serverErrorCode` (a record the server refused).
final class BodyQueue: RequestSource {
    private let bodies: ArraySlice<[UInt8]>
    private let next: NIOLockedValueBox<Int>

    init(_ bodies: ArraySlice<[UInt8]>) {
        self.bodies = bodies
        next = NIOLockedValueBox(bodies.startIndex)
    }

    func next(after answer: ByteBuffer?) throws -> [UInt8]? {
        if let answer, !answer.withUnsafeReadableBytes({ occurrences(of: "serverErrorCode", in: $0) }).isEmpty {
            throw BenchError("a write failed: \(String(buffer: answer).prefix(300))")
        }
        return next.withLockedValue { index in
            guard index < bodies.endIndex else { return nil }
            defer { index += 1 }
            return bodies[index]
        }
    }
}

/// A whole `records/changes` feed of one zone, read page after page by one connection, each request
/// carrying the token of the page before; counts the records read.
final class FeedWalk: RequestSource {
    private struct State {
        var token: String?
        var records = 0
    }

    private let zoneName: String
    private let resultsLimit: Int
    private let state = NIOLockedValueBox(State())

    init(zoneName: String, resultsLimit: Int) {
        self.zoneName = zoneName
        self.resultsLimit = resultsLimit
    }

    /// The records the pages listed.
    var records: Int { state.withLockedValue(\.records) }

    func next(after answer: ByteBuffer?) throws -> [UInt8]? {
        try state.withLockedValue { state in
            if let answer {
                let summary = FeedPageSummary(answer)
                state.records += summary.records
                guard summary.moreComing else { return nil }
                state.token = summary.syncToken
            } else if state.token != nil {
                throw BenchError("a feed walk is read once, by one connection")
            }
            var body = #"{"zoneID":{"zoneName":"\#(zoneName)"},"resultsLimit":\#(resultsLimit)"#
            if let token = state.token { body += #","syncToken":"\#(token)""# }
            return Array((body + "}").utf8)
        }
    }
}

/// One connection of ``ClientLoad``: on a `Start` event it sends the source's requests one after
/// another until the source gives no more, then fulfils the run's promise with their latencies.
private final class RequestLoopHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundOut = HTTPClientRequestPart

    /// Starts a run on this connection.
    struct Start: Sendable {
        let path: String
        let source: any RequestSource
        let done: EventLoopPromise<[Double]>
    }

    private let host: String
    private var run: Start?
    private var latencies: [Double] = []
    private var sentAt = NIODeadline.now()
    private var status = HTTPResponseStatus.ok
    private var answer = ByteBuffer()

    init(host: String) {
        self.host = host
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard let start = event as? Start else { return context.fireUserInboundEventTriggered(event) }
        run = start
        latencies = []
        sendNext(after: nil, context: context)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            status = head.status
            answer.clear()
        case .body(var bytes):
            answer.writeBuffer(&bytes)
        case .end:
            latencies.append(Double((NIODeadline.now() - sentAt).nanoseconds) / 1e9)
            guard status == .ok else {
                return finish(with: .failure(BenchError("HTTP \(status.code) \(String(buffer: answer).prefix(300))")))
            }
            sendNext(after: answer, context: context)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        finish(with: .failure(error))
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        finish(with: .failure(BenchError("the server closed a client's connection")))
    }

    private func sendNext(after answer: ByteBuffer?, context: ChannelHandlerContext) {
        guard let run else { return }
        let body: [UInt8]
        do {
            guard let next = try run.source.next(after: answer) else { return finish(with: .success(latencies)) }
            body = next
        } catch {
            return finish(with: .failure(error))
        }
        var head = HTTPRequestHead(version: .http1_1, method: .POST, uri: run.path)
        head.headers.add(name: "Host", value: host)
        head.headers.add(name: "Content-Type", value: "application/json")
        head.headers.add(name: "Content-Length", value: String(body.count))
        sentAt = .now()
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: body)))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    }

    private func finish(with result: Result<[Double], any Error>) {
        guard let run else { return }
        self.run = nil
        run.done.completeWith(result)
    }
}
