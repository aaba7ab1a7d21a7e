public import StratusModel

/// A notification that a subscription fired (CloudKit's `CKNotification`, `CKQueryNotification`,
/// `CKRecordZoneNotification` and `CKDatabaseNotification`).
///
/// Notifications are hints: they say what changed, not the changes. Fetch with your change tokens
/// when one arrives. Waiting notifications of the same subscription and zone are coalesced into
/// the latest one, so do not count on one notification per change.
public struct PushNotification: Hashable, Sendable {
    /// What kind of subscription fired (CloudKit's `CKNotification.NotificationType`).
    public enum NotificationType: Hashable, Sendable {
        case query
        case recordZone
        case database
    }

    /// What happened to the record of a query notification (CloudKit's `CKQueryNotification.Reason`).
    public enum QueryNotificationReason: Hashable, Sendable {
        case recordCreated
        case recordUpdated
        case recordDeleted
    }

    /// Unique for each firing of a subscription.
    public let notificationID: String
    /// What kind of subscription fired.
    public let notificationType: NotificationType
    /// The subscription that fired.
    public let subscriptionID: Subscription.ID
    /// The container.
    public let containerIdentifier: String
    /// The database the change happened in.
    public let databaseScope: Database.Scope
    /// The zone that changed (query and zone notifications).
    public let recordZoneID: RecordZone.ID?
    /// The record that changed (query notifications).
    public let recordID: Record.ID?
    /// What happened to the record (query notifications).
    public let queryNotificationReason: QueryNotificationReason?
    /// The subscription's `desiredKeys` fields of the record, when it still has them.
    public let recordFields: [String: RecordFieldValue]
    /// The subscription's alert, sound, badge and content-available settings.
    public let notificationInfo: Subscription.NotificationInfo?

    /// Whether the notification shows nothing to the user: no alert, sound or badge.
    public var isSilent: Bool { notificationInfo?.isSilent ?? true }

    init(_ wire: PushNotificationDictionary, in database: Database) {
        notificationID = wire.notificationID
        notificationType = switch wire.notificationType {
        case .query: .query
        case .recordZone: .recordZone
        case .database: .database
        }
        subscriptionID = wire.subscriptionID
        containerIdentifier = wire.containerIdentifier
        databaseScope = database.databaseScope
        let zoneID = wire.zoneID.map(database.zoneID)
        recordZoneID = zoneID
        recordID = wire.recordName.map { Record.ID(recordName: $0, zoneID: zoneID ?? .default) }
        queryNotificationReason = wire.queryNotificationReason.map {
            switch $0 {
            case .recordCreated: .recordCreated
            case .recordUpdated: .recordUpdated
            case .recordDeleted: .recordDeleted
            }
        }
        recordFields = (wire.recordFields ?? [:]).mapValues { database.fieldValue($0, holderZone: zoneID ?? .default) }
        notificationInfo = wire.notificationInfo
    }
}

/// What the push channel reports (``Container/notifications()``).
public enum PushEvent: Hashable, Sendable {
    /// A subscription fired.
    case notification(PushNotification)
    /// Notifications may have been lost: the server restarted, this device was away longer than the
    /// server keeps its queue, or too many waited. Fetch everything with your change tokens. It is
    /// reported after the first connection too, since nothing before it was heard.
    case missedNotifications
}
