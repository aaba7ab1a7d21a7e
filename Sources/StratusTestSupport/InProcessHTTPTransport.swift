package import Foundation
import HTTPTypes
import Hummingbird
package import Logging
import NIOCore
import NIOEmbedded
import NIOHTTP1
package import Stratus
package import StratusServer
import Synchronization

/// Hands the SDK's requests to a server running in this process: each goes through the server's
/// real router, middleware and storage as it would over a socket (authentication, authorization,
/// limits, errors), with no port, no connection and no network wait. A container configured with it
/// (``TestServer/makeContainer(device:session:retryPolicy:logger:clock:serverURL:inProcess:)``, or every
/// container of a server started with `clientsInProcess`)
/// long-polls for notifications through it. What only a connection has (WebSockets, TLS, the
/// admission and pace of connections) is tested over sockets.
///
/// A request goes to the server serving the URL's port in this process now (``serve(port:with:)``):
/// after that server stopped, it fails as a refused connection does, and a server restarted on
/// the same port answers it, as over the network.
package struct InProcessHTTPTransport: HTTPTransport {
    private let logger: Logger

    package init(logger: Logger) {
        self.logger = logger
    }

    /// The servers answering in this process, by the port they listen on, each with its server's ID.
    private static let servers = Mutex<[Int: (server: UUID, respond: StratusServerService.InProcessResponder)]>([:])

    /// Makes `respond`, of the server `server`, answer the requests to `port` until
    /// ``stopServing(port:server:)``.
    package static func serve(port: Int, server: UUID, with respond: @escaping StratusServerService.InProcessResponder) {
        servers.withLock { $0[port] = (server, respond) }
    }

    /// Requests to `port` fail as a refused connection does from now on, unless another server
    /// serves the port already (a server stopped twice must not stop the one that took its port).
    package static func stopServing(port: Int, server: UUID) {
        servers.withLock { servers in
            if servers[port]?.server == server { servers[port] = nil }
        }
    }

    package func send(_ request: HTTPTransportRequest) async throws -> HTTPTransportResponse {
        guard let url = URLComponents(string: request.url), let method = HTTPRequest.Method(request.method.rawValue) else {
            throw CloudError(.invalidArguments, "\(request.method) \(request.url) is not a request a server could read")
        }
        guard let respond = Self.servers.withLock({ servers in url.port.flatMap { servers[$0]?.respond } }) else {
            // What a socket reports when nothing listens: the SDK retries it as a network failure.
            throw IOError(errnoCode: ECONNREFUSED, reason: "connect")
        }
        var fields = HTTPFields()
        for header in request.headers {
            guard let name = HTTPField.Name(header.name) else { continue }
            fields.append(HTTPField(name: name, value: header.value))
        }
        let body = request.body ?? ByteBuffer()
        if request.body != nil { fields[.contentLength] = String(body.readableBytes) }
        let path = (url.percentEncodedPath.isEmpty ? "/" : url.percentEncodedPath)
            + (url.percentEncodedQuery.map { "?" + $0 } ?? "")
        let head = HTTPRequest(
            method: method, scheme: url.scheme ?? "http", authority: (url.host ?? "localhost") + (url.port.map { ":\($0)" } ?? ""),
            path: path, headerFields: fields)
        let context = StratusRequestContext(
            source: ApplicationRequestContextSource(channel: NIOAsyncTestingChannel(), logger: logger))
        let response = try await respond(Request(head: head, body: RequestBody(buffer: body)), context)
        let collected = CollectedBody()
        try await response.body.write(CollectingWriter(body: collected))
        var headers = HTTPHeaders()
        for field in response.headers { headers.add(name: field.name.rawName, value: field.value) }
        return HTTPTransportResponse(status: response.status.code, headers: headers, body: collected.buffer.withLock { $0 })
    }
}

/// The bytes of an answer, as its body writes them.
private final class CollectedBody: Sendable {
    let buffer = Mutex(ByteBuffer())
}

/// Writes an answer's body into a ``CollectedBody``.
private struct CollectingWriter: ResponseBodyWriter {
    let body: CollectedBody

    mutating func write(_ buffer: ByteBuffer) async throws {
        var buffer = buffer
        body.buffer.withLock { $0.writeBuffer(&buffer) }
    }

    consuming func finish(_ trailingHeaders: HTTPFields?) async throws {}
}
