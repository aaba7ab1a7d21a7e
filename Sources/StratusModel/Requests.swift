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
public struct RecordOperation: Hashable, Sendable, JSONDecodable, JSONWritable {
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

    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("operationType", operationType.rawValue)
        writer.field("record", record)
        writer.field("desiredKeys", desiredKeys)
        writer.endObject()
    }
}

/// The body of `records/modify`.
public struct ModifyRecordsRequest: Hashable, Sendable, JSONDecodable, JSONWritable {
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

    /// Creates a request.
    public init(
        operations: [RecordOperation], zoneID: ZoneID? = nil, atomic: Bool? = nil, desiredKeys: [String]? = nil,
        numbersAsStrings: Bool? = nil
    ) {
        self.operations = operations
        self.zoneID = zoneID
        self.atomic = atomic
        self.desiredKeys = desiredKeys
        self.numbersAsStrings = numbersAsStrings
    }

    /// Reads a request from its JSON text one operation at a time, so that the tree of at most one
    /// operation is in memory at once (a tree takes many times the bytes of its text, about 38 times
    /// for a list of small numbers). The request fails before the part is parsed when an operation's
    /// text takes more than ``Limits/maxOperationTextBytes``, another member's more than
    /// ``Limits/maxSmallRequestBodyBytes``, or an operation comes past
    /// ``Limits/maxOperationsPerRequest``.
    public init(jsonBytes: [UInt8], limits: Limits) throws {
        var members = JSONMembers()
        var operations: [RecordOperation]?
        try jsonBytes.withUnsafeBufferPointer { buffer in
            // A request's text: U+0000 is refused in it.
            var reader = JSONReader(bytes: buffer, refusingNullCharacter: true)
            guard reader.peek() == UInt8(ascii: "{") else { throw JSONDecodingError(.wrongType, "an object") }
            try reader.beginObject()
            while let key = try reader.nextKey() {
                guard key == "operations", reader.peek() == UInt8(ascii: "[") else {
                    members[key] = try Self.readValue(&reader, maxBytes: limits.maxSmallRequestBodyBytes, at: [.key(key)])
                    continue
                }
                var read: [RecordOperation] = []
                try reader.beginArray()
                while try reader.nextElement() {
                    let index = read.count
                    guard index < limits.maxOperationsPerRequest else {
                        throw JSONDecodingError(
                            .invalid, "more than \(limits.maxOperationsPerRequest) items; the limit is "
                                + "\(limits.maxOperationsPerRequest) per request", at: [.key(key)])
                    }
                    let operation = try Self.readValue(
                        &reader, maxBytes: limits.maxOperationTextBytes, at: [.key(key), .index(index)])
                    read.append(try withJSONPath(.key(key)) { try withJSONPath(.index(index)) { try RecordOperation(json: operation) } })
                }
                operations = read
                // The member stays for the decoder of the others; its operations were read here.
                members[key] = .array([])
            }
            try reader.expectEnd()
        }
        try self.init(json: .object(members))
        if let operations { self.operations = operations }
    }

    /// The next value of `reader` as a tree, or an error at `path` when its text takes more than
    /// `maxBytes`. A fault in the value's text is named from the document's root: `path`, then
    /// where in the value it is.
    private static func readValue(
        _ reader: inout JSONReader, maxBytes: Int, at path: [JSONDecodingError.PathComponent]
    ) throws -> JSONValue {
        let read: JSONValue?
        do {
            read = try reader.readValue(maxBytes: maxBytes)
        } catch let error as JSONSyntaxError {
            throw error.prefixed(path)
        }
        guard let value = read else {
            throw JSONDecodingError(.invalid, "takes more than \(maxBytes) bytes of JSON text", at: path)
        }
        return value
    }

    public init(json: JSONValue) throws {
        let object = try json.object()
        operations = try object.decode("operations")
        zoneID = try object.decodeIfPresent("zoneID")
        atomic = try object.decodeIfPresent("atomic")
        desiredKeys = try object.decodeIfPresent("desiredKeys")
        numbersAsStrings = try object.decodeIfPresent("numbersAsStrings")
    }

    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("operations", array: operations)
        writer.field("zoneID", zoneID)
        writer.field("atomic", atomic)
        writer.field("desiredKeys", desiredKeys)
        writer.field("numbersAsStrings", numbersAsStrings)
        writer.endObject()
    }
}

/// The body of `records/lookup`.
public struct LookupRecordsRequest: Hashable, Sendable, JSONDecodable, JSONWritable {
    /// One record to look up.
    public struct Item: Hashable, Sendable, JSONDecodable, JSONWritable {
        /// The record's name.
        public var recordName: String
        /// Fields to return for this record, overriding the request's `desiredKeys`.
        public var desiredKeys: [String]?

