import CoreMetrics
import Crypto
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
    /// The transport through the platforms' push services, whose credentials say which channels a
    /// container sends on.
    let devicePush: DevicePushTransport
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
        // from the container's; it is answered as sent.
        return .json(
            PushTokenResponse(
                apnsEnvironment: body.apnsEnvironment ?? environment, apnsToken: token,
                webcourierURL: pushURL(request, token: token),
                webPushPublicKey: try await devicePush.credentials.credentials(container: container).webPush?.publicKey))
    }

    /// `tokens/register`: binds a token to the signed-in user and the device that sends it
    /// (`X-Stratus-Device-ID`), which then never hears of its own changes. A token registered to one
    /// user cannot be registered by another.
    ///
    /// An APNs device token in `apnsToken` (64 or more hexadecimal digits: never a token of
    /// `tokens/create`), an FCM token in `fcmToken` or a Web Push subscription in
    /// `webPushSubscription` registers a push endpoint instead (``registerEndpoint(_:_:container:environment:user:)``).
    func registerToken(_ request: Request, _ context: StratusRequestContext) async throws -> Response {
        let container = try authenticator.authenticateApp(context)
        let environment = try authenticator.environment(context)
        guard let user = context.caller.userRecordName else {
            throw StratusError(
                .authenticationRequired, "tokens/register needs a signed-in user: pass ckWebAuthToken",
                redirectURL: authenticator.signInURL(request, container: container))
        }
        let body = try await request.decodeJSON(RegisterPushTokenRequest.self, limit: 64 << 10)
        guard let apnsToken = body.apnsToken else {
            return try await registerEndpoint(body, request, container: container, environment: environment, user: user)
        }
        let hash = Secrets.hash(apnsToken)
        let found = try await storage.pushToken(hash: hash)
        if found == nil, Self.isAPNsDeviceToken(apnsToken) {
            return try await registerEndpoint(body, request, container: container, environment: environment, user: user)
        }
        guard let token = found, token.container == container, token.environment == environment else {
            throw StratusError(
                .notFound,
                "apnsToken is neither a push token of container '\(container)' in \(environment.rawValue) "
                    + "(create one with tokens/create) nor an APNs device token (64 or more hexadecimal digits)")
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
                apnsEnvironment: body.apnsEnvironment ?? environment, apnsToken: apnsToken,
                webcourierURL: pushURL(request, token: apnsToken)))
    }

    /// Whether `token` has the shape of an APNs device token: hexadecimal, 64 digits today and
    /// possibly more later, as Apple warns.
    static func isAPNsDeviceToken(_ token: String) -> Bool {
        (64...200).contains(token.utf8.count) && token.allSatisfy { $0.isASCII && $0.isHexDigit }
    }

    /// Registers the device's APNs token, FCM token or Web Push subscription to the signed-in user,
    /// after checking its shape (and that a Web Push endpoint is a push service the server may post
    /// to: ``PushServiceConfiguration/webPushHosts``). The user keeps their most recently registered
    /// ``PushServiceConfiguration/endpointsPerUser`` endpoints.
    private func registerEndpoint(
        _ body: RegisterPushTokenRequest, _ request: Request, container: String, environment: ContainerEnvironment,
        user: String
    ) async throws -> Response {
        let channel: PushEndpointInfo.Channel
        let address: String
        var keys: (p256dh: String, auth: String)?
        if let apnsToken = body.apnsToken {
            channel = (body.apnsEnvironment ?? environment) == .production ? .apnsProduction : .apnsDevelopment
            address = apnsToken.lowercased()
        } else if let fcmToken = body.fcmToken {
            guard (1...4096).contains(fcmToken.utf8.count),
                fcmToken.unicodeScalars.allSatisfy({ $0.isASCII && $0.value > 32 && $0.value < 127 })
            else {
                throw StratusError.badRequest("fcmToken must be the registration token FCM gave the app (printable ASCII, at most 4,096 bytes)")
            }
            channel = .fcm
            address = fcmToken
        } else if let subscription = body.webPushSubscription {
            guard let url = URLComponents(string: subscription.endpoint), url.scheme == "https", let host = url.host,
                subscription.endpoint.utf8.count <= 2048
            else {
                throw StratusError.badRequest("webPushSubscription.endpoint must be the https URL of the subscription (at most 2,048 bytes)")
            }
            guard configuration.pushServices.allowsWebPush(host: host) else {
                throw StratusError.badRequest(
                    "webPushSubscription.endpoint: this server posts only to the push services "
                        + configuration.pushServices.webPushHosts.joined(separator: ", ") + ", not '\(host)'")
            }
            guard let key = Base64URL.decode(subscription.p256dh), key.count == 65, key.first == 4,
                (try? P256.KeyAgreement.PublicKey(x963Representation: key)) != nil
            else {
                throw StratusError.badRequest("webPushSubscription.keys.p256dh must be an uncompressed P-256 public key (65 bytes) in base64url")
            }
            guard let auth = Base64URL.decode(subscription.auth), auth.count == 16 else {
                throw StratusError.badRequest("webPushSubscription.keys.auth must be 16 bytes in base64url")
            }
            channel = .webPush
            address = subscription.endpoint
            keys = (subscription.p256dh, subscription.auth)
        } else {
            throw StratusError.badRequest("exactly one of apnsToken, fcmToken and webPushSubscription is required")
        }
        let now = configuration.clock.milliseconds
        try await storage.registerPushEndpoint(
            PushEndpointInfo(
                id: Secrets.hash([container, environment.rawValue, channel.rawValue, address].joined(separator: "\u{0}")),
                container: container, environment: environment,
                userRecordName: user, deviceID: request.headers[.stratusDeviceID], channel: channel, address: address,
                publicKey: keys?.p256dh, authSecret: keys?.auth, createdAt: now, usedAt: now),
            keepingAtMost: configuration.pushServices.endpointsPerUser)
        let apnsEnvironment: ContainerEnvironment =
            switch channel {
            case .apnsDevelopment: .development
            case .apnsProduction: .production
            case .fcm, .webPush: environment
            }
        return .json(PushTokenResponse(apnsEnvironment: apnsEnvironment, apnsToken: body.apnsToken, webcourierURL: nil))
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
