/// Identifies a record zone: its name and the user who owns it (CloudKit's Zone ID Dictionary).
public struct ZoneID: Hashable, Sendable, JSONDecodable, JSONWritable {
    /// The name of every database's default zone.
    public static let defaultZoneName = "_defaultZone"
    /// The owner name that stands for "the current user", as in CloudKit (`CKCurrentUserDefaultName`).
    public static let currentUserOwnerName = "__defaultOwner__"

    /// The zone's name, unique within its database.
    public var zoneName: String
    /// The record name of the user who owns the zone; `nil` means the caller.
    public var ownerRecordName: String?

    /// Creates a zone ID.
    public init(zoneName: String, ownerRecordName: String? = nil) {
        self.zoneName = zoneName
        self.ownerRecordName = ownerRecordName
    }

    /// The default zone of the caller's database.
    public static var defaultZone: ZoneID { ZoneID(zoneName: defaultZoneName) }

    /// Whether this is the default zone.
    public var isDefaultZone: Bool { zoneName == Self.defaultZoneName }

    public init(json: JSONValue) throws {
        let object = try json.object()
        zoneName = try object.decodeIfPresent("zoneName") ?? Self.defaultZoneName
        ownerRecordName = try object.decodeIfPresent("ownerRecordName")
    }

    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("zoneName", zoneName)
        writer.field("ownerRecordName", ownerRecordName)
        writer.field("zoneType", isDefaultZone ? "DEFAULT_ZONE" : "REGULAR_CUSTOM_ZONE")
        writer.endObject()
    }
}
