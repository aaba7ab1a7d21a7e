import Foundation
import Hummingbird
import StratusModel

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
    let hub: PushHub
    private let failures: FailureBackoff
    private let signUps: RateLimiter

    init(accounts: AccountService, authenticator: Authenticator, configuration: ServerConfiguration, hub: PushHub) {
        self.accounts = accounts
        self.authenticator = authenticator
        self.configuration = configuration
        self.hub = hub
        let limits = configuration.signInLimits
        failures = FailureBackoff(maximumLockSeconds: limits.maximumLockSeconds, clock: configuration.clock)
        signUps = RateLimiter(limit: limits.signUpsPerAddress, clock: configuration.clock)
    }

    func addRoutes(to router: Router<StratusRequestContext>) {
        router.on(Endpoints.signUp) { request, context in
            let container = try authenticator.authenticateApp(context)
            let body = try await request.decodeJSON(PasswordCredentials.self, limit: 64 << 10)
            if let wait = signUps.acquire(context.caller.address) {
                throw signUps.limit.throttled(wait: wait, what: "accounts created from this address")
            }
            // A sign-up refused for a taken username counts as a failed guess of this address.
            let attempt = [addressKey(context)]
            try begin(attempt)
            do {
                let session = try await accounts.signUp(
                    container: container, username: body.username, password: body.password)
                failures.succeeded(attempt)
                return Self.sessionResponse(session)
            } catch let error as StratusError where error.code == .exists {
                throw error
            } catch {
                failures.succeeded(attempt)
                throw error
            }
        }
        router.on(Endpoints.signIn) { request, context in
            let container = try authenticator.authenticateApp(context)
            let body = try await request.decodeJSON(PasswordCredentials.self, limit: 64 << 10)
            let account = FailureBackoff.Key(
                name: "account:\(container)\n\(body.username.lowercased())",
                freeFailures: configuration.signInLimits.freeFailuresPerAccount)
            let attempt = [account, addressKey(context)]
            try begin(attempt)
            do {
                let session = try await accounts.signIn(container: container, username: body.username, password: body.password)
                failures.succeeded(attempt, forgiving: [account.name])
                return Self.sessionResponse(session)
            } catch let error as StratusError where error.code == .authenticationFailed {
                throw error
            } catch {
                failures.succeeded(attempt)
                throw error
            }
        }
        router.on(Endpoints.signOut) { request, context in
            _ = try authenticator.authenticateApp(context)
            guard let token = request.query("ckWebAuthToken"), context.caller.userRecordName != nil else {
                throw StratusError.badRequest("ckWebAuthToken is required: it names the session to end")
            }
            try await accounts.signOut(webAuthToken: token)
            hub.closeConnections(sessionHash: Secrets.hash(token))
            var writer = JSONWriter()
            writer.beginObject()
            writer.endObject()
            return Response.json(writer)
        }
        router.on(Endpoints.signInPage) { request, context in
            let container = try authenticator.authenticateApp(context)
            let callback = try request.query("callback").map {
                try SignInCallback(
                    $0, serverOrigin: configuration.publicURL.flatMap(SignInCallback.origin(of:)),
                    serverAuthority: request.head.authority)
            }
            return Response(
                status: .ok, headers: [.contentType: "text/html; charset=utf-8"],
                body: ResponseBody(byteBuffer: ByteBuffer(string: SignInPage.html(container: container, callback: callback))))
        }
    }

    private func addressKey(_ context: StratusRequestContext) -> FailureBackoff.Key {
        FailureBackoff.Key(
            name: "address:\(context.caller.address)", freeFailures: configuration.signInLimits.freeFailuresPerAddress)
    }

    /// Counts an attempt, or refuses it while one of its keys is locked: the same answer whether or
    /// not the account exists, and whichever key is locked.
    private func begin(_ attempt: [FailureBackoff.Key]) throws {
        guard let wait = failures.begin(attempt) else { return }
        throw StratusError(
            .throttled, "too many failed attempts to sign in or sign up; retry after the retryAfter seconds",
            retryAfter: wait)
    }

    private static func sessionResponse(_ session: IssuedSession) -> Response {
        .json(
            WebAuthSession(
                ckWebAuthToken: session.webAuthToken, userRecordName: session.userRecordName,
                expires: session.expiresAt))
    }
}
