import CoreMetrics
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import ServiceLifecycle
import StratusModel
import StratusStorage

/// `tokens/create`, `tokens/register`, and the push URL they hand out: `/push/1/{token}`, which
/// answers a long poll over plain HTTP here, or upgrades to a WebSocket (``PushServerChannel``).
struct PushEndpoints: Sendable {
    let storage: any SubscriptionStorage
    let accounts: AccountService
    let authenticator: Authenticator
    let hub: PushHub
    let configuration: ServerConfiguration
    /// Polls refused per client address.
    let refusedPolls: FailureBackoff

    /// The longest a long poll waits, and its default.
    static let maxPollSeconds = 60
    static let defaultPollSeconds = 30
    /// What a refused poll asks the client to wait, in seconds.
    static let refusedPollRetrySeconds = 1

    /// A push connection's proof of who it is, from the upgrade request to the WebSocket handler.
    struct Session: Sendable {
        var tokenHash: String
        var owner: PushDevice.Owner
        var deviceID: String?
        /// The web auth token's hash; `nil` for a bare poll of the `webcourierURL`.
        var sessionHash: String?
    }

    func addRoutes(to router: Router<StratusRequestContext>) {
        router.on(Endpoints.tokensCreate) { request, context in try await createToken(request, context) }
        router.on(Endpoints.tokensRegister) { request, context in try await registerToken(request, context) }
        router.on(Endpoints.deviceTokensCreate) { request, context in try await createToken(request, context) }
        router.on(Endpoints.deviceTokensRegister) { request, context in try await registerToken(request, context) }
        router.on(Endpoints.databaseTokensCreate) { request, context in try await createToken(request, context) }
        router.on(Endpoints.databaseTokensRegister) { request, context in try await registerToken(request, context) }
        router.get("push/1/:token") { request, context in try await longPoll(request, context) }
        router.post("push/1/:token") { request, context in try await longPoll(request, context) }
    }

    // MARK: Tokens

    /// `tokens/create`: a new push token and its URL. It needs only the API token; the token
    /// delivers nothing until it is bound to a signed-in user: by `tokens/register`, or at once when
    /// the request carries a session (as Apple's web library creates its token), with the device
    /// that sends it.
    func createToken(_ request: Request, _ context: StratusRequestContext) async throws -> Response {
        let container = try authenticator.authenticateApp(context)
        let environment = try authenticator.environment(context)
        let body = try await request.decodeJSON(CreatePushTokenRequest.self, limit: 64 << 10)
        let token = Secrets.makeToken()
        let now = configuration.clock.milliseconds
        try await storage.createPushToken(
            hash: Secrets.hash(token),
            token: PushTokenInfo(
                container: container, environment: environment, userRecordName: context.caller.userRecordName,
                deviceID: context.caller.userRecordName == nil ? nil : request.headers[.stratusDeviceID], createdAt: now,
                usedAt: now))
        // `apnsEnvironment` names the push service's environment, which Apple's clients may set apart
        // from the container's; Stratus pushes without Apple's service, so it is answered as sent.
        return .json(
            PushTokenResponse(
                apnsEnvironment: body.apnsEnvironment ?? environment, apnsToken: token,
                webcourierURL: pushURL(request, token: token)))
    }

    /// `tokens/register`: binds a token to the signed-in user and the device that sends it
    /// (`X-Stratus-Device-ID`), which then never hears of its own changes. A token registered to one
    /// user cannot be registered by another.
    func registerToken(_ request: Request, _ context: StratusRequestContext) async throws -> Response {
        let container = try authenticator.authenticateApp(context)
        let environment = try authenticator.environment(context)
        guard let user = context.caller.userRecordName else {
            throw StratusError(
                .authenticationRequired, "tokens/register needs a signed-in user: pass ckWebAuthToken",
                redirectURL: authenticator.signInURL(request, container: container))
        }
        let body = try await request.decodeJSON(RegisterPushTokenRequest.self, limit: 64 << 10)
        let hash = Secrets.hash(body.apnsToken)
        guard let token = try await storage.pushToken(hash: hash), token.container == container,
            token.environment == environment
        else {
            throw StratusError(
                .notFound,
                "apnsToken is not a push token of container '\(container)' in \(environment.rawValue); "
                    + "create one with tokens/create")
        }
        // A token stays with the user who registered it first: whoever learns it cannot take it
        // over and cut the owner's device off.
        if let owner = token.userRecordName, owner != user {
            throw StratusError(
                .accessDenied, "apnsToken is registered to another user; create a token of your own with tokens/create")
        }
        _ = try await storage.registerPushToken(
            hash: hash, userRecordName: user, deviceID: request.headers[.stratusDeviceID],
            timestamp: configuration.clock.milliseconds)
        return .json(
            PushTokenResponse(
                apnsEnvironment: body.apnsEnvironment ?? environment, apnsToken: body.apnsToken, webcourierURL: pushURL(request, token: body.apnsToken)))
    }

    private func pushURL(_ request: Request, token: String) -> String {
        authenticator.baseURL(request) + "/push/1/" + token.queryValueEncoded
    }

    // MARK: The push URL

