public import Hummingbird
public import NIOCore
import StratusModel


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
