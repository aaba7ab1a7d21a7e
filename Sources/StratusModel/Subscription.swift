/// The kinds of subscription (CloudKit's `CKSubscription.SubscriptionType`).
public enum SubscriptionType: String, Sendable, Hashable, CaseIterable {
    /// Fires for records of one type that match a query (public and private databases).
    case query
    /// Fires for any change in one zone (private database).
    case zone
    /// Fires for any change in the database's custom zones (private and shared databases).
    case database

    /// Accepts CloudKit JS's names (`QUERY`, `RECORD_ZONE`, `DATABASE`) besides the Web Services ones.
    public init?(wireName: String) {
        switch wireName {
        case "QUERY": self = .query
        case "RECORD_ZONE", "ZONE": self = .zone
        case "DATABASE": self = .database
        default: self.init(rawValue: wireName)
        }
    }
}

extension SubscriptionType: JSONDecodable {
    public init(json: JSONValue) throws {
        let raw = try String(json: json)
        guard let type = SubscriptionType(wireName: raw) else {
            throw JSONDecodingError(.invalid, "'\(raw)' is not one of query, zone, database")
        }
        self = type
    }
}

/// What a query subscription fires on (`firesOn`).
public enum SubscriptionEvent: String, Sendable, Hashable, CaseIterable, WireEnum {
    case create, update, delete
}

/// What a notification carries besides the change (CloudKit's `CKSubscription.NotificationInfo`).
///
/// A notification is *silent* unless it has `alertBody`, `title`, `subtitle`, `soundName` or
/// `shouldBadge`, as in CloudKit. `desiredKeys` (at most 3) names record fields copied into query
/// notifications.
public struct NotificationInfo: Hashable, Sendable, JSONDecodable, JSONWritable {
    public var alertBody: String?
    public var alertLocalizationKey: String?
    public var alertLocalizationArgs: [String]?
    public var title: String?
    public var titleLocalizationKey: String?
    public var titleLocalizationArgs: [String]?
    public var subtitle: String?
    public var subtitleLocalizationKey: String?
    public var subtitleLocalizationArgs: [String]?
    public var alertActionLocalizationKey: String?
    public var alertLaunchImage: String?
    public var soundName: String?
    /// Fields of the record to copy into query notifications; at most 3.
    public var desiredKeys: [String]?
    public var shouldBadge: Bool?
    public var shouldSendContentAvailable: Bool?
    public var shouldSendMutableContent: Bool?
    public var category: String?
    public var collapseIDKey: String?

    /// Creates notification info; every property is optional.
    public init(
        alertBody: String? = nil, title: String? = nil, subtitle: String? = nil, soundName: String? = nil,
        desiredKeys: [String]? = nil, shouldBadge: Bool? = nil, shouldSendContentAvailable: Bool? = nil,
        category: String? = nil
    ) {
        self.alertBody = alertBody
        self.title = title
        self.subtitle = subtitle
        self.soundName = soundName
        self.desiredKeys = desiredKeys
        self.shouldBadge = shouldBadge
        self.shouldSendContentAvailable = shouldSendContentAvailable
        self.category = category
    }

    /// Whether the notification shows nothing to the user (no alert text, sound or badge).
    public var isSilent: Bool {
        alertBody == nil && alertLocalizationKey == nil && title == nil && titleLocalizationKey == nil
            && subtitle == nil && subtitleLocalizationKey == nil && soundName == nil && shouldBadge != true
    }

    /// The information a notification carries: everything but `desiredKeys`, which it resolves.
    public var presentation: NotificationInfo {
        var info = self
        info.desiredKeys = nil
        return info
    }

