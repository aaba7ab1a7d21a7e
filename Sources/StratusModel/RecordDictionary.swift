/// A record as it travels on the wire (CloudKit's Record Dictionary).
///
/// In requests, `fields` holds the values to write and ``removedFieldNames`` the fields sent as
/// `{"value": null}`. In responses, the server fills the system fields (`recordChangeTag`,
/// `created`, `modified`, `deleted`, `zoneID`).
public struct RecordDictionary: Hashable, Sendable {
    /// The record's name, unique in its zone.
    public var recordName: String?
    /// The record's type.
    public var recordType: String?
    /// The server's version tag; it changes on every write.
    public var recordChangeTag: String?
    /// Field values by field name.
    public var fields: [String: FieldValue]
    /// Fields a request asks to remove.
    public var removedFieldNames: Set<String>
    /// Fields a request sent without a `type`, whose values were inferred from their JSON; the server
    /// reads them as the schema's type for the field when it has one.
    public var untypedFieldNames: Set<String> = []
    /// Creation stamp.
    public var created: RecordStamp?
    /// Last modification stamp.
    public var modified: RecordStamp?
    /// `true` for a tombstone in a change feed or the result of a delete.
    public var deleted: Bool?
    /// The record's zone.
    public var zoneID: ZoneID?
    /// The share keys, on a share record (``ShareKeys/recordType``).
    public var share: ShareKeys?
    /// The record's parent (`parent`, `{recordName}`): what places it in a hierarchy, and in the share
    /// of the hierarchy's root.
    public var parent: Reference?
    /// Whether a request sent `"parent": null`, which takes the record out of its hierarchy.
    public var removesParent = false
    /// On the root of a hierarchical share, the share record (`share`, `{recordName, zoneID}`). The
    /// server sets it; requests cannot.
    public var shareReference: Reference?

    /// Creates a record dictionary.
    public init(
        recordName: String? = nil, recordType: String? = nil, recordChangeTag: String? = nil,
        fields: [String: FieldValue] = [:], removedFieldNames: Set<String> = [], created: RecordStamp? = nil,
        modified: RecordStamp? = nil, deleted: Bool? = nil, zoneID: ZoneID? = nil, share: ShareKeys? = nil,
        parent: Reference? = nil, shareReference: Reference? = nil
    ) {
        self.share = share
        self.parent = parent
        self.shareReference = shareReference
        self.recordName = recordName
        self.recordType = recordType
        self.recordChangeTag = recordChangeTag
        self.fields = fields
        self.removedFieldNames = removedFieldNames
        self.created = created
        self.modified = modified
        self.deleted = deleted
        self.zoneID = zoneID
    }

    /// Writes the record in Apple's key order. `desiredKeys` limits the fields written (`nil`: all;
    /// empty: none, and the `fields` key is left out).
    public func write(to writer: inout JSONWriter, desiredKeys: Set<String>? = nil, numbersAsStrings: Bool = false) {
        Self.writeObject(
            to: &writer, recordName: recordName, recordType: recordType, recordChangeTag: recordChangeTag,
            created: created, modified: modified, deleted: deleted, zoneIDJSON: zoneID?.jsonBytes, share: share,
            parent: parent, removesParent: removesParent, shareReference: shareReference,
            writesFields: deleted != true && desiredKeys?.isEmpty != true
        ) {
            Self.writeFields(
                fields, to: &$0, desiredKeys: desiredKeys, numbersAsStrings: numbersAsStrings,
                removedFieldNames: removedFieldNames)
        }
    }

