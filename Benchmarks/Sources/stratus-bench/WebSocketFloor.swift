import ArgumentParser
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOWebSocket
import Synchronization

/// The floor of push delivery: a WebSocket server with nothing of Stratus in it, built the way
/// Stratus serves its push channel (plain NIO handlers on the connections' event loops).
/// `POST /broadcast` puts one text frame, the size of a Stratus notification, on every connected
/// socket: no storage, no subscription matching, no queue per device, no authentication. The
/// benchmark runs it as a child process, like the Stratus server, and measures both the same way.
struct WebSocketFloor: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "websocket-floor", abstract: "Run the raw WebSocket broadcast server the push workload compares with.",
        shouldDisplay: false)

    /// A frame about as long as a Stratus zone notification.
    static let frame = ByteBuffer(string: """
        {"type":"notification","notification":{"notificationID":"5F0C2F9E-2C69-4E4E-8B8A-3C6D0E1F2A3B","notificationType":\
        "recordZone","subscriptionID":"zone","containerIdentifier":"iCloud.com.example.stratus","databaseScope":"private",\
        "zoneID":{"zoneName":"Bench","ownerRecordName":"_2b7e1516a8f04c1d9e3b5a6c7d8e9f01","zoneType":"REGULAR_CUSTOM_ZONE"}}}
        """)

    func run() async throws {
        let sockets = Sockets()
        let upgrader = NIOWebSocketServerUpgrader(
            shouldUpgrade: { channel, _ in channel.eventLoop.makeSucceededFuture(HTTPHeaders()) },
            upgradePipelineHandler: { channel, _ in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(Socket(sockets: sockets))
                }
            })
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .serverChannelOption(.backlog, value: 4096)
            .childChannelInitializer { channel in
                channel.pipeline.configureHTTPServerPipeline(
                    withServerUpgrade: (upgraders: [upgrader], completionHandler: { _ in })
                ).flatMap { channel.pipeline.addHandler(Broadcast(sockets: sockets)) }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        // Unbuffered: the benchmark reads this line from a pipe.
        FileHandle.standardOutput.write(Data("listening at http://127.0.0.1:\(server.localAddress?.port ?? 0)\n".utf8))
        try await server.closeFuture.get()
    }

    /// The connected sockets, each reached on its own event loop.
    final class Sockets: Sendable {
        private let byID = Mutex<(next: Int, sockets: [Int: NIOLoopBound<Socket>])>((0, [:]))

        func add(_ socket: NIOLoopBound<Socket>) -> Int {
            byID.withLock { state in
                state.next += 1
                state.sockets[state.next] = socket
                return state.next
            }
        }

        func remove(_ id: Int) { _ = byID.withLock { $0.sockets.removeValue(forKey: id) } }

        func broadcast() {
            for socket in byID.withLock({ Array($0.sockets.values) }) {
                socket.eventLoop.execute { socket.value.send() }
            }
        }
    }

    /// One WebSocket: writes broadcasts, answers pings.
    final class Socket: ChannelInboundHandler {
        typealias InboundIn = WebSocketFrame
        typealias OutboundOut = WebSocketFrame

        let sockets: Sockets
        private var context: ChannelHandlerContext?
        private var id = 0

        init(sockets: Sockets) { self.sockets = sockets }

        func handlerAdded(context: ChannelHandlerContext) {
            self.context = context
            id = sockets.add(NIOLoopBound(self, eventLoop: context.eventLoop))
        }

        func channelInactive(context: ChannelHandlerContext) {
            sockets.remove(id)
            self.context = nil
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let frame = unwrapInboundIn(data)
            if frame.opcode == .ping {
                context.writeAndFlush(
                    wrapOutboundOut(WebSocketFrame(fin: true, opcode: .pong, data: frame.unmaskedData)), promise: nil)
            } else if frame.opcode == .connectionClose {
                context.close(promise: nil)
            }
        }

        func send() {
            context?.writeAndFlush(
                wrapOutboundOut(WebSocketFrame(fin: true, opcode: .text, data: WebSocketFloor.frame)), promise: nil)
        }
    }

    /// `POST /broadcast`: broadcasts and answers 200.
    final class Broadcast: ChannelInboundHandler, RemovableChannelHandler {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart

        let sockets: Sockets

        init(sockets: Sockets) { self.sockets = sockets }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            guard case .end = unwrapInboundIn(data) else { return }
            sockets.broadcast()
            let head = HTTPResponseHead(version: .http1_1, status: .ok, headers: ["Content-Length": "0"])
            context.write(wrapOutboundOut(.head(head)), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        }
    }
}
