public import Hummingbird
public import NIOCore
public import StratusModel


/// The context of every Stratus request: Hummingbird's, the address the request came from, and
/// what ``AuthenticationMiddleware`` verified of its credentials.
public struct StratusRequestContext: RequestContext, RemoteAddressRequestContext {
    /// Hummingbird's part: logger, route parameters, endpoint path.
    public var coreContext: CoreRequestContextStorage
    /// The peer of the connection (a proxy's address when the server is behind one).
    public let remoteAddress: SocketAddress?
    /// The caller as verified by ``AuthenticationMiddleware``; nothing verified until it runs.
    var caller = VerifiedCaller()

    /// Creates the context of a request arriving on `source`'s channel.
    public init(source: ApplicationRequestContextSource) {
        coreContext = CoreRequestContextStorage(source: source)
        remoteAddress = source.channel.remoteAddress
    }
}

/// Who a request comes from, as far as the server has verified it. Nothing here is taken from the
/// request unchecked: a token that fails its check never gets this far.
struct VerifiedCaller: Sendable, Hashable {
    /// The client's address: the connection's peer, or the address a trusted proxy forwarded.
    var address = "unknown"
    /// The container whose API token (`ckAPIToken`) came with the request; the path names it too.
    var container: String?
    /// The environment the path names, when it names one.
    var environment: ContainerEnvironment?
    /// The database the path names, when it names one.
    var scope: DatabaseScope?
    /// The user whose web auth token (`ckWebAuthToken`) came with the request.
    var userRecordName: String?

    /// What the rate limit counts against: the signed-in user, else the app's container from this
    /// address, else the address.
    var rateLimitKey: String {
        if let container {
            if let userRecordName { return "user:\(container)/\(userRecordName)" }
            return "app:\(container)@\(address)"
        }
        return "address:\(address)"
    }
}