    /// Writes a Record Dictionary in Apple's key order (`recordName`, `recordType`, `fields`,
    /// `recordChangeTag`, `created`, `modified`, `deleted`, `zoneID`). `writeFields` writes the
    /// fields object; without `writesFields` the `fields` key is left out (and `writeFields` is not
    /// called: it does not escape, so a record's fields need no closure context on the heap). `zoneIDJSON` is the zone ID
    /// already written as JSON: every record of a response shares it, so it is encoded once. Then
    /// `parent` (`null` when `removesParent`), the `share` reference of a shared root, and a share
    /// record's share keys.
    public static func writeObject(
        to writer: inout JSONWriter, recordName: String?, recordType: String?, recordChangeTag: String?,
        created: RecordStamp?, modified: RecordStamp?, deleted: Bool?, zoneIDJSON: [UInt8]?, share: ShareKeys? = nil,
        parent: Reference? = nil, removesParent: Bool = false, shareReference: Reference? = nil,
        writesFields: Bool, writeFields: (inout JSONWriter) -> Void
    ) {
        // Keys encoded once and concrete calls rather than the generic `field`: this runs once per
        // record in every feed page.
        writer.beginObject()
        if let recordName {
            writer.key(Keys.recordName)
            writer.string(recordName)
        }
        if let recordType {
            writer.key(Keys.recordType)
            writer.string(recordType)
        }
        if writesFields {
            writer.key(Keys.fields)
            writeFields(&writer)
        }
        if let recordChangeTag {
            writer.key(Keys.recordChangeTag)
            writer.string(recordChangeTag)
        }
        if let created {
            writer.key(Keys.created)
            created.write(to: &writer)
        }
        if let modified {
            writer.key(Keys.modified)
            modified.write(to: &writer)
        }
        if let deleted {
            writer.key(Keys.deleted)
            writer.bool(deleted)
        }
        if let zoneIDJSON {
            writer.key(Keys.zoneID)
            writer.raw(zoneIDJSON)
        }
        writer.field("parent", parent)
        if parent == nil, removesParent {
            writer.key("parent")
            writer.null()
        }
        writer.field("share", shareReference)
        share?.writeMembers(to: &writer)
        writer.endObject()
    }

    /// The keys every record of a page writes, encoded once.
    private enum Keys {
        static let recordName = JSONKey("recordName")
        static let recordType = JSONKey("recordType")
        static let fields = JSONKey("fields")
        static let recordChangeTag = JSONKey("recordChangeTag")
        static let created = JSONKey("created")
        static let modified = JSONKey("modified")
        static let deleted = JSONKey("deleted")
        static let zoneID = JSONKey("zoneID")
    }

    /// Writes a fields dictionary (`{"name": {"value": …, "type": …}, …}`) with keys sorted, so that
    /// the same fields always give the same bytes. `removedFieldNames` are written as
    /// `{"value": null}`, the request form that removes a field.
    public static func writeFields(
        _ fields: [String: FieldValue], to writer: inout JSONWriter, desiredKeys: Set<String>? = nil,
        numbersAsStrings: Bool = false, removedFieldNames: Set<String> = []
    ) {
        writer.beginObject()
        let names = removedFieldNames.isEmpty ? fields.keys.sorted() : Set(fields.keys).union(removedFieldNames).sorted()
        for name in names where desiredKeys?.contains(name) ?? true {
            writer.key(name)
            if let value = fields[name] {
                value.write(to: &writer, numbersAsStrings: numbersAsStrings)
            } else {
                writer.beginObject()
                writer.key("value")
                writer.null()
                writer.endObject()
            }
        }
        writer.endObject()
    }
}

extension RecordDictionary: JSONWritable {
    public func write(to writer: inout JSONWriter) { write(to: &writer, desiredKeys: nil) }
}

extension RecordDictionary: JSONDecodable {
    public init(json: JSONValue) throws {
        let object = try json.object()
        recordName = try object.decodeIfPresent("recordName")
        recordType = try object.decodeIfPresent("recordType")
        recordChangeTag = try object.decodeIfPresent("recordChangeTag")
        created = try object.decodeIfPresent("created")
        modified = try object.decodeIfPresent("modified")
        deleted = try object.decodeIfPresent("deleted")
        zoneID = try object.decodeIfPresent("zoneID")
        share = try ShareKeys(object)
        parent = try object.decodeIfPresent("parent")
        if case .null? = object.members["parent"] { removesParent = true }
        shareReference = try object.decodeIfPresent("share")
        fields = [:]
        removedFieldNames = []
        untypedFieldNames = []
        guard let fieldsValue = object["fields"] else { return }
        let members = try withJSONPath(.key("fields")) { try fieldsValue.object().members }
        fields.reserveCapacity(members.count)
        for (name, value) in members {
            let slot = try withJSONPath(.key("fields")) { try withJSONPath(.key(name)) { try FieldSlot(json: value) } }
            if let value = slot.value {
                fields[name] = value
                if !slot.isTyped { untypedFieldNames.insert(name) }
            } else {
                removedFieldNames.insert(name)
            }
        }
    }
}
