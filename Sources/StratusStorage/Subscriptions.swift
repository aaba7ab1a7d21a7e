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
