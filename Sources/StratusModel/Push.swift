/// The body of `tokens/create`.
public struct CreatePushTokenRequest: Hashable, Sendable, JSONDecodable, JSONWritable {
    /// `development` or `production`; the path's environment when absent.
    public var apnsEnvironment: ContainerEnvironment?

    /// Creates a request.
    public init(apnsEnvironment: ContainerEnvironment? = nil) { self.apnsEnvironment = apnsEnvironment }

    public init(json: JSONValue) throws {
        apnsEnvironment = try json.object().decodeIfPresent("apnsEnvironment")
    }

    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("apnsEnvironment", apnsEnvironment?.rawValue)
        writer.endObject()
    }
}

/// The answer of `tokens/create` and `tokens/register`: a push token and the URL its notifications
/// arrive at; for a registered platform endpoint (an APNs device token, an FCM token, a Web Push
/// subscription), what was registered.
public struct PushTokenResponse: Hashable, Sendable, JSONDecodable, JSONWritable {
    /// The environment the token belongs to.
    public var apnsEnvironment: ContainerEnvironment
    /// The token; register it with `tokens/register` to receive the signed-in user's notifications.
    /// For a registration of an APNs device token, that token; absent for FCM and Web Push.
    public var apnsToken: String?
    /// Where to connect (WebSocket) or long-poll (HTTP GET) for notifications; absent for a
    /// platform endpoint, which its push service delivers to.
    public var webcourierURL: String?
    /// The container's VAPID public key (base64url), which a web app subscribes with
    /// (`PushManager.subscribe`'s `applicationServerKey`) when the container sends Web Push. A
    /// Stratus extension.
    public var webPushPublicKey: String?

    /// Creates an answer.
    public init(
        apnsEnvironment: ContainerEnvironment, apnsToken: String?, webcourierURL: String?, webPushPublicKey: String? = nil
    ) {
        self.apnsEnvironment = apnsEnvironment
        self.apnsToken = apnsToken
        self.webcourierURL = webcourierURL
        self.webPushPublicKey = webPushPublicKey
    }

    public init(json: JSONValue) throws {
        let object = try json.object()
        apnsEnvironment = try object.decode("apnsEnvironment")
        apnsToken = try object.decodeIfPresent("apnsToken")
        webcourierURL = try object.decodeIfPresent("webcourierURL")
        webPushPublicKey = try object.decodeIfPresent("webPushPublicKey")
    }

    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("apnsEnvironment", apnsEnvironment.rawValue)
        writer.field("apnsToken", apnsToken)
        writer.field("webcourierURL", webcourierURL)
        writer.field("webPushPublicKey", webPushPublicKey)
        writer.endObject()
    }
}

/// A browser's Web Push subscription, as `PushSubscription.toJSON()` gives it.
public struct WebPushSubscription: Hashable, Sendable, JSONDecodable, JSONWritable {
    /// The push service's URL for this subscription.
    public var endpoint: String
    /// `keys.p256dh`: the subscription's P-256 public key, base64url.
    public var p256dh: String
    /// `keys.auth`: the subscription's 16-byte authentication secret, base64url.
    public var auth: String

    /// Creates a subscription.
    public init(endpoint: String, p256dh: String, auth: String) {
        self.endpoint = endpoint
        self.p256dh = p256dh
        self.auth = auth
    }

    public init(json: JSONValue) throws {
        let object = try json.object()
        endpoint = try object.decode("endpoint")
        guard let keysValue = object["keys"] else { throw JSONDecodingError(.missing, "", at: [.key("keys")]) }
        let keys = try withJSONPath(.key("keys")) { try keysValue.object() }
        (p256dh, auth) = try withJSONPath(.key("keys")) { (try keys.decode("p256dh"), try keys.decode("auth")) }
    }

    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("endpoint", endpoint)
        writer.key("keys")
        writer.beginObject()
        writer.field("p256dh", p256dh)
        writer.field("auth", auth)
        writer.endObject()
        writer.endObject()
    }
}

