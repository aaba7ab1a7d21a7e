public import Foundation
import StratusModel
import Synchronization

extension Container {
    /// Registers the device token the app received from Apple's push service
    /// (`application(_:didRegisterForRemoteNotificationsWithDeviceToken:)`), so that the server wakes
    /// this device with a silent push when the signed-in user's subscriptions fire, as CloudKit does.
    /// Call it at every launch: tokens change, and a device another user signs in on moves to them.
    ///
    /// The container's operator must have set the app's APNs key on the server (docs/deploy.md). The
    /// device never hears of its own changes (``Configuration/deviceID``).
    ///
    /// - Parameters:
    ///   - apnsToken: The device token, as the system gave it.
    ///   - environment: The APNs environment the token belongs to: `development` for builds signed
    ///     for development (the APNs sandbox), `production` for TestFlight and the App Store.
    /// - Throws: `CloudError`: `notAuthenticated` when no user is signed in.
    public func registerForRemoteNotifications(apnsToken: Data, environment: Environment) async throws {
        try await registerPushEndpoint(
            RegisterPushTokenRequest(
                apnsEnvironment: ContainerEnvironment(rawValue: environment.rawValue),
                apnsToken: apnsToken.map { String(format: "%02x", $0) }.joined()))
    }

    /// Registers the registration token the app received from Firebase Cloud Messaging, so that
    /// the server wakes this device with a high-priority data message (its `ck` member) when the
    /// signed-in user's subscriptions fire. Call it at every launch and when FCM refreshes the token.
    ///
    /// - Throws: `CloudError`: `notAuthenticated` when no user is signed in.
    public func registerForRemoteNotifications(fcmToken: String) async throws {
        try await registerPushEndpoint(RegisterPushTokenRequest(fcmToken: fcmToken))
    }

    /// Registers a browser's Web Push subscription (`PushSubscription.toJSON()`'s `endpoint` and
    /// `keys`), made with the key ``webPushPublicKey()`` answers, so that the server posts
    /// encrypted notifications to it.
    ///
    /// - Throws: `CloudError`: `notAuthenticated` when no user is signed in, `badRequest` when the
    ///   subscription's push service is not one the server posts to.
    public func registerForRemoteNotifications(webPushEndpoint: String, p256dh: String, auth: String) async throws {
        try await registerPushEndpoint(
            RegisterPushTokenRequest(
                webPushSubscription: WebPushSubscription(endpoint: webPushEndpoint, p256dh: p256dh, auth: auth)))
    }

    /// The container's Web Push public key (base64url), the `applicationServerKey` a web app
    /// subscribes with; `nil` when the container does not send Web Push. The server is asked once
    /// per container object (with `tokens/create`, which answers it); later calls answer the same.
    public func webPushPublicKey() async throws -> String? {
        if let known = webPushPublicKeyAnswered.withLock({ $0 }) { return known }
        let key = try await connection.call(
            .container(Endpoints.tokensCreate.erased),
            body: CreatePushTokenRequest(apnsEnvironment: ContainerEnvironment(rawValue: environment.rawValue)),
            idempotent: true, as: PushTokenResponse.self
        ).webPushPublicKey
        if let key { webPushPublicKeyAnswered.withLock { $0 = key } }
        return key
    }

    private func registerPushEndpoint(_ request: RegisterPushTokenRequest) async throws {
        _ = try await connection.call(
            .container(Endpoints.tokensRegister.erased), body: request, idempotent: true, as: PushTokenResponse.self)
    }
}

/// A notification that arrived through a platform's push service: the `userInfo` of an APNs push,
/// the data of an FCM message, or the decrypted body of a Web Push message. Hand it to the sync
/// engine (`SyncEngine.handleRemoteNotification(_:)`), which fetches when it concerns its
/// database.
public struct RemoteNotification: Sendable, Hashable {
    /// The container the notification is of.
    public var containerIdentifier: String
    /// The database the change happened in.
    public var databaseScope: Database.Scope
    /// The subscription that fired.
    public var subscriptionID: String
    /// The zone changed, when the notification names one.
    public var zoneName: String?
    /// The record changed (query notifications).
    public var recordName: String?

    /// Reads CloudKit's payload: `{"aps": …, "ck": {…}}` (APNs, Web Push), or an FCM message's data,
    /// whose `ck` member is the same dictionary as JSON text. `nil` when `payload` is not a Stratus
    /// or CloudKit notification.
    public init?(payload: Data) {
        guard let value = try? JSONValue.parse(Array(payload)), let root = try? value.object() else { return nil }
        var ck: JSONObject?
        if let text = try? root.decodeIfPresent("ck", as: String.self) {
            ck = try? JSONValue.parse(Array(text.utf8)).object()
        } else {
            ck = try? root.decodeIfPresent("ck", as: JSONValue.self)?.object()
        }
        guard let ck, let container = try? ck.decode("cid", as: String.self) else { return nil }
        let body = ["qry", "fet", "met"].lazy.compactMap { try? ck.decodeIfPresent($0, as: JSONValue.self)?.object() }.first
        guard let body, let scopeNumber = try? body.decode("dbs", as: Int64.self),
            let subscription = try? body.decode("sid", as: String.self)
        else { return nil }
        let scope: Database.Scope
        switch scopeNumber {
        case ApplePushPayload.databaseNumber(.private): scope = .private
        case ApplePushPayload.databaseNumber(.public): scope = .public
        case ApplePushPayload.databaseNumber(.shared): scope = .shared
        default: return nil
        }
        containerIdentifier = container
        databaseScope = scope
        subscriptionID = subscription
        zoneName = try? body.decodeIfPresent("zid")
        recordName = try? body.decodeIfPresent("rid")
    }

    /// Reads a notification from the dictionary the platform hands the app (APNs' `userInfo`, FCM's
    /// `data`).
    public init?(userInfo: [AnyHashable: Any]) {
        var dictionary: [String: Any] = [:]
        for (key, value) in userInfo {
            if let key = key as? String { dictionary[key] = value }
        }
        guard JSONSerialization.isValidJSONObject(dictionary),
            let data = try? JSONSerialization.data(withJSONObject: dictionary)
        else { return nil }
        self.init(payload: data)
    }
}