    public init(json: JSONValue) throws {
        let object = try json.object()
        alertBody = try object.decodeIfPresent("alertBody")
        alertLocalizationKey = try object.decodeIfPresent("alertLocalizationKey")
        alertLocalizationArgs = try object.decodeIfPresent("alertLocalizationArgs")
        title = try object.decodeIfPresent("title")
        titleLocalizationKey = try object.decodeIfPresent("titleLocalizationKey")
        titleLocalizationArgs = try object.decodeIfPresent("titleLocalizationArgs")
        subtitle = try object.decodeIfPresent("subtitle")
        subtitleLocalizationKey = try object.decodeIfPresent("subtitleLocalizationKey")
        subtitleLocalizationArgs = try object.decodeIfPresent("subtitleLocalizationArgs")
        alertActionLocalizationKey = try object.decodeIfPresent("alertActionLocalizationKey")
        alertLaunchImage = try object.decodeIfPresent("alertLaunchImage")
        soundName = try object.decodeIfPresent("soundName")
        desiredKeys = try object.decodeIfPresent("desiredKeys")
        shouldBadge = try object.decodeIfPresent("shouldBadge")
        shouldSendContentAvailable = try object.decodeIfPresent("shouldSendContentAvailable")
        shouldSendMutableContent = try object.decodeIfPresent("shouldSendMutableContent")
        category = try object.decodeIfPresent("category")
        collapseIDKey = try object.decodeIfPresent("collapseIDKey")
    }

    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("alertBody", alertBody)
        writer.field("alertLocalizationKey", alertLocalizationKey)
        writer.field("alertLocalizationArgs", alertLocalizationArgs)
        writer.field("title", title)
        writer.field("titleLocalizationKey", titleLocalizationKey)
        writer.field("titleLocalizationArgs", titleLocalizationArgs)
        writer.field("subtitle", subtitle)
        writer.field("subtitleLocalizationKey", subtitleLocalizationKey)
        writer.field("subtitleLocalizationArgs", subtitleLocalizationArgs)
        writer.field("alertActionLocalizationKey", alertActionLocalizationKey)
        writer.field("alertLaunchImage", alertLaunchImage)
        writer.field("soundName", soundName)
        writer.field("desiredKeys", desiredKeys)
        writer.field("shouldBadge", shouldBadge)
        writer.field("shouldSendContentAvailable", shouldSendContentAvailable)
        writer.field("shouldSendMutableContent", shouldSendMutableContent)
        writer.field("category", category)
        writer.field("collapseIDKey", collapseIDKey)
        writer.endObject()
    }
}

/// A subscription as it travels on the wire (CloudKit's Subscription Dictionary).
public struct SubscriptionDictionary: Hashable, Sendable, JSONDecodable, JSONWritable {
    /// The subscription's ID, unique among the owner's subscriptions in the database.
    public var subscriptionID: String?
    /// Which kind; required to create.
    public var subscriptionType: SubscriptionType?
    /// For query subscriptions: the record type and filters (`sortBy` is ignored).
    public var query: Query?
    /// For query subscriptions: the changes that fire it; all three when absent.
    public var firesOn: [SubscriptionEvent]?
    /// For query subscriptions: delete the subscription after it fires once.
    public var firesOnce: Bool?
    /// For query subscriptions: the zone searched; for zone subscriptions: the zone watched.
    public var zoneID: ZoneID?
    /// For query subscriptions: search every zone of the database.
    public var zoneWide: Bool?
    /// For zone and database subscriptions: fire only for records of this type.
    public var recordType: String?
    /// What notifications carry.
    public var notificationInfo: NotificationInfo?
    /// In the answer to a delete: `true`, as record and zone deletes answer.
    public var deleted: Bool?

    /// Creates a subscription dictionary.
    public init(
        subscriptionID: String? = nil, subscriptionType: SubscriptionType? = nil, query: Query? = nil,
        firesOn: [SubscriptionEvent]? = nil, firesOnce: Bool? = nil, zoneID: ZoneID? = nil, zoneWide: Bool? = nil,
        recordType: String? = nil, notificationInfo: NotificationInfo? = nil, deleted: Bool? = nil
    ) {
        self.deleted = deleted
        self.subscriptionID = subscriptionID
        self.subscriptionType = subscriptionType
        self.query = query
        self.firesOn = firesOn
        self.firesOnce = firesOnce
        self.zoneID = zoneID
        self.zoneWide = zoneWide
        self.recordType = recordType
        self.notificationInfo = notificationInfo
    }

