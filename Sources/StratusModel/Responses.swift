/// The answers of the database endpoints, as a client reads them.
///
/// The server writes most of these answers with ``JSONWriter`` directly (it splices stored record
/// JSON in without decoding it); the small ones it writes through the types below.

extension ErrorDictionary: Error {}

/// One item of a list answer: the item, or the error dictionary that took its place.
extension Result: JSONDecodable where Success: JSONDecodable, Failure == ErrorDictionary {
    /// Decodes an error dictionary when the object has a `serverErrorCode`, the item otherwise.
    public init(json: JSONValue) throws {
        if case .object(let members) = json, members["serverErrorCode"] != nil {
            self = .failure(try ErrorDictionary(json: json))
        } else {
            self = .success(try Success(json: json))
        }
    }
}

/// One item of a list answer, as the server writes it: the item, or its error dictionary.
extension Result: JSONWritable where Success: JSONWritable, Failure == ErrorDictionary {
    public func write(to writer: inout JSONWriter) {
        switch self {
        case .success(let item): item.write(to: &writer)
        case .failure(let error): error.write(to: &writer)
        }
    }
}

/// The answer of `records/modify`, `records/lookup` and `records/query`.
public struct RecordsResponse: Sendable, JSONDecodable {
    /// One item per request item (per match, for a query), in order.
    public var records: [Result<RecordDictionary, ErrorDictionary>]
    /// For a query: where the next page starts; absent on the last page.
    public var continuationMarker: String?

    public init(json: JSONValue) throws {
        let object = try json.object()
        records = try object.decode("records")
        continuationMarker = try object.decodeIfPresent("continuationMarker")
    }
}

/// The answer of `zones/list`, `zones/lookup` and `zones/modify`.
public struct ZonesResponse: Sendable, JSONDecodable {
    /// One item per zone, in order.
    public var zones: [Result<ZoneDictionary, ErrorDictionary>]

    public init(json: JSONValue) throws {
        let object = try json.object()
        zones = try object.decode("zones")
    }
}

/// One page of a zone's change feed: the answer of `records/changes`.
public struct RecordChangesResponse: Sendable, JSONDecodable {
    /// The zone read.
    public var zoneID: ZoneID
    /// Changed records in their latest state, and tombstones (`deleted: true`) of deleted ones.
    public var records: [RecordDictionary]
    /// Where this page ends; read on from here.
    public var syncToken: String
    /// Whether more changes follow.
    public var moreComing: Bool

    public init(json: JSONValue) throws {
        let object = try json.object()
        zoneID = try object.decode("zoneID")
        records = try object.decode("records")
        syncToken = try object.decode("syncToken")
        moreComing = try object.decodeIfPresent("moreComing") ?? false
    }
}

/// The answer of `records/digest` (a Stratus extension): a ``RecordSetDigest`` of a zone's live
/// records, and the sync token at which they were read.
public struct ZoneDigestResponse: Sendable, JSONDecodable {
    /// The zone read.
    public var zoneID: ZoneID
    /// The zone's change token at the state digested: a client whose feed reached this token, with no
    /// unsent changes, holds exactly these records.
    public var syncToken: String
    /// How many live records the zone holds.
    public var recordCount: Int
    /// ``RecordSetDigest/hexDigest`` of those records.
    public var digest: String

    public init(json: JSONValue) throws {
        let object = try json.object()
        zoneID = try object.decode("zoneID")
        syncToken = try object.decode("syncToken")
        recordCount = try object.decode("recordCount")
        digest = try object.decode("digest")
    }
}

/// One page of a database's zone feed: the answer of `changes/database`.
public struct DatabaseChangesResponse: Sendable, JSONDecodable {
    /// Zones created, changed or deleted (`deleted: true`) since the token.
    public var zones: [ZoneDictionary]
    /// Where this page ends; read on from here.
    public var syncToken: String
    /// Whether more changes follow.
    public var moreComing: Bool

    public init(json: JSONValue) throws {
        let object = try json.object()
        zones = try object.decode("zones")
        syncToken = try object.decode("syncToken")
        moreComing = try object.decodeIfPresent("moreComing") ?? false
    }
}

/// The answer of `assets/upload`: where to post each asset's bytes.
public struct UploadAssetsResponse: Sendable, JSONDecodable {
    /// Where one asset's bytes go.
    public struct Token: Hashable, Sendable, JSONDecodable, JSONWritable {
        /// The record named in the request, or the UUID chosen for it.
        public var recordName: String
        /// The asset field.
        public var fieldName: String
        /// The URL to post the bytes to.
        public var url: String

        /// Creates a token.
        public init(recordName: String, fieldName: String, url: String) {
            self.recordName = recordName
            self.fieldName = fieldName
            self.url = url
        }