/// The body of `tokens/register`: one of a push token from `tokens/create`, an APNs device token,
/// an FCM registration token, or a Web Push subscription.
public struct RegisterPushTokenRequest: Hashable, Sendable, JSONDecodable, JSONWritable {
    /// The token's environment; for an APNs device token, the APNs environment it was issued in
    /// (`development`: the sandbox), the container's environment when absent.
    public var apnsEnvironment: ContainerEnvironment?
    /// The token from `tokens/create`, or the device token the app got from APNs, in hexadecimal.
    public var apnsToken: String?
    /// The registration token the app got from Firebase Cloud Messaging. A Stratus extension.
    public var fcmToken: String?
    /// The browser's Web Push subscription. A Stratus extension.
    public var webPushSubscription: WebPushSubscription?

    /// Creates a request.
    public init(
        apnsEnvironment: ContainerEnvironment? = nil, apnsToken: String? = nil, fcmToken: String? = nil,
        webPushSubscription: WebPushSubscription? = nil
    ) {
        self.apnsEnvironment = apnsEnvironment
        self.apnsToken = apnsToken
        self.fcmToken = fcmToken
        self.webPushSubscription = webPushSubscription
    }

    public init(json: JSONValue) throws {
        let object = try json.object()
        apnsEnvironment = try object.decodeIfPresent("apnsEnvironment")
        apnsToken = try object.decodeIfPresent("apnsToken")
        fcmToken = try object.decodeIfPresent("fcmToken")
        webPushSubscription = try object.decodeIfPresent("webPushSubscription")
        let given = [apnsToken != nil, fcmToken != nil, webPushSubscription != nil].count(where: { $0 })
        guard given == 1 else {
            throw JSONDecodingError(.invalid, "exactly one of apnsToken, fcmToken and webPushSubscription is required")
        }
    }

    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("apnsEnvironment", apnsEnvironment?.rawValue)
        writer.field("apnsToken", apnsToken)
        writer.field("fcmToken", fcmToken)
        writer.field("webPushSubscription", webPushSubscription)
        writer.endObject()
    }
}

/// The kind of a notification (CloudKit's `CKNotification.NotificationType`).
public enum NotificationType: String, Sendable, Hashable, CaseIterable, WireEnum {
    case query
    case recordZone
    case database
}

/// Why a query notification fired (CloudKit's `CKQueryNotification.Reason`).
public enum QueryNotificationReason: String, Sendable, Hashable, CaseIterable, WireEnum {
    case recordCreated
    case recordUpdated
    case recordDeleted
}

/// A notification as the push channel delivers it: a hint that something changed, to be followed
/// by a fetch with change tokens.
public struct PushNotificationDictionary: Hashable, Sendable, JSONDecodable, JSONWritable {
    /// Unique for each firing of a subscription.
    public var notificationID: String
    /// Query, zone or database.
    public var notificationType: NotificationType
    /// The subscription that fired.
    public var subscriptionID: String
    /// The container.
    public var containerIdentifier: String
    /// The database the change happened in.
    public var databaseScope: DatabaseScope
    /// The zone changed (query and zone notifications).
    public var zoneID: ZoneID?
    /// The record changed (query notifications).
    public var recordName: String?
    /// What happened to the record (query notifications).
    public var queryNotificationReason: QueryNotificationReason?
    /// The subscription's `desiredKeys` fields of the record (query notifications of created and
    /// updated records that hold them).
    public var recordFields: [String: FieldValue]?
    /// The subscription's notification info (alert, sound, badge, content-available…).
    public var notificationInfo: NotificationInfo?

