public import StratusModel

/// A record as storage keeps it: system fields plus the fields' canonical JSON.
public struct StoredRecord: Hashable, Sendable {
    /// The record's name.
    public var name: String
    /// The record's type.
    public var recordType: String
    /// The version tag; new on every write.
    public var changeTag: String
    /// The fields as canonical JSON (``RecordDictionary/writeFields(_:to:desiredKeys:numbersAsStrings:)``);
    /// empty for a tombstone.
    public var fieldsJSON: [UInt8]
    /// Creation stamp.
    public var created: RecordStamp
    /// Last modification (or deletion) stamp.
    public var modified: RecordStamp
    /// Whether this is a tombstone.
    public var deleted: Bool
    /// The position of the record's last change in its zone's change order.
    public var sequence: Int64

    /// Creates a stored record.
    public init(
        name: String, recordType: String, changeTag: String, fieldsJSON: [UInt8], created: RecordStamp,
        modified: RecordStamp, deleted: Bool, sequence: Int64
    ) {
        self.name = name
        self.recordType = recordType
        self.changeTag = changeTag
        self.fieldsJSON = fieldsJSON
        self.created = created
        self.modified = modified
        self.deleted = deleted
        self.sequence = sequence
    }

    /// Decodes the fields.
    public func decodeFields() throws -> [String: FieldValue] {
        guard !fieldsJSON.isEmpty else { return [:] }
        return try [String: FieldValue](jsonBytes: fieldsJSON)
    }

    /// Writes the record as a Record Dictionary. With no `desiredKeys` and numbers as numbers the
    /// stored JSON is copied as is, without being decoded. `zoneIDJSON` is the zone's ID as JSON
    /// (`ZoneID.jsonBytes`), encoded once for all the records of a response.
    public func write(
        to writer: inout JSONWriter, zoneIDJSON: [UInt8], desiredKeys: Set<String>? = nil,
        numbersAsStrings: Bool = false
    ) {
        RecordDictionary.writeObject(
            to: &writer, recordName: name, recordType: recordType, recordChangeTag: changeTag, created: created,
            modified: modified, deleted: deleted ? true : nil, zoneIDJSON: zoneIDJSON,
            writeFields: deleted || desiredKeys?.isEmpty == true
                ? nil
                : { writer in
                    if desiredKeys == nil, !numbersAsStrings, !fieldsJSON.isEmpty {
                        writer.raw(fieldsJSON)
                    } else {
                        // The stored JSON was written by Stratus, so it decodes.
                        let fields = (try? decodeFields()) ?? [:]
                        RecordDictionary.writeFields(
                            fields, to: &writer, desiredKeys: desiredKeys, numbersAsStrings: numbersAsStrings)
                    }
                }
        )
    }

    /// The record as a Record Dictionary value.
    public func dictionary(zoneID: ZoneID) throws -> RecordDictionary {
        RecordDictionary(
            recordName: name, recordType: recordType, recordChangeTag: changeTag,
            fields: deleted ? [:] : try decodeFields(), created: created, modified: modified,
            deleted: deleted ? true : nil, zoneID: zoneID)
    }
}
