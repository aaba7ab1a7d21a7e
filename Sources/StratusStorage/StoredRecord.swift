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
    /// The fields as values, when they are at hand (a record just planned from a write): saves
    /// decoding `fieldsJSON` again for indexing. Not part of the record's identity.
    var decodedFields: [String: FieldValue]?

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
        if let decodedFields { return decodedFields }
        guard !fieldsJSON.isEmpty else { return [:] }
        return try [String: FieldValue](jsonBytes: fieldsJSON)
    }

    public static func == (lhs: StoredRecord, rhs: StoredRecord) -> Bool {
        lhs.name == rhs.name && lhs.recordType == rhs.recordType && lhs.changeTag == rhs.changeTag
            && lhs.fieldsJSON == rhs.fieldsJSON && lhs.created == rhs.created && lhs.modified == rhs.modified
            && lhs.deleted == rhs.deleted && lhs.sequence == rhs.sequence
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(name)
        hasher.combine(changeTag)
        hasher.combine(sequence)
    }

    /// CloudKit's system fields a query sees beside the record's own.
    static let systemQueryFieldNames = ["___recordID", "___createTime", "___modTime", "___createdBy", "___modifiedBy"]

    /// The fields a query sees: the record's own, plus CloudKit's system fields `___recordID`,
    /// `___createTime`, `___modTime`, `___createdBy` and `___modifiedBy`.
    public func queryFields() throws -> [String: FieldValue] {
        var fields = try decodeFields()
        for name in Self.systemQueryFieldNames { fields[name] = systemQueryField(name) }
        return fields
    }

    /// The value of system field `name` as a query sees it; `nil` for any other name.
    func systemQueryField(_ name: String) -> FieldValue? {
        switch name {
        case "___recordID": .reference(Reference(recordName: self.name))
        case "___createTime": .timestamp(created.timestamp)
        case "___modTime": .timestamp(modified.timestamp)
        case "___createdBy": .reference(Reference(recordName: created.userRecordName))
        case "___modifiedBy": .reference(Reference(recordName: modified.userRecordName))
        default: nil
        }
    }

    /// Writes the record as a Record Dictionary. With no `desiredKeys`, numbers as numbers and no
    /// asset in the record, the stored JSON is copied as is, without being decoded. `zoneIDJSON` is
    /// the zone's ID as JSON (`ZoneID.jsonBytes`), encoded once for all the records of a response.
    /// `assetURL` gives each asset's `downloadURL` from the record's name, the field's name and the
    /// asset's checksum. A share record's state is written as its share keys, which `shareKeys` makes
    /// for the reader (``ShareState/keys(reader:urlPrefix:)``), never as a field. With
    /// `hidesRootParent` (for a participant of shares rooted at records), a share's root is written
    /// without its `parent`, which lies outside the share.
    public func write(
        to writer: inout JSONWriter, zoneIDJSON: [UInt8], desiredKeys: Set<String>? = nil,
        numbersAsStrings: Bool = false,
        assetURL: ((_ recordName: String, _ field: String, _ checksum: String) -> String)? = nil,
        shareKeys: ((ShareState) -> ShareKeys)? = nil, hidesRootParent: Bool = false
    ) {
        let rewritesAssets = assetURL != nil && fieldsJSON.contains(tag: #""type":"ASSETID"#)
        let share = shareState
        let reserved = mayHoldReservedFields
        let rootShare = deleted || !reserved ? nil : rootShareName
        RecordDictionary.writeObject(
            to: &writer, recordName: name, recordType: recordType, recordChangeTag: changeTag, created: created,
            modified: modified, deleted: deleted, zoneIDJSON: zoneIDJSON, share: share.flatMap { shareKeys?($0) },
            parent: deleted || !reserved || (hidesRootParent && rootShare != nil)
                ? nil : parentName.map { Reference(recordName: $0) },
            shareReference: rootShare.map { Reference(recordName: $0) },
            writesFields: !deleted && desiredKeys?.isEmpty != true
        ) { writer in
            if desiredKeys == nil, !numbersAsStrings, !rewritesAssets, !reserved, !fieldsJSON.isEmpty {
                writer.raw(fieldsJSON)
                return
            }
            // The stored JSON was written by Stratus, so it decodes.
            var fields = (try? clientFields()) ?? [:]
            if rewritesAssets, let assetURL { addDownloadURLs(to: &fields, assetURL: assetURL) }
            RecordDictionary.writeFields(fields, to: &writer, desiredKeys: desiredKeys, numbersAsStrings: numbersAsStrings)
        }
    }

    /// The record as a Record Dictionary value; `assetURL` gives its assets their `downloadURL` and
    /// `shareKeys` a share record its share keys.
    public func dictionary(
        zoneID: ZoneID, assetURL: ((_ recordName: String, _ field: String, _ checksum: String) -> String)? = nil,
        shareKeys: ((ShareState) -> ShareKeys)? = nil
    ) throws -> RecordDictionary {
        var fields = deleted ? [:] : try clientFields()
        if let assetURL { addDownloadURLs(to: &fields, assetURL: assetURL) }
        return RecordDictionary(
            recordName: name, recordType: recordType, recordChangeTag: changeTag, fields: fields, created: created,
            modified: modified, deleted: deleted, zoneID: zoneID, share: shareState.flatMap { shareKeys?($0) },
            parent: deleted ? nil : parentName.map { Reference(recordName: $0) },
            shareReference: deleted ? nil : rootShareName.map { Reference(recordName: $0) })
    }

    /// Sets the `downloadURL` of every asset in `fields`.
    private func addDownloadURLs(
        to fields: inout [String: FieldValue], assetURL: (_ recordName: String, _ field: String, _ checksum: String) -> String
    ) {
        for (field, value) in fields where value.type == .asset || value.type == .assetList {
            fields[field] = value.mappingAssets { asset in
                var asset = asset
                asset.downloadURL = asset.fileChecksum.map { assetURL(name, field, $0) }
                return asset
            }
        }
    }
}
