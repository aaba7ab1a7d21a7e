import Foundation
import Hummingbird
import StratusModel
import StratusStorage

/// User accounts: `/auth/1/{container}/signup`, `/signin`, `/signout`, and the sign-in page that
/// `AUTHENTICATION_REQUIRED` answers redirect to.
///
/// Sign-in and sign-up are limited whether or not a rate limit is configured
/// (``ServerConfiguration/signInLimits``): failed sign-ins back off exponentially per account and per
/// client address, and each address may create only so many accounts.
struct AuthEndpoints: Sendable {
    let accounts: AccountService
    let authenticator: Authenticator
    let configuration: ServerConfiguration
    /// The containers' sign-in methods and their providers' keys.
    let directory: IdentityProviderDirectory
    let webSignIn: WebSignIn
    private let failures: FailureBackoff
    private let signUps: RateLimiter

    init(
        accounts: AccountService, authenticator: Authenticator, configuration: ServerConfiguration,
        directory: IdentityProviderDirectory, settings: any SettingsStorage
    ) {
        self.accounts = accounts
        self.authenticator = authenticator
        self.configuration = configuration
        self.directory = directory
        webSignIn = WebSignIn(
            directory: directory, accounts: accounts, storage: settings, authenticator: authenticator,
            clock: configuration.clock)
        let limits = configuration.signInLimits
        failures = FailureBackoff(maximumLockSeconds: limits.maximumLockSeconds, clock: configuration.clock)
        signUps = RateLimiter(limit: limits.signUpsPerAddress, clock: configuration.clock)
    }

    func addRoutes(to router: Router<StratusRequestContext>) {
        router.on(Endpoints.signUp) { request, context in
            let container = try authenticator.authenticateApp(context)
            try await requirePasswords(container)
            let body = try await request.decodeJSON(PasswordCredentials.self, limit: 64 << 10)
            if let wait = signUps.acquire(context.caller.network) {
                throw signUps.limit.throttled(wait: wait, what: "accounts created from this address")
            }
            // A sign-up refused for a taken username counts as a failed guess of this address.
            let session = try await attempt([addressKey(context)], failingWith: .exists) {
                try await accounts.signUp(container: container, username: body.username, password: body.password)
            }
            return Self.sessionResponse(session)
        }
        router.on(Endpoints.signIn) { request, context in
            let container = try authenticator.authenticateApp(context)
            try await requirePasswords(container)
            let body = try await request.decodeJSON(PasswordCredentials.self, limit: 64 << 10)
            // A username no account can have is refused before it names a lock, so that each account
            // has one lock key, however its name is spelled.
            if let violation = AccountService.usernameViolation(body.username) { throw StratusError.badRequest(violation) }
            let account = FailureBackoff.Key(
                name: "account:\(container)\n\(body.username.lowercased())",
                freeFailures: configuration.signInLimits.freeFailuresPerAccount)
            let session = try await attempt(
                [account, addressKey(context)], failingWith: .authenticationFailed, forgiving: [account.name]
            ) {
                try await accounts.signIn(container: container, username: body.username, password: body.password)
            }
            return Self.sessionResponse(session)
        }
        router.on(Endpoints.signOut) { request, context in
            let container = try authenticator.authenticateApp(context)
            guard let token = request.query("ckWebAuthToken"), context.caller.userRecordName != nil else {
                throw StratusError.badRequest("ckWebAuthToken is required: it names the session to end")
            }
            try await accounts.signOut(webAuthToken: token, container: container)
            var writer = JSONWriter()
            writer.beginObject()
            writer.endObject()
            return Response.json(writer)
        }
        router.on(Endpoints.signInPage) { request, context in
            let container = try authenticator.authenticateApp(context)
            let handoff = try handoff(request, container: container)
            let methods = try await directory.methods(container: container)
            let query = request.uri.query.map { "?" + $0 } ?? ""
            let providers = methods.providers.map { provider in
                SignInPage.ProviderLink(name: provider.name, url: "signin/web/\(provider.name)\(query)")
            }
            return Response(
                status: .ok, headers: ConsoleEndpoints.unframedPageHeaders,
                body: ResponseBody(
                    byteBuffer: ByteBuffer(
                        string: SignInPage.html(
                            container: container, handoff: handoff, providers: providers, passwords: methods.passwordsEnabled))))
        }
        addFederatedRoutes(to: router)
    }

    /// Where the sign-in page hands the token: the `callback` and `origin` of its query, checked.
    func handoff(_ request: Request, container: String) throws -> SignInHandoff {
        let callback = try request.query("callback").map {
            try SignInCallback(
                $0, container: container, serverOrigin: configuration.publicURL.flatMap(SignInCallback.origin(of:)),
                serverAuthority: request.head.authority)
        }
        let opener = try request.query("origin").map { origin in
            guard let admitted = authenticator.openerOrigin(origin, request: request) else {
                throw StratusError.badRequest(
                    "origin '\(origin)' is not an origin the sign-in page may post a token to: an http(s) origin on a "
                        + "loopback address or on this server")
            }
            return admitted
        }
        return SignInHandoff(callback: callback, openerOrigin: opener)
    }

    /// Refuses password sign-up and sign-in where the operator turned passwords off.
    func requirePasswords(_ container: String) async throws {
        guard try await directory.methods(container: container).passwordsEnabled else {
            throw StratusError(
                .accessDenied, "container '\(container)' does not use passwords; sign in with one of its identity providers")
        }
    }

    func addressKey(_ context: StratusRequestContext) -> FailureBackoff.Key {
        FailureBackoff.Key(
            name: "address:\(context.caller.network)", freeFailures: configuration.signInLimits.freeFailuresPerAddress)
    }

    /// Runs a sign-in or sign-up counted against `keys`. While a key is locked it is refused with
    /// the same answer whether or not the account exists, and whichever key is locked. An error of
    /// code `failure` (a wrong password, a taken username) keeps the attempt counted; any other
    /// outcome takes it back, and a success also forgets the failures of `forgiving`.
    func attempt<Result>(
        _ keys: [FailureBackoff.Key], failingWith failure: ServerErrorCode, forgiving: Set<String> = [],
        _ body: () async throws -> Result
    ) async throws -> Result {
        if let wait = failures.begin(keys) {
            throw StratusError(
                .throttled, "too many failed attempts to sign in or sign up; retry after the retryAfter seconds",
                retryAfter: wait)
        }
        do {
            let result = try await body()
            failures.succeeded(keys, forgiving: forgiving)
            return result
        } catch let error as StratusError where error.code == failure {
            throw error
        } catch {
            failures.succeeded(keys)
            throw error
        }
    }

    static func sessionResponse(_ session: IssuedSession) -> Response {
        .json(
            WebAuthSession(
                ckWebAuthToken: session.webAuthToken, userRecordName: session.userRecordName,
                expires: session.expiresAt))
    }
}
