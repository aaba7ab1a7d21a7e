import Foundation
import StratusModel
import StratusStorage

/// Decides which subscriptions a committed change fires, and what each notification says.
///
/// - A **query** subscription fires once per record change of its record type in the zones it
///   covers (its `zoneID`, every zone with `zoneWide`, otherwise the default zone) when `firesOn`
///   has the change's kind and the record matches the filters: the new record for a creation, the
///   deleted one for a deletion, the old or the new one for an update (so a record that leaves the
///   results is reported too). In the public database the subscriber must be allowed to read it.
/// - A **zone** subscription fires once per batch that changes its zone (records of its
///   `recordType` only, when it has one), or deletes the zone.
/// - A **database** subscription fires once per batch that changes a custom zone of the database
///   (records of its `recordType` only, when it has one), creates or deletes one.
struct SubscriptionMatcher {
    /// A subscription that fired, with its notification.
    struct Firing {
        var subscription: StoredSubscription
        var notification: PushNotificationDictionary
    }

    let database: DatabaseLocator
    /// The environment's schema, for the public database's READ grants and the SEARCHABLE fields a
    /// search of `___all` reads.
    let schema: Schema
    /// The owner of the zones changed: the database's own, or for a subscriber's shared database the
    /// owner of the shared zone.
    let zoneOwner: String

    init(database: DatabaseLocator, schema: Schema, zoneOwner: String? = nil) {
        self.database = database
        self.schema = schema
        self.zoneOwner = zoneOwner ?? database.owner
    }

    /// The firings of record changes in `zone`, in the order of the changes.
    func firings(of changes: [RecordChange], zone: String, subscriptions: [StoredSubscription]) -> [Firing] {
        var firings: [Firing] = []
        for subscription in subscriptions {
            let definition = subscription.definition
            switch definition.subscriptionType {
            case .query?:
                guard let query = definition.query, covers(definition, zone: zone) else { continue }
                for change in changes where change.record.recordType == query.recordType {
                    guard let reason = reason(of: change, firesOn: definition.firesOn),
                        matches(query, change), canRead(change, subscriber: subscription.subscriber)
                    else { continue }
                    firings.append(
                        Firing(
                            subscription: subscription,
                            notification: notification(
                                .query, subscription, zone: zone, recordName: change.record.name, reason: reason,
                                fields: change.record.deleted ? nil : desiredFields(of: change.record, definition))))
                    if definition.firesOnce == true { break }
                }
            case .zone?:
                guard covers(zoneID: definition.zoneID, zone: zone),
                    changes.contains(where: { definition.recordType == nil || $0.record.recordType == definition.recordType })
                else { continue }
                firings.append(Firing(subscription: subscription, notification: notification(.recordZone, subscription, zone: zone)))
            case .database?:
                guard zone != ZoneID.defaultZoneName,
                    changes.contains(where: { definition.recordType == nil || $0.record.recordType == definition.recordType })
                else { continue }
                firings.append(Firing(subscription: subscription, notification: notification(.database, subscription)))
            case nil:
                continue
            }
        }
        return firings
    }

    /// The firings of a custom zone created or deleted.
    func firings(ofZone zone: String, deleted: Bool, subscriptions: [StoredSubscription]) -> [Firing] {
        subscriptions.compactMap { subscription in
            switch subscription.definition.subscriptionType {
            case .database?:
                Firing(subscription: subscription, notification: notification(.database, subscription))
            case .zone? where deleted && covers(zoneID: subscription.definition.zoneID, zone: zone):
                Firing(subscription: subscription, notification: notification(.recordZone, subscription, zone: zone))
            default:
                nil
            }
        }
    }

    /// Whether a subscription's `zoneID` names `zone` (of ``zoneOwner``, in the shared database).
    private func covers(zoneID: ZoneID?, zone: String) -> Bool {
        guard let zoneID, zoneID.zoneName == zone else { return false }
        return database.scope != .shared || zoneID.ownerRecordName == zoneOwner
    }

    /// Whether a query subscription covers `zone`.
    private func covers(_ definition: SubscriptionDictionary, zone: String) -> Bool {
        if definition.zoneID != nil { return covers(zoneID: definition.zoneID, zone: zone) }
        return definition.zoneWide == true || zone == ZoneID.defaultZoneName
    }

    /// The notification reason of a change, when the subscription fires on its kind.
    private func reason(of change: RecordChange, firesOn: [SubscriptionEvent]?) -> QueryNotificationReason? {
        let events = firesOn ?? SubscriptionEvent.allCases
        switch change.kind {
        case .created: return events.contains(.create) ? .recordCreated : nil
        case .updated: return events.contains(.update) ? .recordUpdated : nil
        case .deleted: return events.contains(.delete) ? .recordDeleted : nil
        }
    }

    /// Whether the record matches every filter, as a query with the same filters would find it:
    /// before or after an update, as it was for a deletion.
    private func matches(_ query: Query, _ change: RecordChange) -> Bool {
        guard !query.filterBy.isEmpty else { return true }
        let recordQuery = RecordQuery(
            recordType: query.recordType, filters: query.filterBy,
            fields: schema.recordTypes[query.recordType]?.fields ?? [:], limit: 0)
        func satisfies(_ record: StoredRecord?) -> Bool {
            guard let record, !record.deleted, let fields = try? record.queryFields() else { return false }
            return recordQuery.matches(fields)
        }
        switch change.kind {
        case .created: return satisfies(change.record)
        case .updated: return satisfies(change.record) || satisfies(change.previous)
        case .deleted: return satisfies(change.previous)
        }
    }

    /// Whether the subscriber may read the record (the public database's READ grants).
    private func canRead(_ change: RecordChange, subscriber: String) -> Bool {
        ReadAccess(
            recordType: change.record.recordType, schema: schema, scope: database.scope,
            environment: database.environment, user: subscriber
        ).allows(creator: change.record.created.userRecordName)
    }

    /// The subscription's `desiredKeys` fields of a record.
    private func desiredFields(of record: StoredRecord, _ definition: SubscriptionDictionary) -> [String: FieldValue]? {
        guard let keys = definition.notificationInfo?.desiredKeys, !keys.isEmpty,
            let fields = try? record.decodeFields()
        else { return nil }
        let chosen = fields.filter { keys.contains($0.key) }
        return chosen.isEmpty ? nil : chosen
    }

    private func notification(
        _ type: NotificationType, _ subscription: StoredSubscription, zone: String? = nil, recordName: String? = nil,
        reason: QueryNotificationReason? = nil, fields: [String: FieldValue]? = nil
    ) -> PushNotificationDictionary {
        PushNotificationDictionary(
            notificationID: UUID().uuidString, notificationType: type, subscriptionID: subscription.subscriptionID,
            containerIdentifier: database.container, databaseScope: database.scope,
            zoneID: zone.map { ZoneID(zoneName: $0, ownerRecordName: zoneOwner) }, recordName: recordName,
            queryNotificationReason: reason, recordFields: fields,
            notificationInfo: subscription.definition.notificationInfo?.presentation)
    }
}