        public init(json: JSONValue) throws {
            let object = try json.object()
            recordName = try object.decode("recordName")
            fieldName = try object.decode("fieldName")
            url = try object.decode("url")
        }

        public func write(to writer: inout JSONWriter) {
            writer.beginObject()
            writer.field("recordName", recordName)
            writer.field("fieldName", fieldName)
            writer.field("url", url)
            writer.endObject()
        }
    }

    /// One token per requested field, in order.
    public var tokens: [Token]

    public init(json: JSONValue) throws {
        let object = try json.object()
        tokens = try object.decode("tokens")
    }
}

/// The answer to posting an asset's bytes: `{"singleFile": {fileChecksum, size, receipt}}`.
public struct AssetUploadResponse: Sendable, JSONDecodable, JSONWritable {
    /// The uploaded asset with the receipt that lets a record hold it.
    public var singleFile: AssetValue

    /// Creates an answer.
    public init(singleFile: AssetValue) { self.singleFile = singleFile }

    public init(json: JSONValue) throws {
        let object = try json.object()
        singleFile = try object.decode("singleFile")
    }

    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("singleFile", singleFile)
        writer.endObject()
    }
}

/// A signed-in session: the answer of sign-up and sign-in.
public struct WebAuthSession: Hashable, Sendable, JSONDecodable, JSONWritable {
    /// The token to pass as `ckWebAuthToken`.
    public var ckWebAuthToken: String
    /// The signed-in user.
    public var userRecordName: String
    /// When the token stops working, in milliseconds since 1970.
    public var expires: Int64

    /// Creates a session.
    public init(ckWebAuthToken: String, userRecordName: String, expires: Int64) {
        self.ckWebAuthToken = ckWebAuthToken
        self.userRecordName = userRecordName
        self.expires = expires
    }

    public init(json: JSONValue) throws {
        let object = try json.object()
        ckWebAuthToken = try object.decode("ckWebAuthToken")
        userRecordName = try object.decode("userRecordName")
        expires = try object.decode("expires")
    }

    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("ckWebAuthToken", ckWebAuthToken)
        writer.field("userRecordName", userRecordName)
        writer.field("expires", expires)
        writer.endObject()
    }
}

/// The answer of `users/current`.
public struct CurrentUserResponse: Hashable, Sendable, JSONDecodable, JSONWritable {
    /// The signed-in user's record name.
    public var userRecordName: String
    /// The user's first name, when they made themselves discoverable and gave one.
    public var firstName: String?
    /// The user's last name, likewise.
    public var lastName: String?

    /// Creates an answer.
    public init(userRecordName: String, firstName: String? = nil, lastName: String? = nil) {
        self.userRecordName = userRecordName
        self.firstName = firstName
        self.lastName = lastName
    }

    public init(json: JSONValue) throws {
        let object = try json.object()
        userRecordName = try object.decode("userRecordName")
        firstName = try object.decodeIfPresent("firstName")
        lastName = try object.decodeIfPresent("lastName")
    }

    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("userRecordName", userRecordName)
        writer.field("firstName", firstName)
        writer.field("lastName", lastName)
        writer.endObject()
    }
}

/// What a server supports and enforces: the answer of `GET …/capabilities`.
public struct Capabilities: Hashable, Sendable, JSONDecodable, JSONWritable {
    /// The protocol version; 1.
    public var protocolVersion: Int
    /// The limits the server enforces.
    public var limits: Limits
    /// How long tombstones are kept, in seconds.
    public var tombstoneHorizonSeconds: Int64
    /// How long a web auth token lasts, in seconds.
    public var sessionLifetimeSeconds: Int64
    /// The database scopes served.
    public var databases: [DatabaseScope]

    /// Creates capabilities.
    public init(
        protocolVersion: Int = 1, limits: Limits, tombstoneHorizonSeconds: Int64, sessionLifetimeSeconds: Int64,
        databases: [DatabaseScope] = DatabaseScope.allCases
    ) {
        self.protocolVersion = protocolVersion
        self.limits = limits
        self.tombstoneHorizonSeconds = tombstoneHorizonSeconds
        self.sessionLifetimeSeconds = sessionLifetimeSeconds
        self.databases = databases
    }

    public init(json: JSONValue) throws {
        let object = try json.object()
        protocolVersion = try object.decode("protocolVersion")
        limits = try object.decode("limits")
        tombstoneHorizonSeconds = try object.decode("tombstoneHorizonSeconds")
        sessionLifetimeSeconds = try object.decode("sessionLifetimeSeconds")
        databases = try object.decode("databases")
    }

    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("protocolVersion", Int64(protocolVersion))
        writer.field("limits", limits)
        writer.field("tombstoneHorizonSeconds", tombstoneHorizonSeconds)
        writer.field("sessionLifetimeSeconds", sessionLifetimeSeconds)
        writer.field("databases", array: databases.map(\.rawValue))
        writer.endObject()
    }
}