    /// Checks a push request: the token must be registered, the API token must be of its
    /// container, and the web auth token must be a live session of the user it is registered to.
    func authenticate(_ request: Request, _ context: StratusRequestContext, allowsBare: Bool = false) async throws -> Session {
        try await authenticate(
            token: try context.parameters.require("token"), apiToken: request.query("ckAPIToken"),
            webAuthToken: request.query("ckWebAuthToken"), allowsBare: allowsBare)
    }

    /// Checks a push token and the tokens that came with it. With neither token and `allowsBare`,
    /// the push token alone is the credential (a bare long poll of the `webcourierURL`, as Apple's
    /// web library makes it): it is a 256-bit secret registered to one user. WebSockets, Stratus's
    /// own channel, always need the session, so signing out ends them.
    func authenticate(token: String, apiToken: String?, webAuthToken: String?, allowsBare: Bool = false) async throws
        -> Session
    {
        let hash = Secrets.hash(token)
        guard let info = try await storage.pushToken(hash: hash) else {
            throw StratusError(.authenticationFailed, "the push token is unknown; create one with tokens/create")
        }
        guard let user = info.userRecordName else {
            throw StratusError(
                .authenticationFailed, "the push token is not registered to a user; register it with tokens/register")
        }
        let owner = PushDevice.Owner(container: info.container, environment: info.environment, userRecordName: user)
        if allowsBare, apiToken == nil, webAuthToken == nil {
            try await storage.markPushTokenUsed(hash: hash, timestamp: configuration.clock.milliseconds)
            return Session(tokenHash: hash, owner: owner, deviceID: info.deviceID, sessionHash: nil)
        }
        guard let apiToken, try await accounts.container(forAPIToken: apiToken) == info.container else {
            throw StratusError(.authenticationFailed, "ckAPIToken is required and must be the push token's container's")
        }
        guard let webAuthToken else {
            throw StratusError(.authenticationFailed, "ckWebAuthToken is required: the push channel is the user's")
        }
        guard try await accounts.user(forWebAuthToken: webAuthToken, container: info.container) == user else {
            throw StratusError(.authenticationFailed, "the push token is registered to another user")
        }
        try await storage.markPushTokenUsed(hash: hash, timestamp: configuration.clock.milliseconds)
        return Session(tokenHash: hash, owner: owner, deviceID: info.deviceID, sessionHash: Secrets.hash(webAuthToken))
    }

    /// `GET /push/1/{token}` without an upgrade: waits up to `timeout` seconds (default 30, at most
    /// 60) for notifications and answers them, or an empty list. A bare poll (no `ckAPIToken` or
    /// `ckWebAuthToken`, GET or POST) is answered as Apple's web courier answers: one notification
    /// per poll in Apple's payload shape (``ApplePushPayload``), or an empty body when none came.
    /// A refused poll says when to retry, and an address whose polls keep being refused is locked
    /// out for longer and longer, so a client that polls again at once cannot hammer the server.
    func longPoll(_ request: Request, _ context: StratusRequestContext) async throws -> Response {
        let address = [FailureBackoff.Key(name: "push:\(context.caller.network)", freeFailures: 20)]
        if let wait = refusedPolls.begin(address) {
            throw StratusError(
                .throttled, "too many refused polls from this address; retry after the retryAfter seconds", retryAfter: wait)
        }
        let session: Session
        do {
            session = try await authenticate(request, context, allowsBare: true)
        } catch var error as StratusError {
            error.retryAfter = error.retryAfter ?? Self.refusedPollRetrySeconds
            throw error
        }
        refusedPolls.succeeded(address)
        let bare = session.sessionHash == nil
        var timeout = Self.defaultPollSeconds
        if let text = request.query("timeout") {
            guard let seconds = Int(text), (0...Self.maxPollSeconds).contains(seconds) else {
                throw StratusError.badRequest("timeout must be a whole number of seconds from 0 to \(Self.maxPollSeconds)")
            }
            timeout = seconds
        }
        let (device, connection, missedAtConnect) = hub.registry.connect(
            tokenHash: session.tokenHash, owner: session.owner, deviceID: session.deviceID,
            sessionHash: session.sessionHash)
        defer { device.detach(connection) }
        // A device that may have missed notifications is answered at once, so it fetches.
        let wait: Duration = missedAtConnect ? .zero : .seconds(timeout)
        // A server shutting down answers at once rather than holding the shutdown for the timeout.
        let delivery = await cancelWhenGracefulShutdown { await device.poll(connection, timeout: wait) }
        guard case .batch(let entries, let dropped) = delivery else {
            return bare ? Response(status: .ok) : .json(PushPollResponse(notifications: [], missedNotifications: missedAtConnect))
        }
        configuration.metrics.notificationsSent(
            queuedAt: (bare ? Array(entries.prefix(1)) : entries).map(\.queuedAt), now: configuration.clock.milliseconds)
        guard bare else {
            return .json(
                PushPollResponse(notifications: entries.map(\.payload), missedNotifications: missedAtConnect || dropped))
        }
        // One per poll, as Apple's courier answers; the others wait for the next poll.
        guard let first = entries.first else { return Response(status: .ok) }
        device.putBack(Array(entries.dropFirst()))
        return .json(ApplePushPayload(first.payload, userRecordName: session.owner.userRecordName))
    }
}
