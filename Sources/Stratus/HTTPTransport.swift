public import NIOCore
public import NIOHTTP1

/// What carries the SDK's requests to the server when the app supplies it
/// (``Container/Configuration/httpTransport``): otherwise an HTTP client over the network does. A
/// test hands requests to a server running in the same process instead (StratusTestSupport's
/// `InProcessHTTPTransport`), through the same router, middleware and storage as over a socket,
/// with no port, no connection and no wall-clock wait. The push channel then long-polls through
/// it, since a WebSocket needs a connection.
public protocol HTTPTransport: Sendable {
    /// Sends `request` and returns the server's whole answer. Throws what a socket would when the
    /// server cannot be reached (NIO's `IOError` with `ECONNREFUSED` when nothing serves the
    /// address), which the SDK retries as it retries a network failure.
    func send(_ request: HTTPTransportRequest) async throws -> HTTPTransportResponse
}

/// A request the SDK sends through an ``HTTPTransport``.
public struct HTTPTransportRequest: Sendable {
    /// The method.
    public var method: HTTPMethod
    /// The absolute URL, query included.
    public var url: String
    /// The headers, the SDK's device ID among them.
    public var headers: HTTPHeaders
    /// The body; `nil` for none.
    public var body: ByteBuffer?

    /// A request of `method` to `url`.
    public init(method: HTTPMethod, url: String, headers: HTTPHeaders = [:], body: ByteBuffer? = nil) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
    }
}

/// The server's answer to an ``HTTPTransportRequest``.
public struct HTTPTransportResponse: Sendable {
    /// The status code.
    public var status: Int
    /// The headers.
    public var headers: HTTPHeaders
    /// The whole body.
    public var body: ByteBuffer

    /// An answer with `status`, `headers` and `body`.
    public init(status: Int, headers: HTTPHeaders = [:], body: ByteBuffer = ByteBuffer()) {
        self.status = status
        self.headers = headers
        self.body = body
    }
}
