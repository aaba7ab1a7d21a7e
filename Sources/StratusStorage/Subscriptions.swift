public import StratusModel

/// A subscription as storage keeps it: whose it is, in which database, and its definition.
public struct StoredSubscription: Hashable, Sendable {
    /// The database it watches.
    public var database: DatabaseLocator
    /// The user who created it and receives its notifications. In the private and shared databases
    /// this is the database's owner; in the public database any user.
    public var subscriber: String
    /// The subscription's definition; its `subscriptionID` is set.
    public var definition: SubscriptionDictionary
    /// When it was created, in milliseconds since 1970.
    public var createdAt: Int64

    /// Creates a stored subscription.
    public init(database: DatabaseLocator, subscriber: String, definition: SubscriptionDictionary, createdAt: Int64) {
        self.database = database
        self.subscriber = subscriber
        self.definition = definition
        self.createdAt = createdAt
    }

    /// The subscription's ID.
    public var subscriptionID: String { definition.subscriptionID ?? "" }
}

/// A device's push token, found by the hash of the token.
public struct PushTokenInfo: Hashable, Sendable {
    /// The container it was created for.
    public var container: String
    /// The environment it was created for.
    public var environment: ContainerEnvironment
    /// The user it is registered to; `nil` until `tokens/register`.
    public var userRecordName: String?
    /// The device that registered it (`X-Stratus-Device-ID`).
    public var deviceID: String?
    /// When it was created, in milliseconds since 1970.
    public var createdAt: Int64
    /// When it was last registered or connected with, in milliseconds since 1970.
    public var usedAt: Int64

    /// Creates token information.
    public init(
        container: String, environment: ContainerEnvironment, userRecordName: String? = nil, deviceID: String? = nil,
        createdAt: Int64, usedAt: Int64
    ) {
        self.container = container
        self.environment = environment
        self.userRecordName = userRecordName
        self.deviceID = deviceID
        self.createdAt = createdAt
        self.usedAt = usedAt
    }
}

/// Where a push service delivers to one of a user's devices: an APNs device token, an FCM
/// registration token, or a Web Push subscription, registered through `tokens/register`.
public struct PushEndpointInfo: Hashable, Sendable {
    /// The push service, and for APNs its environment.
    public enum Channel: String, Hashable, Sendable, CaseIterable {
        /// Apple's push service, sandbox (`api.sandbox.push.apple.com`).
        case apnsDevelopment = "apns-development"
        /// Apple's push service, production (`api.push.apple.com`).
        case apnsProduction = "apns-production"
        /// Firebase Cloud Messaging (HTTP v1).
        case fcm
        /// A Web Push service (RFC 8030), with RFC 8291 encryption.
        case webPush = "webpush"
    }

    /// The registration's key: the hash of the container, environment, channel and address, so that
    /// an address is registered once per container and environment.
    public var id: String
    /// The container it delivers for.
    public var container: String
    /// The container's environment it delivers for.
    public var environment: ContainerEnvironment
    /// The user whose notifications it receives.
    public var userRecordName: String
    /// The device that registered it (`X-Stratus-Device-ID`), which never hears of its own changes.
    public var deviceID: String?
    /// The push service.
    public var channel: Channel
    /// The device token (APNs, hexadecimal), the registration token (FCM) or the subscription's
    /// endpoint URL (Web Push).
    public var address: String
    /// A Web Push subscription's `keys.p256dh` (base64url), the key its messages are encrypted to.
    public var publicKey: String?
    /// A Web Push subscription's `keys.auth` (base64url).
    public var authSecret: String?
    /// When it was first registered, in milliseconds since 1970.
    public var createdAt: Int64
    /// When it was last registered, in milliseconds since 1970.
    public var usedAt: Int64

    /// Creates a registration.
    public init(
        id: String, container: String, environment: ContainerEnvironment, userRecordName: String, deviceID: String?,
        channel: Channel, address: String, publicKey: String? = nil, authSecret: String? = nil, createdAt: Int64,
        usedAt: Int64
    ) {
        self.id = id
        self.container = container
        self.environment = environment
        self.userRecordName = userRecordName
        self.deviceID = deviceID
        self.channel = channel
        self.address = address
        self.publicKey = publicKey
        self.authSecret = authSecret
        self.createdAt = createdAt
        self.usedAt = usedAt
    }
}
