/// What happens to a record that holds a reference when the referenced record is deleted.
public enum ReferenceAction: String, Sendable, Hashable, CaseIterable {
    /// Nothing: the reference may dangle.
    case none = "NONE"
    /// Deleting the target deletes the record that holds the reference.
    case deleteSelf = "DELETE_SELF"
    /// The target must exist when the record is saved.
    case validate = "VALIDATE"
}

/// A pointer to another record (CloudKit's Reference Dictionary).
public struct Reference: Hashable, Sendable, JSONDecodable, JSONWritable {
    /// The referenced record's name.
    public var recordName: String
    /// The referenced record's zone; `nil` means the zone of the record that holds the reference.
    public var zoneID: ZoneID?
    /// The delete rule.
    public var action: ReferenceAction

    /// Creates a reference.
    public init(recordName: String, zoneID: ZoneID? = nil, action: ReferenceAction = .none) {
        self.recordName = recordName
        self.zoneID = zoneID
        self.action = action
    }

    public init(json: JSONValue) throws {
        let object = try json.object()
        recordName = try object.decode("recordName")
        zoneID = try object.decodeIfPresent("zoneID")
        action = try object.decodeIfPresent("action") ?? .none
    }

    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("recordName", recordName)
        writer.field("zoneID", zoneID)
        writer.field("action", action.rawValue)
        writer.endObject()
    }
}
