import Hummingbird
import StratusModel
import StratusStorage

/// Who may administer the server: the holder of the admin token (whose hash the storage keeps), or
/// a console session signed in with it, on a call that carries the session's CSRF token. For the
/// admin API, the console and `GET /metrics`.
///
/// Tokens that are not the admin token count against the caller's address as failed sign-ins do
/// (``SignInLimits/freeFailuresPerAddress``, then exponential locks): while the address is locked,
/// every token from it is refused with `THROTTLED` before it is compared, and is not audited, so a
/// guesser neither gets far nor fills the audit log.
struct AdminCredential: Sendable {
    /// The settings key of the admin token's hash.
    static let tokenHashSetting = "admin_token_hash"

    let storage: any SettingsStorage
    let console: ConsoleSessions
    private let failures: FailureBackoff
    private let freeFailuresPerAddress: Int

    init(storage: any SettingsStorage, console: ConsoleSessions, limits: SignInLimits, clock: ServerClock) {
        self.storage = storage
        self.console = console
        failures = FailureBackoff(maximumLockSeconds: limits.maximumLockSeconds, clock: clock)
        freeFailuresPerAddress = limits.freeFailuresPerAddress
    }

    /// Whether `token`, presented by the caller of `context` as `actor`, is the admin token (compared
    /// in constant time); the request is audited as `actor`, or as `actor (refused)`. Throws
    /// `THROTTLED` while the caller's address is locked.
    func accepts(_ token: String, as actor: String, context: StratusRequestContext) async throws -> Bool {
        let address = FailureBackoff.Key(name: context.caller.network, freeFailures: freeFailuresPerAddress)
        if let wait = failures.begin([address]) {
            throw StratusError(
                .throttled, "too many refused admin tokens from this address; retry after the retryAfter seconds",
                retryAfter: wait)
        }
        guard let stored = try await storage.setting(Self.tokenHashSetting),
            Secrets.constantTimeEquals(Array(Secrets.hash(token).utf8), Array(stored.utf8))
        else {
            context.trace.act(as: "\(actor) (refused)")
            return false
        }
        failures.succeeded([address], forgiving: [address.name])
        context.trace.act(as: actor)
        return true
    }

    /// The token of an `Authorization: Bearer <token>` header.
    static func bearerToken(_ request: Request) -> String? {
        guard let header = request.headers[.authorization], header.hasPrefix("Bearer ") else { return nil }
        return String(header.dropFirst("Bearer ".count))
    }

    /// Refuses a request that is neither from the admin token (`Authorization: Bearer <adminToken>`)
    /// nor from a console session, with `AUTHENTICATION_FAILED`; records who it is for the audit log.
    func authenticate(_ request: Request, context: StratusRequestContext) async throws {
        if let token = Self.bearerToken(request) {
            guard try await accepts(token, as: "admin token", context: context) else {
                throw StratusError(.authenticationFailed, "the admin token is not valid")
            }
            return
        }
        if let session = console.verifiedSession(of: request) {
            context.trace.act(as: "console session \(session.label)")
            return
        }
        throw StratusError(.authenticationFailed, "the admin API needs 'Authorization: Bearer <adminToken>'")
    }
}

/// Refuses every route of the admin group (`/admin/1/…`) to a caller the ``AdminCredential`` does
/// not accept, before its handler runs: the admin routes authenticate in one place, not each itself.
struct AdminAuthenticationMiddleware: RouterMiddleware {
    typealias Context = StratusRequestContext

    let credential: AdminCredential

    func handle(
        _ request: Request, context: StratusRequestContext,
        next: (Request, StratusRequestContext) async throws -> Response
    ) async throws -> Response {
        try await credential.authenticate(request, context: context)
        return try await next(request, context)
    }
}
