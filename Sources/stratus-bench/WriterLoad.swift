import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix

/// The writers of the batched-write workload: keep-alive HTTP/1.1 connections on NIO's event loops,
/// each sending its next request as soon as the last answer ended, with nothing in between (no task
/// per request, no connection pool). The server shares the machine's two cores with its writers, and
/// AsyncHTTPClient, a general-purpose client, took about a fifth of them at 64 writers: as clients
/// on other machines would, these leave the cores to the server.
///
/// Every answer must be `200 OK` without a `serverErrorCode` (a record the server refused).
final class WriterLoad: Sendable {
    private let channels: [any Channel]

    private init(channels: [any Channel]) {
        self.channels = channels
    }

    /// Opens `connections` connections to `host`:`port`.
    static func connect(host: String, port: Int, connections: Int) async throws -> WriterLoad {
        var channels: [any Channel] = []
        for _ in 0..<connections {
            let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .channelOption(.socketOption(.tcp_nodelay), value: 1)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHTTPClientHandlers()
                        try channel.pipeline.syncOperations.addHandler(WriterHandler(host: host))
                    }
                }
                .connect(host: host, port: port).get()
            channels.append(channel)
        }
        return WriterLoad(channels: channels)
    }

    /// POSTs each of `bodies` to `path` (with its query), each once, over every connection at once;
    /// answers how long each request took from its first byte sent to its answer's last received, in
    /// seconds.
    func post(_ bodies: ArraySlice<[UInt8]>, to path: String) async throws -> [Double] {
        let queue = BodyQueue(bodies)
        // A closed connection's handlers are gone: a run started on it would never end.
        guard channels.allSatisfy(\.isActive) else { throw BenchError("the server closed a writer's connection") }
        let futures = channels.map { channel in
            let promise = channel.eventLoop.makePromise(of: [Double].self)
            channel.pipeline.fireUserInboundEventTriggered(WriterHandler.Start(path: path, queue: queue, done: promise))
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

/// The bodies a run sends, taken in order by whichever connection is free.
private final class BodyQueue: Sendable {
    private let bodies: ArraySlice<[UInt8]>
    private let next: NIOLockedValueBox<Int>

    init(_ bodies: ArraySlice<[UInt8]>) {
        self.bodies = bodies
        next = NIOLockedValueBox(bodies.startIndex)
    }

    func take() -> [UInt8]? {
        next.withLockedValue { index in
            guard index < bodies.endIndex else { return nil }
            defer { index += 1 }
            return bodies[index]
        }
    }
}

/// One connection of ``WriterLoad``: on a `Start` event it sends requests one after another until the
/// queue is empty, then fulfils the run's promise with their latencies.
private final class WriterHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundOut = HTTPClientRequestPart

    /// Starts a run on this connection.
    struct Start: Sendable {
        let path: String
        let queue: BodyQueue
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
        sendNext(context: context)
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
            let text = Array(answer.readableBytesView)
            guard status == .ok, occurrences(of: "serverErrorCode", in: text).isEmpty else {
                return finish(with: .failure(BenchError("a write failed: HTTP \(status.code) \(String(decoding: text.prefix(300), as: UTF8.self))")))
            }
            sendNext(context: context)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        finish(with: .failure(error))
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        finish(with: .failure(BenchError("the server closed a writer's connection")))
    }

    private func sendNext(context: ChannelHandlerContext) {
        guard let run else { return }
        guard let body = run.queue.take() else { return finish(with: .success(latencies)) }
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
