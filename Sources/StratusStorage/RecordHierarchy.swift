import StratusModel

/// Where a record stands in a hierarchy of records and in the hierarchical share rooted above it,
/// as storage keeps it: reserved fields inside the record's stored fields (names no client field
/// can take, like ``ShareState/fieldName``), so that it versions, exports and travels between
/// instances with the record, and no backend needs a column for it.
///
/// - ``parentField``: the record's `parent`, which places it under another record of its zone.
/// - ``rootShareField``: on the root of a hierarchical share, the share record's name.
/// - ``shareField``: the share the record belongs to: its own, for a root or a share record; its
///   parent's otherwise; none outside any hierarchy that is shared. The write executor keeps it
///   current whenever a parent, a root or a share changes, so reads decide who sees a record from
///   the record alone.
/// - ``formerShareField`` and ``formerShareSequenceField``: the share a record last left, and the
///   position in the zone's change order at which it left, so that a participant's change feed
///   shows it as deleted once and nobody else learns of it.
///
/// A tombstone keeps its ``shareField`` and former share, so that participants see the deletion.
public enum RecordHierarchy {
    /// The reserved field of a record's parent (a `REFERENCE`).
    public static let parentField = "___parent"
    /// The reserved field that names the share a root record heads (a `STRING`).
    public static let rootShareField = "___rootShare"
    /// The reserved field that names the share a record belongs to (a `STRING`).
    public static let shareField = "___inShare"
    /// The reserved field that names the share a record last left (a `STRING`).
    public static let formerShareField = "___leftShare"
    /// The reserved field with the change-order position at which the record left it (an `INT64`).
    public static let formerShareSequenceField = "___leftShareAt"

    /// Whether a field name is reserved for storage (every name that starts with `___`).
    public static func isReserved(_ fieldName: String) -> Bool {
        // Bytes, not characters: this runs for every field of every record written.
        var bytes = fieldName.utf8.makeIterator()
        return bytes.next() == UInt8(ascii: "_") && bytes.next() == UInt8(ascii: "_") && bytes.next() == UInt8(ascii: "_")
    }

    /// The fields a tombstone keeps from its record: the share it was in and the one it last left,
    /// so that their participants see the deletion.
    static func tombstoneFields(of record: StoredRecord) -> [String: FieldValue] {
        guard record.mayHoldReservedFields, let fields = try? record.decodeFields() else { return [:] }
        return fields.filter { [shareField, formerShareField, formerShareSequenceField].contains($0.key) }
    }
}

/// A share a record left, and when.
public struct FormerShare: Hashable, Sendable {
    /// The share record's name.
    public var shareName: String
    /// The record's position in its zone's change order when it left.
    public var sequence: Int64

    /// Creates a former share.
    public init(shareName: String, sequence: Int64) {
        self.shareName = shareName
        self.sequence = sequence
    }
}

extension StoredRecord {
    /// Whether the stored fields may hold a reserved field: records without one (most) are not
    /// decoded to find out.
    var mayHoldReservedFields: Bool {
        decodedFields.map { $0.keys.contains(where: RecordHierarchy.isReserved) } ?? fieldsJSON.contains(tag: #""___"#)
    }

    /// A reserved field's value, without decoding records that hold none.
    private func reservedValue(_ name: String) -> FieldValue? {
        guard mayHoldReservedFields else { return nil }
        return (try? decodeFields())?[name]
    }

    /// The record's parent's name, if it has one.
    public var parentName: String? {
        if case .reference(let reference)? = reservedValue(RecordHierarchy.parentField) { return reference.recordName }
        return nil
    }

    /// The share this record is the root of, if it is one.
    public var rootShareName: String? {
        if case .string(let name)? = reservedValue(RecordHierarchy.rootShareField) { return name }
        return nil
    }

    /// The hierarchical share the record belongs to, if any (``RecordHierarchy/shareField``).
    public var shareName: String? {
        if case .string(let name)? = reservedValue(RecordHierarchy.shareField) { return name }
        return nil
    }

    /// The share the record last left, if any.
    public var formerShare: FormerShare? {
        guard case .string(let name)? = reservedValue(RecordHierarchy.formerShareField),
            case .int64(let sequence)? = reservedValue(RecordHierarchy.formerShareSequenceField)
        else { return nil }
        return FormerShare(shareName: name, sequence: sequence)
    }

    /// The record with reserved fields set (a `nil` value removes one), its stored JSON written again.
    func settingReserved(_ values: [String: FieldValue?]) -> StoredRecord {
        var fields = (try? decodeFields()) ?? [:]
        for (name, value) in values { fields[name] = value }
        return replacingFields(fields)
    }

    /// The record holding `fields` instead of its own (stored JSON empty when there are none).
    func replacingFields(_ fields: [String: FieldValue]) -> StoredRecord {
        var record = self
        if fields.isEmpty {
            record.fieldsJSON = []
        } else {
            var writer = JSONWriter(capacity: fieldsJSON.count + 64)
            RecordDictionary.writeFields(fields, to: &writer)
            record.fieldsJSON = writer.bytes
        }
        record.decodedFields = fields
        return record
    }

    /// The record's fields as a client sees them: its own, without reserved ones.
    func clientFields() throws -> [String: FieldValue] {
        let fields = try decodeFields()
        guard mayHoldReservedFields else { return fields }
        return fields.filter { !RecordHierarchy.isReserved($0.key) }
    }
}