        /// Creates an item.
        public init(recordName: String, desiredKeys: [String]? = nil) {
            self.recordName = recordName
            self.desiredKeys = desiredKeys
        }

        public init(json: JSONValue) throws {
            let object = try json.object()
            recordName = try object.decode("recordName")
            desiredKeys = try object.decodeIfPresent("desiredKeys")
        }

        public func write(to writer: inout JSONWriter) {
            writer.beginObject()
            writer.field("recordName", recordName)
            writer.field("desiredKeys", desiredKeys)
            writer.endObject()
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

    /// Creates a request.
    public init(records: [Item], zoneID: ZoneID? = nil, desiredKeys: [String]? = nil, numbersAsStrings: Bool? = nil) {
        self.records = records
        self.zoneID = zoneID
        self.desiredKeys = desiredKeys
        self.numbersAsStrings = numbersAsStrings
    }

    public init(json: JSONValue) throws {
        let object = try json.object()
        records = try object.decode("records")
        zoneID = try object.decodeIfPresent("zoneID")
        desiredKeys = try object.decodeIfPresent("desiredKeys")
        numbersAsStrings = try object.decodeIfPresent("numbersAsStrings")
    }

    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("records", array: records)
        writer.field("zoneID", zoneID)
        writer.field("desiredKeys", desiredKeys)
        writer.field("numbersAsStrings", numbersAsStrings)
        writer.endObject()
    }
}

/// The body of `records/changes`, and one zone of `changes/zone`.
public struct RecordChangesRequest: Hashable, Sendable, JSONDecodable, JSONWritable {
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

    /// Creates a request.
    public init(
        zoneID: ZoneID?, syncToken: String? = nil, resultsLimit: Int? = nil, desiredKeys: [String]? = nil,
        recordTypes: [String]? = nil, numbersAsStrings: Bool? = nil
    ) {
        self.zoneID = zoneID
        self.syncToken = syncToken
        self.resultsLimit = resultsLimit
        self.desiredKeys = desiredKeys
        self.recordTypes = recordTypes
        self.numbersAsStrings = numbersAsStrings
    }

    public init(json: JSONValue) throws {
        let object = try json.object()
        zoneID = try object.decodeIfPresent("zoneID")
        syncToken = try object.decodeIfPresent("syncToken")
        resultsLimit = try object.decodeIfPresent("resultsLimit")
        desiredKeys = try object.decodeIfPresent("desiredKeys")
        // `desiredRecordTypes` is the name Apple's web library sends.
        recordTypes = try object.decodeIfPresent("recordTypes") ?? object.decodeIfPresent("desiredRecordTypes")
        if let count = recordTypes?.count, count > Limits.maxValuesPerList {
            throw JSONDecodingError(
                .invalid, "names \(count) record types; at most \(Limits.maxValuesPerList)",
                at: [.key(object["recordTypes"] != nil ? "recordTypes" : "desiredRecordTypes")])
        }
        numbersAsStrings = try object.decodeIfPresent("numbersAsStrings")
    }

    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("zoneID", zoneID)
        writer.field("syncToken", syncToken)
        writer.field("resultsLimit", resultsLimit.map(Int64.init))
        writer.field("desiredKeys", desiredKeys)
        writer.field("recordTypes", recordTypes)
        writer.field("numbersAsStrings", numbersAsStrings)
        writer.endObject()
    }
}

/// The body of `records/digest` (a Stratus extension): the zone whose live records to digest.
public struct ZoneDigestRequest: Hashable, Sendable, JSONDecodable, JSONWritable {
    /// The zone.
    public var zoneID: ZoneID?

    /// Creates a request.
    public init(zoneID: ZoneID) { self.zoneID = zoneID }

    public init(json: JSONValue) throws {
        zoneID = try json.object().decodeIfPresent("zoneID")
    }

    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("zoneID", zoneID)
        writer.endObject()
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
        // `desiredRecordTypes` is the name Apple's web library sends.
        recordTypes = try object.decodeIfPresent("recordTypes") ?? object.decodeIfPresent("desiredRecordTypes")
        if let count = recordTypes?.count, count > Limits.maxValuesPerList {
            throw JSONDecodingError(
                .invalid, "names \(count) record types; at most \(Limits.maxValuesPerList)",
                at: [.key(object["recordTypes"] != nil ? "recordTypes" : "desiredRecordTypes")])
        }
        numbersAsStrings = try object.decodeIfPresent("numbersAsStrings")
    }
}

