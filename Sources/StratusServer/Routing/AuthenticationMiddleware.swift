import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import StratusModel
import StratusStorage

/// Verifies the credentials a request carries, once, before any handler runs, and then applies
/// the rate limit to the caller it verified.
///
/// On the routes of a container's apps (`/database/1/{container}/…`, `/auth/1/{container}/…`), a
/// `ckAPIToken` must be an API token of that container, the path's environment and database must
/// exist, and a `ckWebAuthToken` must be a live session of the container, in that order; a token
/// that fails is refused with `401 AUTHENTICATION_FAILED` on every such route, whether or not the
/// route needs it. What was verified goes into ``StratusRequestContext/caller``.
///
/// A request signed with a server-to-server key (``ServerKeySignature``) is authenticated by its
/// signature instead of `ckAPIToken`, and acts as the key's user; when it carries an API token as
/// well, both are verified, and a bad signature is refused whatever the token. An empty
/// `ckWebAuthToken`, or the literal `null` Apple's web library sends when nobody is signed in, counts
/// as absent.
///
/// The rate limit (``ServerConfiguration/rateLimit``) counts against what was verified, never
/// against what a request merely claims: the signed-in user, else the app's container from the
/// client's address, else the address. A request whose credentials fail is counted against its
/// address, so inventing tokens buys no fresh budget.
struct AuthenticationMiddleware: RouterMiddleware {
    typealias Context = StratusRequestContext