    public init(json: JSONValue) throws {
        let object = try json.object()
        subscriptionID = try object.decodeIfPresent("subscriptionID")
        subscriptionType = try object.decodeIfPresent("subscriptionType")
        query = try object.decodeIfPresent("query")
        firesOn = try object.decodeIfPresent("firesOn")
        firesOnce = try object.decodeIfPresent("firesOnce")
        zoneID = try object.decodeIfPresent("zoneID")
        zoneWide = try object.decodeIfPresent("zoneWide")
        recordType = try object.decodeIfPresent("recordType")
        notificationInfo = try object.decodeIfPresent("notificationInfo")
        deleted = try object.decodeIfPresent("deleted")
    }

    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("subscriptionID", subscriptionID)
        writer.field("subscriptionType", subscriptionType?.rawValue)
        writer.field("query", query)
        writer.field("firesOn", firesOn?.map(\.rawValue))
        writer.field("firesOnce", firesOnce)
        writer.field("zoneID", zoneID)
        writer.field("zoneWide", zoneWide)
        writer.field("recordType", recordType)
        writer.field("notificationInfo", notificationInfo)
        writer.field("deleted", deleted)
        writer.endObject()
    }
}

/// The operation types of `subscriptions/modify`.
public enum SubscriptionOperationType: String, Sendable, Hashable, CaseIterable, WireEnum {
    /// Creates the subscription, or replaces the owner's subscription of the same ID.
    case create
    /// Replaces an existing subscription; `NOT_FOUND` when there is none.
    case update
    /// Deletes a subscription; `NOT_FOUND` when there is none.
    case delete
}

/// The body of `subscriptions/modify`.
public struct ModifySubscriptionsRequest: Hashable, Sendable, JSONDecodable, JSONWritable {
    /// One subscription operation.
    public struct Operation: Hashable, Sendable, JSONDecodable, JSONWritable {
        /// What to do.
        public var operationType: SubscriptionOperationType
        /// The subscription; only `subscriptionID` for a delete.
        public var subscription: SubscriptionDictionary

        /// Creates an operation.
        public init(operationType: SubscriptionOperationType, subscription: SubscriptionDictionary) {
            self.operationType = operationType
            self.subscription = subscription
        }

        public init(json: JSONValue) throws {
            let object = try json.object()
            operationType = try object.decode("operationType")
            subscription = try object.decode("subscription")
        }

        public func write(to writer: inout JSONWriter) {
            writer.beginObject()
            writer.field("operationType", operationType.rawValue)
            writer.field("subscription", subscription)
            writer.endObject()
        }
    }

    /// The operations, applied in order.
    public var operations: [Operation]

    /// Creates a request.
    public init(operations: [Operation]) { self.operations = operations }

    public init(json: JSONValue) throws {
        operations = try json.object().decode("operations")
    }

    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("operations", array: operations)
        writer.endObject()
    }
}

/// The body of `subscriptions/lookup`.
public struct LookupSubscriptionsRequest: Hashable, Sendable, JSONDecodable, JSONWritable {
    /// The IDs looked up.
    public var subscriptionIDs: [String]

    /// Creates a request.
    public init(subscriptionIDs: [String]) { self.subscriptionIDs = subscriptionIDs }

    /// Decodes `{"subscriptions": [{"subscriptionID": …}, …]}`; an item may also be the bare ID
    /// string, which clients written against Apple's servers send and Apple answers.
    public init(json: JSONValue) throws {
        let items: [JSONValue] = try json.object().decode("subscriptions", as: [JSONValue].self)
        subscriptionIDs = try items.enumerated().map { index, item in
            try withJSONPath(.key("subscriptions")) {
                try withJSONPath(.index(index)) {
                    if case .string(let id) = item { return id }
                    return try item.object().decode("subscriptionID")
                }
            }
        }
    }

    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.key("subscriptions")
        writer.beginArray()
        for id in subscriptionIDs {
            writer.beginObject()
            writer.field("subscriptionID", id)
            writer.endObject()
        }
        writer.endArray()
        writer.endObject()
    }
}

/// The answer of `subscriptions/list`, `subscriptions/lookup` and `subscriptions/modify`.
public struct SubscriptionsResponse: Sendable, JSONDecodable {
    /// One item per subscription, in order.
    public var subscriptions: [Result<SubscriptionDictionary, ErrorDictionary>]

    public init(json: JSONValue) throws {
        subscriptions = try json.object().decode("subscriptions")
    }
}
