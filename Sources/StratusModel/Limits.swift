/// The limits a server enforces and advertises through its capabilities endpoint.
///
/// Defaults follow CloudKit Web Services' documented limits.
public struct Limits: Hashable, Sendable, JSONDecodable, JSONWritable {
    /// Operations in one `records/modify` or `zones/modify` request (CloudKit: 200).
    public var maxOperationsPerRequest: Int
    /// Records in one response page (CloudKit: 200).
    public var maxRecordsPerResponse: Int
    /// Size of one record's fields as JSON, assets excluded (CloudKit: 1 MB).
    public var maxRecordSizeBytes: Int
    /// Length of record, zone and owner names and field names; names are ASCII (CloudKit: 255).
    public var maxNameLength: Int
    /// Fields in one record (CloudKit: 256 per record type).
    public var maxFieldsPerRecord: Int
    /// Records that may point at one target with a `DELETE_SELF` reference (CloudKit: 750).
    public var maxDeleteSelfReferencesPerTarget: Int
    /// Size of one asset file (CloudKit Web Services: 50 MB).
    public var maxAssetSizeBytes: Int
    /// Size of one `records/modify` request body.
    public var maxRequestBodyBytes: Int

    /// Values one query filter, one token search or one `recordTypes` list may hold. Each becomes a
    /// bound parameter of one statement (SQLite's default build allows 32,766), and a filter's values
    /// are compared with every record the query reads.
    public static let maxValuesPerList = 1_000

    /// Subscriptions one user keeps in one database. Every change to a database is matched against
    /// all of its subscriptions, which the push hub holds in memory.
    public static let maxSubscriptionsPerDatabase = 1_000

    /// Size of one operation's JSON text in a `records/modify` body: four times
    /// `maxRecordSizeBytes`, room for a record at that limit written with escapes, and 64 KiB for
    /// its names, tag and asset receipts. A request is parsed one operation at a time, each into a
    /// tree many times its text, so this bounds what one request holds while it is read.
    public var maxOperationTextBytes: Int { 4 * maxRecordSizeBytes + (64 << 10) }

    /// Size of the body of every other request (names, zones, subscriptions, a query): 2 MiB, room
    /// for 200 of anything they carry, or `maxRequestBodyBytes` when that is less.
    public var maxSmallRequestBodyBytes: Int { min(maxRequestBodyBytes, 2 << 20) }

    /// Creates limits; every argument defaults to CloudKit's value.
    public init(
        maxOperationsPerRequest: Int = 200, maxRecordsPerResponse: Int = 200, maxRecordSizeBytes: Int = 1_048_576,
        maxNameLength: Int = 255, maxFieldsPerRecord: Int = 256, maxDeleteSelfReferencesPerTarget: Int = 750,
        maxAssetSizeBytes: Int = 52_428_800,
        maxRequestBodyBytes: Int? = nil
    ) {
        self.maxOperationsPerRequest = maxOperationsPerRequest
        self.maxRecordsPerResponse = maxRecordsPerResponse
        self.maxRecordSizeBytes = maxRecordSizeBytes
        self.maxNameLength = maxNameLength
        self.maxFieldsPerRecord = maxFieldsPerRecord
        self.maxDeleteSelfReferencesPerTarget = maxDeleteSelfReferencesPerTarget
        self.maxAssetSizeBytes = maxAssetSizeBytes
        // Room for a full batch of maximum-size records, with their JSON framing.
        self.maxRequestBodyBytes = maxRequestBodyBytes ?? min(maxOperationsPerRequest * maxRecordSizeBytes, 64 << 20)
    }

    public init(json: JSONValue) throws {
        let object = try json.object()
        maxOperationsPerRequest = try object.decode("maxOperationsPerRequest")
        maxRecordsPerResponse = try object.decode("maxRecordsPerResponse")
        maxRecordSizeBytes = try object.decode("maxRecordSizeBytes")
        maxNameLength = try object.decode("maxNameLength")
        maxFieldsPerRecord = try object.decode("maxFieldsPerRecord")
        maxDeleteSelfReferencesPerTarget = try object.decode("maxDeleteSelfReferencesPerTarget")
        maxAssetSizeBytes = try object.decode("maxAssetSizeBytes")
        maxRequestBodyBytes = try object.decode("maxRequestBodyBytes")
    }

    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("maxOperationsPerRequest", Int64(maxOperationsPerRequest))
        writer.field("maxRecordsPerResponse", Int64(maxRecordsPerResponse))
        writer.field("maxRecordSizeBytes", Int64(maxRecordSizeBytes))
        writer.field("maxNameLength", Int64(maxNameLength))
        writer.field("maxFieldsPerRecord", Int64(maxFieldsPerRecord))
        writer.field("maxDeleteSelfReferencesPerTarget", Int64(maxDeleteSelfReferencesPerTarget))
        writer.field("maxAssetSizeBytes", Int64(maxAssetSizeBytes))
        writer.field("maxRequestBodyBytes", Int64(maxRequestBodyBytes))
        writer.endObject()
    }

    /// Checks a record, zone or owner name: ASCII, 1 to `maxNameLength` characters, no control
    /// characters. Returns the broken rule, or `nil` when the name is valid.
    public func violation(ofName name: String) -> String? {
        if name.isEmpty { return "must not be empty" }
        if name.utf8.count > maxNameLength { return "is \(name.utf8.count) characters; the limit is \(maxNameLength)" }
        if !name.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) { return "must be printable ASCII" }
        return nil
    }
}