    let accounts: AccountService
    /// Console sessions, which call the database endpoints as a user they choose.
    let console: ConsoleSessions
    let limiter: RateLimiter?
    let trustedProxies: Set<String>
    /// The clock signed dates are compared with.
    let clock: ServerClock
    /// The largest body read to check a signature.
    let maxBodyBytes: Int

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        var request = request
        var context = context
        context.caller.address = clientAddress(request, peer: context.remoteAddress)
        let limited = !Self.unlimitedPaths.contains { request.uri.path.hasPrefix($0) }
        do {
            try await verify(&request, into: &context.caller, parameters: context.parameters, trace: context.trace)
        } catch {
            context.trace.identify(context.caller)
            if limited { try charge("address:\(context.caller.network)") }
            throw error
        }
        context.trace.identify(context.caller)
        if limited { try charge(context.caller.rateLimitKey) }
        return try await next(request, context)
    }

    /// Paths the rate limit leaves alone: the administrator's API (the admin token has its own
    /// backoff), health checks and the API description.
    static let unlimitedPaths = ["/admin/1/", "/health", "/openapi.json"]

    private func verify(
        _ request: inout Request, into caller: inout VerifiedCaller, parameters: Parameters, trace: RequestTrace
    ) async throws {
        // Other routes check their own credentials: the push URL, upload tickets, the admin token.
        let path = request.uri.path
        guard path.hasPrefix("/database/1/") || path.hasPrefix("/auth/1/") || path.hasPrefix("/device/1/"),
            let container = parameters.get("container")
        else { return }
        let query = request.uri.queryParameters
        let apiToken = query.nonEmpty("ckAPIToken")
        // The console calls the database endpoints without an API token, as the user it names.
        if path.hasPrefix("/database/1/"), apiToken == nil,
            request.headers[.cloudKitSignature] == nil, let session = console.verifiedSession(of: request)
        {
            caller.container = try await accounts.existingContainer(container)
            if let environment = parameters.get("environment") {
                caller.environment = try Authenticator.parse(ContainerEnvironment.self, environment, parameter: "environment")
            }
            if let database = parameters.get("database") {
                caller.scope = try Authenticator.parse(DatabaseScope.self, database, parameter: "database")
            }
            if let user = request.headers[.stratusConsoleUser], !user.isEmpty {
                caller.userRecordName = try await accounts.activeUser(container: container, recordName: user)
            }
            trace.act(as: "console session \(session.label)")
            return
        }
        if let apiToken {
            guard try await accounts.container(forAPIToken: apiToken) == container else {
                throw StratusError(.authenticationFailed, "ckAPIToken does not belong to container '\(container)'")
            }
            caller.container = container
        }
        if let environment = parameters.get("environment") {
            caller.environment = try Authenticator.parse(ContainerEnvironment.self, environment, parameter: "environment")
        }
        if let database = parameters.get("database") {
            caller.scope = try Authenticator.parse(DatabaseScope.self, database, parameter: "database")
        }
        let webAuthToken = query.nonEmpty("ckWebAuthToken").flatMap { $0.isEmpty || $0 == "null" ? nil : $0 }
        if let signed = try ServerKeySignature(
            keyID: request.headers[.cloudKitKeyID], date: request.headers[.cloudKitDate],
            signature: request.headers[.cloudKitSignature])
        {
            try await verify(signed, of: &request, container: container, into: &caller)
            guard webAuthToken == nil else {
                throw StratusError.badRequest(
                    "a request signed with a server-to-server key acts as the key's user; leave out ckWebAuthToken")
            }
            return
        }
        if let webAuthToken {
            caller.userRecordName = try await accounts.user(forWebAuthToken: webAuthToken, container: container)
        }
    }

    /// Checks a server-to-server signature: a live key of the path's container and environment that
    /// signed this date, body and path. The request's body is read for it (up to the body limit).
    private func verify(
        _ signed: ServerKeySignature, of request: inout Request, container: String, into caller: inout VerifiedCaller
    ) async throws {
        guard request.uri.path.hasPrefix("/database/1/") else {
            throw StratusError(.authenticationFailed, "server-to-server keys sign requests under /database/1/ only")
        }
        guard let key = try await accounts.serverKey(id: signed.keyID), key.container == container else {
            throw StratusError(
                .authenticationFailed, "'\(signed.keyID)' is not a server-to-server key of container '\(container)'")
        }
        guard caller.environment == nil || caller.environment == key.environment else {
            throw StratusError(
                .authenticationFailed,
                "server-to-server key '\(signed.keyID)' is for the \(key.environment.rawValue) environment")
        }
        // Read here to check the signature, then handed on to the endpoint as the request's body.
        let body = try await request.collectBody(limit: maxBodyBytes)
        request.body = RequestBody(buffer: body)
        try signed.verify(
            body: body.readableBytesView, subpath: request.head.path ?? request.uri.path, key: key, now: clock.milliseconds)
        caller.container = container
        caller.userRecordName = key.userRecordName
        caller.serverKeyID = key.keyID
    }

    private func charge(_ key: String) throws {
        guard let limiter, let wait = limiter.acquire(key) else { return }
        throw limiter.limit.throttled(wait: wait, what: "requests from this caller")
    }

    /// The connection's peer, or, when the peer is a trusted proxy, the address it forwarded: the
    /// last entry of `X-Forwarded-For` that is not itself a trusted proxy.
    private func clientAddress(_ request: Request, peer: SocketAddress?) -> String {
        let peerAddress = Self.unmapped(peer?.ipAddress ?? "unknown")
        guard trustedProxies.contains(peerAddress), let forwarded = request.headers[.xForwardedFor] else {
            return peerAddress
        }
        let hops = forwarded.split(separator: ",").map { Self.unmapped($0.trimmingCharacters(in: .whitespaces)) }
            .filter { !$0.isEmpty }
        return hops.last { !trustedProxies.contains($0) } ?? peerAddress
    }

    /// An IPv4 address as itself when it comes mapped into IPv6 (`::ffff:10.0.0.1`, as a server
    /// listening on both families sees IPv4 peers), so that it matches `--trusted-proxy 10.0.0.1`
    /// and counts as the same client either way.
    static func unmapped(_ address: String) -> String {
        let prefix = "::ffff:"
        guard address.lowercased().hasPrefix(prefix), address.dropFirst(prefix.count).contains(".") else { return address }
        return String(address.dropFirst(prefix.count))
    }
}

extension HTTPField.Name {
    /// The client addresses a proxy forwards a request for, the nearest last.
    static let xForwardedFor = Self("X-Forwarded-For")!
    /// The ID of the server-to-server key that signed a request.
    static let cloudKitKeyID = Self("X-Apple-CloudKit-Request-KeyID")!
    /// The date a server-to-server key signed, ISO 8601.
    static let cloudKitDate = Self("X-Apple-CloudKit-Request-ISO8601Date")!
    /// A server-to-server signature, base64.
    static let cloudKitSignature = Self("X-Apple-CloudKit-Request-SignatureV1")!
}
