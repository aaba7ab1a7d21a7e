#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Hummingbird
import NIOCore
import StratusModel

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
    /// The user whose web auth token (`ckWebAuthToken`) came with the request, or the user of the
    /// server-to-server key that signed it.
    var userRecordName: String?
    /// The server-to-server key that signed the request, if one did.
    var serverKeyID: String?

    /// The network of the client's address, which the per-address limits count against: an IPv4
    /// address itself, an IPv6 address's /64 (one host usually has a whole /64 to choose from).
    var network: String { Self.network(of: address) }

    /// The network of `address` (an IPv4 address, or an IPv6 address without an IPv4 one mapped
    /// into it): the IPv4 address itself, an IPv6 address's /64.
    static func network(of address: String) -> String {
        var bytes = [UInt8](repeating: 0, count: 16)
        guard address.contains(":"), inet_pton(AF_INET6, address, &bytes) == 1 else { return address }
        return bytes.prefix(8).hexDigits + "::/64"
    }

    /// What the rate limit counts against: the signed-in user, else the app's container from this
    /// network, else the network.
    var rateLimitKey: String {
        if let container {
            if let userRecordName { return "user:\(container)/\(userRecordName)" }
            return "app:\(container)@\(network)"
        }
        return "address:\(network)"
    }
}
