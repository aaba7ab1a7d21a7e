/// A zone as the server describes it (CloudKit's Zone Dictionary).
public struct ZoneDictionary: Hashable, Sendable, JSONDecodable, JSONWritable {
    /// The zone's ID.
    public var zoneID: ZoneID
    /// The zone's current change token.
    public var syncToken: String?
    /// Whether batches in this zone can be atomic (custom zones).
    public var atomic: Bool?
    /// In database change feeds: `true` when the zone was deleted.
    public var deleted: Bool?

    /// Creates a zone dictionary.
    public init(zoneID: ZoneID, syncToken: String? = nil, atomic: Bool? = nil, deleted: Bool? = nil) {
        self.zoneID = zoneID
        self.syncToken = syncToken
        self.atomic = atomic
        self.deleted = deleted
    }

    public init(json: JSONValue) throws {
        let object = try json.object()
        zoneID = try object.decode("zoneID")
        syncToken = try object.decodeIfPresent("syncToken")
        atomic = try object.decodeIfPresent("atomic")
        deleted = try object.decodeIfPresent("deleted")
    }

    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("zoneID", zoneID)
        writer.field("syncToken", syncToken)
        writer.field("atomic", atomic)
        writer.field("deleted", deleted)
        writer.endObject()
    }
}