/// The body of `changes/database` and `zones/changes`.
public struct DatabaseChangesRequest: Hashable, Sendable, JSONDecodable, JSONWritable {
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

    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("syncToken", syncToken)
        writer.field("resultsLimit", resultsLimit.map(Int64.init))
        writer.endObject()
    }
}

/// The body of `zones/lookup`.
public struct LookupZonesRequest: Hashable, Sendable, JSONDecodable, JSONWritable {
    /// The zones to look up.
    public var zones: [ZoneID]

    /// Creates a request.
    public init(zones: [ZoneID]) { self.zones = zones }

    public init(json: JSONValue) throws {
        let object = try json.object()
        zones = try object.decode("zones")
    }

    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("zones", array: zones)
        writer.endObject()
    }
}

/// The operation types of `zones/modify`.
public enum ZoneOperationType: String, Sendable, Hashable, CaseIterable {
    case create
    case delete
}

/// The body of `zones/modify`.
public struct ModifyZonesRequest: Hashable, Sendable, JSONDecodable, JSONWritable {
    /// One zone operation.
    public struct Operation: Hashable, Sendable, JSONDecodable, JSONWritable {
        /// Create or delete.
        public var operationType: ZoneOperationType
        /// The zone's ID; on the wire it is nested as `zone.zoneID`.
        public var zoneID: ZoneID

        /// Creates an operation.
        public init(operationType: ZoneOperationType, zoneID: ZoneID) {
            self.operationType = operationType
            self.zoneID = zoneID
        }

        public init(json: JSONValue) throws {
            let object = try json.object()
            operationType = try object.decode("operationType")
            guard let zone = object["zone"] else { throw JSONDecodingError(.missing, "", at: [.key("zone")]) }
            zoneID = try withJSONPath(.key("zone")) { try zone.object().decode("zoneID") }
        }

        public func write(to writer: inout JSONWriter) {
            writer.beginObject()
            writer.field("operationType", operationType.rawValue)
            writer.key("zone")
            writer.beginObject()
            writer.field("zoneID", zoneID)
            writer.endObject()
            writer.endObject()
        }
    }
    /// The operations, applied in order.
    public var operations: [Operation]

    /// Creates a request.
    public init(operations: [Operation]) { self.operations = operations }

    public init(json: JSONValue) throws {
        let object = try json.object()
        operations = try object.decode("operations")
    }

    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("operations", array: operations)
        writer.endObject()
    }
}

/// The body of `assets/upload`: one upload URL per asset field to fill.
public struct UploadAssetsRequest: Hashable, Sendable, JSONDecodable, JSONWritable {
    /// The field an asset is uploaded for.
    public struct Token: Hashable, Sendable, JSONDecodable, JSONWritable {
        /// The record that will hold the asset; a new UUID when absent.
        public var recordName: String?
        /// The record's type (accepted and ignored, as the receipt is not tied to it).
        public var recordType: String?
        /// The asset field.
        public var fieldName: String

        /// Creates a token request.
        public init(recordName: String? = nil, recordType: String? = nil, fieldName: String) {
            self.recordName = recordName
            self.recordType = recordType
            self.fieldName = fieldName
        }

        public init(json: JSONValue) throws {
            let object = try json.object()
            recordName = try object.decodeIfPresent("recordName")
            recordType = try object.decodeIfPresent("recordType")
            fieldName = try object.decode("fieldName")
        }

        public func write(to writer: inout JSONWriter) {
            writer.beginObject()
            writer.field("recordName", recordName)
            writer.field("recordType", recordType)
            writer.field("fieldName", fieldName)
            writer.endObject()
        }
    }

    /// The zone of the records; the default zone when absent.
    public var zoneID: ZoneID?
    /// The fields to upload for.
    public var tokens: [Token]

    /// Creates a request.
    public init(zoneID: ZoneID? = nil, tokens: [Token]) {
        self.zoneID = zoneID
        self.tokens = tokens
    }

    public init(json: JSONValue) throws {
        let object = try json.object()
        zoneID = try object.decodeIfPresent("zoneID")
        tokens = try object.decode("tokens")
    }

    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("zoneID", zoneID)
        writer.field("tokens", array: tokens)
        writer.endObject()
    }
}

/// The body of the sign-up and sign-in endpoints.
public struct PasswordCredentials: Hashable, Sendable, JSONDecodable, JSONWritable {
    /// The account's username.
    public var username: String
    /// The account's password.
    public var password: String

    /// Creates credentials.
    public init(username: String, password: String) {
        self.username = username
        self.password = password
    }

    public init(json: JSONValue) throws {
        let object = try json.object()
        username = try object.decode("username")
        password = try object.decode("password")
    }

    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("username", username)
        writer.field("password", password)
        writer.endObject()
    }
}
