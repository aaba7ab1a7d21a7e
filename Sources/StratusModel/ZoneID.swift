/// Identifies a record zone: its name and the user who owns it (CloudKit's Zone ID Dictionary).
public struct ZoneID: Hashable, Sendable, Decodable, JSONWritable {
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

    private enum CodingKeys: String, CodingKey { case zoneName, ownerRecordName }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        zoneName = try container.decodeIfPresent(String.self, forKey: .zoneName) ?? Self.defaultZoneName
        ownerRecordName = try container.decodeIfPresent(String.self, forKey: .ownerRecordName)
    }

    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("zoneName", zoneName)
        writer.field("ownerRecordName", ownerRecordName)
        writer.field("zoneType", isDefaultZone ? "DEFAULT_ZONE" : "REGULAR_CUSTOM_ZONE")
        writer.endObject()
    }
}
