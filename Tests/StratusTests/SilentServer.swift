import Foundation
import NIOCore
import NIOPosix
import Synchronization

/// A TCP server on a loopback port that reads each HTTP request and closes the connection without
/// answering: a server that may have applied a request whose answer was lost. It counts the
/// requests it swallowed. Built on NIO, so it runs wherever the package does.
final class SilentServer: Sendable {
    let port: Int
    private let channel: any Channel
    private let received: Counter

    /// Requests read so far.
    var requestCount: Int { received.value }

    private final class Counter: Sendable {
        private let count = Mutex(0)
        var value: Int { count.withLock { $0 } }
        func increment() { count.withLock { $0 += 1 } }
    }

    /// Reads a request's head and as much of its body as its `Content-Length` says, then closes.
    private final class Swallow: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        private var request: [UInt8] = []
        private let received: Counter

        init(received: Counter) {
            self.received = received
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            request += Self.unwrapInboundIn(data).readableBytesView
            let text = String(decoding: request, as: UTF8.self)
            guard let headEnd = text.range(of: "\r\n\r\n") else { return }
            let length = text.split(separator: "\r\n")
                .first { $0.lowercased().hasPrefix("content-length:") }
                .flatMap { Int($0.split(separator: ":")[1].filter { !$0.isWhitespace }) } ?? 0
            guard text.utf8.distance(from: text.utf8.startIndex, to: headEnd.upperBound) + length <= request.count else {
                return
            }
            received.increment()
            context.close(promise: nil)
        }
    }

    private init(port: Int, channel: any Channel, received: Counter) {
        self.port = port
        self.channel = channel
        self.received = received
    }

    /// Starts listening on a free loopback port.
    static func start() async throws -> SilentServer {
        let received = Counter()
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(Swallow(received: received))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return SilentServer(port: channel.localAddress?.port ?? 0, channel: channel, received: received)
    }

    /// Stops listening.
    func stop() async throws {
        try await channel.close()
    }
}
