public import StratusModel

/// A standing request to be notified of changes (CloudKit's `CKQuerySubscription`,
/// `CKRecordZoneSubscription` and `CKDatabaseSubscription`).
///
/// ```swift
/// let notes = Subscription.recordZone(zoneID: zoneID, subscriptionID: "notes")
/// try await container.privateCloudDatabase.save(notes)
/// for try await event in container.notifications() { … }
/// ```
///
/// A subscription belongs to the user who saves it; its notifications go to that user's devices,
/// except the device that made the change. Notifications are hints: fetch the changes with your
/// change tokens when one arrives.
public struct Subscription: Hashable, Sendable {
    /// A subscription's ID, unique among the user's subscriptions in a database.
    public typealias ID = String
    /// What a notification carries: alert text, sound, badge, content-available, and up to three
    /// record fields (`desiredKeys`) for query subscriptions.
    public typealias NotificationInfo = StratusModel.NotificationInfo

    /// When a query subscription fires (CloudKit's `CKQuerySubscription.Options`).
    public struct QueryOptions: OptionSet, Hashable, Sendable {
        public let rawValue: Int
        public init(rawValue: Int) { self.rawValue = rawValue }

        /// When a matching record is created.
        public static let firesOnRecordCreation = QueryOptions(rawValue: 1)
        /// When a record that matches before or after the change is updated.
        public static let firesOnRecordUpdate = QueryOptions(rawValue: 2)
        /// When a matching record is deleted.
        public static let firesOnRecordDeletion = QueryOptions(rawValue: 4)
        /// Delete the subscription once it has fired.
        public static let firesOnce = QueryOptions(rawValue: 8)
    }

    /// What the subscription watches.
    public enum Kind: Hashable, Sendable {
        /// Records of `recordType` matching `predicate`, in `zoneID` (every zone when `nil`).
        /// Public and private databases.
        case query(recordType: String, predicate: Query.Predicate, options: QueryOptions, zoneID: RecordZone.ID?)
        /// Every change in a custom zone (of `recordType` only, when given). Private database.
        case recordZone(zoneID: RecordZone.ID, recordType: String?)
        /// Every change in the database's custom zones (of `recordType` only, when given). Private
        /// and shared databases.
        case database(recordType: String?)
    }

    /// The subscription's ID.
    public var subscriptionID: ID
    /// What it watches.
    public var kind: Kind
    /// What its notifications carry.
    public var notificationInfo: NotificationInfo?

    /// Creates a subscription.
    public init(subscriptionID: ID, kind: Kind, notificationInfo: NotificationInfo? = nil) {
        self.subscriptionID = subscriptionID
        self.kind = kind
        self.notificationInfo = notificationInfo
    }

    /// A query subscription (CloudKit's `CKQuerySubscription(recordType:predicate:subscriptionID:options:)`).
    public static func query(
        recordType: String, predicate: Query.Predicate = .all, subscriptionID: ID,
        options: QueryOptions = [.firesOnRecordCreation, .firesOnRecordUpdate, .firesOnRecordDeletion],
        zoneID: RecordZone.ID? = nil, notificationInfo: NotificationInfo? = nil
    ) -> Subscription {
        Subscription(
            subscriptionID: subscriptionID,
            kind: .query(recordType: recordType, predicate: predicate, options: options, zoneID: zoneID),
            notificationInfo: notificationInfo)
    }

    /// A zone subscription (CloudKit's `CKRecordZoneSubscription(zoneID:subscriptionID:)`).
    public static func recordZone(
        zoneID: RecordZone.ID, subscriptionID: ID, recordType: String? = nil, notificationInfo: NotificationInfo? = nil
    ) -> Subscription {
        Subscription(
            subscriptionID: subscriptionID, kind: .recordZone(zoneID: zoneID, recordType: recordType),
            notificationInfo: notificationInfo)
    }

    /// A database subscription (CloudKit's `CKDatabaseSubscription(subscriptionID:)`).
    public static func database(
        subscriptionID: ID, recordType: String? = nil, notificationInfo: NotificationInfo? = nil
    ) -> Subscription {
        Subscription(subscriptionID: subscriptionID, kind: .database(recordType: recordType), notificationInfo: notificationInfo)
    }
}

extension Database {
    /// The wire form of a subscription.
    func wireSubscription(_ subscription: Subscription) -> SubscriptionDictionary {
        var wire = SubscriptionDictionary(
            subscriptionID: subscription.subscriptionID, notificationInfo: subscription.notificationInfo)
        switch subscription.kind {
        case .query(let recordType, let predicate, let options, let zoneID):
            wire.subscriptionType = .query
            wire.query = Query(recordType: recordType, predicate: predicate).wire
            wire.firesOn = [
                (Subscription.QueryOptions.firesOnRecordCreation, SubscriptionEvent.create),
                (.firesOnRecordUpdate, .update), (.firesOnRecordDeletion, .delete),
            ].filter { options.contains($0.0) }.map(\.1)
            wire.firesOnce = options.contains(.firesOnce) ? true : nil
            wire.zoneID = zoneID.map(wireZoneID)
            wire.zoneWide = zoneID == nil ? true : nil
        case .recordZone(let zoneID, let recordType):
            wire.subscriptionType = .zone
            wire.zoneID = wireZoneID(zoneID)
            wire.recordType = recordType
        case .database(let recordType):
            wire.subscriptionType = .database
            wire.recordType = recordType
        }
        return wire
    }

    /// A subscription from its wire form.
    func subscription(_ wire: SubscriptionDictionary) throws(CloudError) -> Subscription {
        guard let id = wire.subscriptionID, let type = wire.subscriptionType else {
            throw CloudError(.serverRejectedRequest, "the server sent a subscription without subscriptionID or subscriptionType")
        }
        let kind: Subscription.Kind
        switch type {
        case .query:
            guard let query = wire.query else {
                throw CloudError(.serverRejectedRequest, "the server sent query subscription '\(id)' without its query")
            }
            var options: Subscription.QueryOptions = []
            let events = wire.firesOn ?? SubscriptionEvent.allCases
            if events.contains(.create) { options.insert(.firesOnRecordCreation) }
            if events.contains(.update) { options.insert(.firesOnRecordUpdate) }
            if events.contains(.delete) { options.insert(.firesOnRecordDeletion) }
            if wire.firesOnce == true { options.insert(.firesOnce) }
            kind = .query(
                recordType: query.recordType, predicate: Query.Predicate(filters: query.filterBy), options: options,
                zoneID: wire.zoneWide == true ? nil : zoneID(wire.zoneID ?? .defaultZone))
        case .zone:
            kind = .recordZone(zoneID: zoneID(wire.zoneID ?? .defaultZone), recordType: wire.recordType)
        case .database:
            kind = .database(recordType: wire.recordType)
        }
        return Subscription(subscriptionID: id, kind: kind, notificationInfo: wire.notificationInfo)
    }
}
