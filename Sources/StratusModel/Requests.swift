/// The operation types of `records/modify`.
public enum RecordOperationType: String, Sendable, Hashable, CaseIterable {
    /// Create; fails with `EXISTS` when the record exists.
    case create
    /// Change the given fields; needs the current `recordChangeTag`.
    case update
    /// Change the given fields whatever the change tag; creates a missing record.
    case forceUpdate
    /// Replace all fields; needs the current `recordChangeTag`.
    case replace
    /// Replace all fields whatever the change tag; creates a missing record.
    case forceReplace
    /// Delete; needs the current `recordChangeTag`.
    case delete
    /// Delete whatever the change tag.
    case forceDelete

    /// Whether the operation checks `recordChangeTag`.
    public var checksChangeTag: Bool { self == .update || self == .replace || self == .delete }
    /// Whether the operation deletes.
    public var isDelete: Bool { self == .delete || self == .forceDelete }
}

/// One operation of a `records/modify` request.
public struct RecordOperation: Hashable, Sendable, Decodable {
    /// What to do.
    public var operationType: RecordOperationType
    /// The record to write, or the name and tag of the record to delete.
    public var record: RecordDictionary
    /// Fields to return for this operation, overriding the request's `desiredKeys`.
    public var desiredKeys: [String]?

    /// Creates an operation.
    public init(operationType: RecordOperationType, record: RecordDictionary, desiredKeys: [String]? = nil) {
        self.operationType = operationType
        self.record = record
        self.desiredKeys = desiredKeys
    }
}

/// The body of `records/modify`.
public struct ModifyRecordsRequest: Hashable, Sendable, Decodable {
    /// The operations, applied in order.
    public var operations: [RecordOperation]
    /// The zone of every record; the default zone when absent.
    public var zoneID: ZoneID?
    /// In a custom zone, whether the request succeeds or fails as a whole (default `true`).
    public var atomic: Bool?
    /// Fields to return in results; `nil` means all.
    public var desiredKeys: [String]?
    /// Whether to write INT64 and DOUBLE values as strings.
    public var numbersAsStrings: Bool?
}

/// The body of `records/lookup`.
public struct LookupRecordsRequest: Hashable, Sendable, Decodable {
    /// One record to look up.
    public struct Item: Hashable, Sendable, Decodable {
        /// The record's name.
        public var recordName: String
        /// Fields to return for this record, overriding the request's `desiredKeys`.
        public var desiredKeys: [String]?
    }
    /// The records to look up.
    public var records: [Item]
    /// Their zone; the default zone when absent.
    public var zoneID: ZoneID?
    /// Fields to return; `nil` means all.
    public var desiredKeys: [String]?
    /// Whether to write INT64 and DOUBLE values as strings.
    public var numbersAsStrings: Bool?
}

/// The body of `records/changes`, and one zone of `changes/zone`.
public struct RecordChangesRequest: Hashable, Sendable, Decodable {
    /// The zone to read.
    public var zoneID: ZoneID?
    /// Where the previous read ended; absent means from the beginning.
    public var syncToken: String?
    /// The most records to return.
    public var resultsLimit: Int?
    /// Fields to return; `nil` means all.
    public var desiredKeys: [String]?
    /// Only changes to records of these types (deletions are always reported).
    public var recordTypes: [String]?
    /// Whether to write INT64 and DOUBLE values as strings.
    public var numbersAsStrings: Bool?
}

/// The body of `changes/zone`: several zones at once; per-zone values override the shared ones.
public struct ZoneChangesRequest: Hashable, Sendable, Decodable {
    /// The zones to read.
    public var zones: [RecordChangesRequest]
    /// The most records to return per zone.
    public var resultsLimit: Int?
    /// Fields to return; `nil` means all.
    public var desiredKeys: [String]?
    /// Only changes to records of these types.
    public var recordTypes: [String]?
    /// Whether to write INT64 and DOUBLE values as strings.
    public var numbersAsStrings: Bool?
}

/// The body of `changes/database` and `zones/changes`.
public struct DatabaseChangesRequest: Hashable, Sendable, Decodable {
    /// Where the previous read ended; absent means from the beginning.
    public var syncToken: String?
    /// The most zones to return.
    public var resultsLimit: Int?

    private enum CodingKeys: String, CodingKey { case syncToken, metaSyncToken, resultsLimit }

    /// Creates a request.
    public init(syncToken: String? = nil, resultsLimit: Int? = nil) {
        self.syncToken = syncToken
        self.resultsLimit = resultsLimit
    }

    /// Accepts `metaSyncToken`, the name `zones/changes` used in one version of Apple's documentation.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        syncToken = try container.decodeIfPresent(String.self, forKey: .syncToken)
            ?? container.decodeIfPresent(String.self, forKey: .metaSyncToken)
        resultsLimit = try container.decodeIfPresent(Int.self, forKey: .resultsLimit)
    }
}

/// The body of `zones/lookup`.
public struct LookupZonesRequest: Hashable, Sendable, Decodable {
    /// The zones to look up.
    public var zones: [ZoneID]
}

/// The operation types of `zones/modify`.
public enum ZoneOperationType: String, Sendable, Hashable, CaseIterable {
    case create
    case delete
}

/// The body of `zones/modify`.
public struct ModifyZonesRequest: Hashable, Sendable, Decodable {
    /// One zone operation.
    public struct Operation: Hashable, Sendable, Decodable {
        /// A zone to create or delete.
        public struct Zone: Hashable, Sendable, Decodable {
            /// Its ID.
            public var zoneID: ZoneID
        }
        /// Create or delete.
        public var operationType: ZoneOperationType
        /// The zone.
        public var zone: Zone
    }
    /// The operations, applied in order.
    public var operations: [Operation]
}
