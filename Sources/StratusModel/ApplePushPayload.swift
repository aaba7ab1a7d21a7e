/// A notification in the shape of Apple's push payloads, as a bare poll of a `webcourierURL`
/// answers it (what Apple's web library and native parsers read): `{"aps": {…}, "ck": {…}}`.
///
/// `ck` holds `nid` (notification ID), `cid` (container), `ckuserid` (the notified user) and one of
/// `qry` (query: `sid`, `rid`, `zid`, `zoid`, `dbs`, `fo` 1 created / 2 updated / 3 deleted, `af` the
/// desired fields' raw values), `fet` (zone: `sid`, `zid`, `zoid`, `dbs`) or `met` (database:
/// `sid`, `dbs`, and `zid`/`zoid` of the zone changed). `dbs` is 1 for the private database and 2
/// for the public one, as Apple's payloads show, and 3 for the shared one. `aps` is
/// `{"content-available": 1}` for a silent notification, or the alert, sound, badge and category.
public struct ApplePushPayload: Sendable, JSONWritable {
    /// The notification.
    public var notification: PushNotificationDictionary
    /// The user notified.
    public var userRecordName: String

    /// The payload of `notification`, sent to `userRecordName`.
    public init(_ notification: PushNotificationDictionary, userRecordName: String) {
        self.notification = notification
        self.userRecordName = userRecordName
    }

    /// Apple's number for a database scope.
    public static func databaseNumber(_ scope: DatabaseScope) -> Int64 {
        switch scope {
        case .private: 1
        case .public: 2
        case .shared: 3
        }
    }

    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writeAPS(to: &writer)
        writer.key("ck")
        writeCK(to: &writer)
        writer.endObject()
    }

    /// The `ck` dictionary alone, which FCM data messages carry.
    public func writeCK(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("nid", notification.notificationID)
        writer.field("cid", notification.containerIdentifier)
        writer.field("ckuserid", userRecordName)
        switch notification.notificationType {
        case .query: writer.key("qry")
        case .recordZone: writer.key("fet")
        case .database: writer.key("met")
        }
        writer.beginObject()
        writer.field("sid", notification.subscriptionID)
        writer.field("dbs", Self.databaseNumber(notification.databaseScope))
        writer.field("zid", notification.zoneID?.zoneName)
        writer.field("zoid", notification.zoneID?.ownerRecordName)
        writer.field("rid", notification.recordName)
        if let reason = notification.queryNotificationReason {
            let firesOn: Int64 =
                switch reason {
                case .recordCreated: 1
                case .recordUpdated: 2
                case .recordDeleted: 3
                }
            writer.field("fo", firesOn)
        }
        if let fields = notification.recordFields, !fields.isEmpty {
            writer.key("af")
            writer.beginObject()
            for name in fields.keys.sorted() {
                writer.key(name)
                fields[name]!.writeValue(to: &writer, numbersAsStrings: false)
            }
            writer.endObject()
        }
        writer.endObject()
        writer.endObject()
    }

    private func writeAPS(to writer: inout JSONWriter) {
        writer.key("aps")
        writer.beginObject()
        guard let info = notification.notificationInfo, !info.isSilent else {
            writer.field("content-available", Int64(1))
            writer.endObject()
            return
        }
        writer.key("alert")
        writer.beginObject()
        writer.field("title", info.title)
        writer.field("title-loc-key", info.titleLocalizationKey)
        writer.field("title-loc-args", info.titleLocalizationArgs)
        writer.field("subtitle", info.subtitle)
        writer.field("subtitle-loc-key", info.subtitleLocalizationKey)
        writer.field("subtitle-loc-args", info.subtitleLocalizationArgs)
        writer.field("body", info.alertBody)
        writer.field("loc-key", info.alertLocalizationKey)
        writer.field("loc-args", info.alertLocalizationArgs)
        writer.field("action-loc-key", info.alertActionLocalizationKey)
        writer.field("launch-image", info.alertLaunchImage)
        writer.endObject()
        writer.field("sound", info.soundName)
        if info.shouldBadge == true { writer.field("badge", Int64(1)) }
        writer.field("category", info.category)
        if info.shouldSendContentAvailable == true { writer.field("content-available", Int64(1)) }
        if info.shouldSendMutableContent == true { writer.field("mutable-content", Int64(1)) }
        writer.endObject()
    }
}
