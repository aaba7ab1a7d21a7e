package import Hummingbird
package import NIOCore
import StratusModel


/// The context of every Stratus request: Hummingbird's, the address the request came from, and
/// what ``AuthenticationMiddleware`` verified of its credentials.
package struct StratusRequestContext: RequestContext, RemoteAddressRequestContext {
    /// Hummingbird's part: logger, route parameters, endpoint path.
    package var coreContext: CoreRequestContextStorage
    /// The peer of the connection (a proxy's address when the server is behind one).
    package let remoteAddress: SocketAddress?
    /// The caller as verified by ``AuthenticationMiddleware``; nothing verified until it runs.
    var caller = VerifiedCaller()
    /// The connection the request came on.
    let channel: any Channel
    /// The request's ID, and what the request log and the metrics learn of it while it is handled.
    let trace = RequestTrace()

    /// Creates the context of a request arriving on `source`'s channel.
    package init(source: ApplicationRequestContextSource) {
        coreContext = CoreRequestContextStorage(source: source)
        remoteAddress = source.channel.remoteAddress
        channel = source.channel
    }

    /// `body`, after which the connection closes: for an answer that refuses a request body unread,
    /// so that the server does not read on through what the client announced.
    func closingConnection(after body: ResponseBody) -> ResponseBody {
        let channel = channel
        return ResponseBody(contentLength: body.contentLength) { writer in
            let answer = body
            try await answer.write(writer)
            channel.close(promise: nil)
        }
    }
}
