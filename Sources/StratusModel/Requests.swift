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
public struct RecordOperation: Hashable, Sendable, JSONDecodable {
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

    public init(json: JSONValue) throws {
        let object = try json.object()
        operationType = try object.decode("operationType")
        record = try object.decode("record")
        desiredKeys = try object.decodeIfPresent("desiredKeys")
    }
}

/// The body of `records/modify`.
public struct ModifyRecordsRequest: Hashable, Sendable, JSONDecodable {
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

    public init(json: JSONValue) throws {
        let object = try json.object()
        operations = try object.decode("operations")
        zoneID = try object.decodeIfPresent("zoneID")
        atomic = try object.decodeIfPresent("atomic")
        desiredKeys = try object.decodeIfPresent("desiredKeys")
        numbersAsStrings = try object.decodeIfPresent("numbersAsStrings")
    }
}

/// The body of `records/lookup`.
public struct LookupRecordsRequest: Hashable, Sendable, JSONDecodable {
    /// One record to look up.
    public struct Item: Hashable, Sendable, JSONDecodable {
        /// The record's name.
        public var recordName: String
        /// Fields to return for this record, overriding the request's `desiredKeys`.
        public var desiredKeys: [String]?

        public init(json: JSONValue) throws {
            let object = try json.object()
            recordName = try object.decode("recordName")
            desiredKeys = try object.decodeIfPresent("desiredKeys")
        }
    }
    /// The records to look up.
    public var records: [Item]
    /// Their zone; the default zone when absent.
    public var zoneID: ZoneID?
    /// Fields to return; `nil` means all.
    public var desiredKeys: [String]?
    /// Whether to write INT64 and DOUBLE values as strings.
    public var numbersAsStrings: Bool?

    public init(json: JSONValue) throws {
        let object = try json.object()
        records = try object.decode("records")
        zoneID = try object.decodeIfPresent("zoneID")
        desiredKeys = try object.decodeIfPresent("desiredKeys")
        numbersAsStrings = try object.decodeIfPresent("numbersAsStrings")
    }
}

/// The body of `records/changes`, and one zone of `changes/zone`.
public struct RecordChangesRequest: Hashable, Sendable, JSONDecodable {
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

    public init(json: JSONValue) throws {
        let object = try json.object()
        zoneID = try object.decodeIfPresent("zoneID")
        syncToken = try object.decodeIfPresent("syncToken")
        resultsLimit = try object.decodeIfPresent("resultsLimit")
        desiredKeys = try object.decodeIfPresent("desiredKeys")
        recordTypes = try object.decodeIfPresent("recordTypes")
        numbersAsStrings = try object.decodeIfPresent("numbersAsStrings")
    }
}

/// The body of `changes/zone`: several zones at once; per-zone values override the shared ones.
public struct ZoneChangesRequest: Hashable, Sendable, JSONDecodable {
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

    public init(json: JSONValue) throws {
        let object = try json.object()
        zones = try object.decode("zones")
        resultsLimit = try object.decodeIfPresent("resultsLimit")
        desiredKeys = try object.decodeIfPresent("desiredKeys")
        recordTypes = try object.decodeIfPresent("recordTypes")
        numbersAsStrings = try object.decodeIfPresent("numbersAsStrings")
    }
}

/// The body of `changes/database` and `zones/changes`.
public struct DatabaseChangesRequest: Hashable, Sendable, JSONDecodable {
    /// Where the previous read ended; absent means from the beginning.
    public var syncToken: String?
    /// The most zones to return.
    public var resultsLimit: Int?

    /// Creates a request.
    public init(syncToken: String? = nil, resultsLimit: Int? = nil) {
        self.syncToken = syncToken
        self.resultsLimit = resultsLimit
    }

    /// Accepts `metaSyncToken`, the name `zones/changes` used in one version of Apple's documentation.
    public init(json: JSONValue) throws {
        let object = try json.object()
        syncToken = try object.decodeIfPresent("syncToken") ?? object.decodeIfPresent("metaSyncToken")
        resultsLimit = try object.decodeIfPresent("resultsLimit")
    }
}

/// The body of `zones/lookup`.
public struct LookupZonesRequest: Hashable, Sendable, JSONDecodable {
    /// The zones to look up.
    public var zones: [ZoneID]

    public init(json: JSONValue) throws {
        let object = try json.object()
        zones = try object.decode("zones")
    }
}

/// The operation types of `zones/modify`.
public enum ZoneOperationType: String, Sendable, Hashable, CaseIterable {
    case create
    case delete
}

/// The body of `zones/modify`.
public struct ModifyZonesRequest: Hashable, Sendable, JSONDecodable {
    /// One zone operation.
    public struct Operation: Hashable, Sendable, JSONDecodable {
        /// A zone to create or delete.
        public struct Zone: Hashable, Sendable, JSONDecodable {
            /// Its ID.
            public var zoneID: ZoneID

            public init(json: JSONValue) throws {
                let object = try json.object()
                zoneID = try object.decode("zoneID")
            }
        }
        /// Create or delete.
        public var operationType: ZoneOperationType
        /// The zone.
        public var zone: Zone

        public init(json: JSONValue) throws {
            let object = try json.object()
            operationType = try object.decode("operationType")
            zone = try object.decode("zone")
        }
    }
    /// The operations, applied in order.
    public var operations: [Operation]

    public init(json: JSONValue) throws {
        let object = try json.object()
        operations = try object.decode("operations")
    }
}