    /// Creates a notification.
    public init(
        notificationID: String, notificationType: NotificationType, subscriptionID: String, containerIdentifier: String,
        databaseScope: DatabaseScope, zoneID: ZoneID? = nil, recordName: String? = nil,
        queryNotificationReason: QueryNotificationReason? = nil, recordFields: [String: FieldValue]? = nil,
        notificationInfo: NotificationInfo? = nil
    ) {
        self.notificationID = notificationID
        self.notificationType = notificationType
        self.subscriptionID = subscriptionID
        self.containerIdentifier = containerIdentifier
        self.databaseScope = databaseScope
        self.zoneID = zoneID
        self.recordName = recordName
        self.queryNotificationReason = queryNotificationReason
        self.recordFields = recordFields
        self.notificationInfo = notificationInfo
    }

    public init(json: JSONValue) throws {
        let object = try json.object()
        notificationID = try object.decode("notificationID")
        notificationType = try object.decode("notificationType")
        subscriptionID = try object.decode("subscriptionID")
        containerIdentifier = try object.decode("containerIdentifier")
        databaseScope = try object.decode("databaseScope")
        zoneID = try object.decodeIfPresent("zoneID")
        recordName = try object.decodeIfPresent("recordName")
        queryNotificationReason = try object.decodeIfPresent("queryNotificationReason")
        recordFields = try object.decodeIfPresent("recordFields")
        notificationInfo = try object.decodeIfPresent("notificationInfo")
    }

    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("notificationID", notificationID)
        writer.field("notificationType", notificationType.rawValue)
        writer.field("subscriptionID", subscriptionID)
        writer.field("containerIdentifier", containerIdentifier)
        writer.field("databaseScope", databaseScope.rawValue)
        writer.field("zoneID", zoneID)
        writer.field("recordName", recordName)
        writer.field("queryNotificationReason", queryNotificationReason?.rawValue)
        if let recordFields {
            writer.key("recordFields")
            RecordDictionary.writeFields(recordFields, to: &writer)
        }
        writer.field("notificationInfo", notificationInfo)
        writer.endObject()
    }
}

/// One message of the push channel, as a WebSocket text frame.
public enum PushMessage: Hashable, Sendable, JSONDecodable, JSONWritable {
    /// The first message after connecting. `missedNotifications` is true when the server cannot
    /// vouch that every notification since this device's last connection follows: fetch with your
    /// change tokens.
    case connected(missedNotifications: Bool)
    /// A notification.
    case notification(PushNotificationDictionary)
    /// Notifications were dropped (the device's queue overflowed): fetch with your change tokens.
    case missedNotifications

    public init(json: JSONValue) throws {
        let object = try json.object()
        let type: String = try object.decode("type")
        switch type {
        case "connected": self = .connected(missedNotifications: try object.decodeIfPresent("missedNotifications") ?? false)
        case "notification": self = .notification(try object.decode("notification"))
        case "missedNotifications": self = .missedNotifications
        default:
            throw JSONDecodingError(
                .invalid, "'\(type)' is not one of connected, notification, missedNotifications", at: [.key("type")])
        }
    }

    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        switch self {
        case .connected(let missed):
            writer.field("type", "connected")
            writer.field("missedNotifications", missed)
        case .notification(let notification):
            writer.field("type", "notification")
            writer.field("notification", notification)
        case .missedNotifications:
            writer.field("type", "missedNotifications")
        }
        writer.endObject()
    }
}

/// The answer of a long poll of the push URL (HTTP GET without a WebSocket upgrade).
public struct PushPollResponse: Hashable, Sendable, JSONDecodable, JSONWritable {
    /// The notifications waiting, oldest first; empty when the poll timed out.
    public var notifications: [PushNotificationDictionary]
    /// Whether notifications may have been missed since the previous poll: fetch with your change tokens.
    public var missedNotifications: Bool

    /// Creates an answer.
    public init(notifications: [PushNotificationDictionary], missedNotifications: Bool) {
        self.notifications = notifications
        self.missedNotifications = missedNotifications
    }

    public init(json: JSONValue) throws {
        let object = try json.object()
        notifications = try object.decode("notifications")
        missedNotifications = try object.decodeIfPresent("missedNotifications") ?? false
    }

    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("notifications", array: notifications)
        writer.field("missedNotifications", missedNotifications)
        writer.endObject()
    }
}
