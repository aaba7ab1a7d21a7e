public import Foundation
import StratusModel

/// A record: typed fields plus the system fields the server maintains (CloudKit's `CKRecord`).
///
/// ```swift
/// var note = Record(recordType: "Note", recordID: Record.ID(recordName: "note", zoneID: zoneID))
/// note["title"] = "Groceries"
/// note["modified"] = Date()
/// note["text"] = Asset(fileURL: fileURL)
/// let saved = try await database.save(note)
/// let title = saved["title"] as? String
/// let version = saved["version", as: Int.self]
/// ```
///
/// `Record` is a value: saving returns the saved record, with its new ``recordChangeTag``. Keep
/// that copy (or its ``encodeSystemFields()``) and edit it for the next save, so that the server
/// can tell your edit is based on its latest version.
public struct Record: Hashable, Sendable {
    /// Identifies a record: its name and its zone (CloudKit's `CKRecord.ID`).
    public struct ID: Hashable, Sendable, Codable, CustomStringConvertible {
        /// The record's name, unique in its zone: printable ASCII, at most 255 characters.
        public var recordName: String
        /// The record's zone.
        public var zoneID: RecordZone.ID

        /// Creates an ID; the name defaults to a new UUID and the zone to the default zone.
        public init(recordName: String = UUID().uuidString, zoneID: RecordZone.ID = .default) {
            self.recordName = recordName
            self.zoneID = zoneID
        }

        public var description: String { "\(recordName) in \(zoneID)" }
    }

    /// The record's parts. Copies of a record share them until one copy changes, so a record moves
    /// through feed pages, dictionaries and events as one pointer, not a few hundred bytes.
    private struct Parts: Hashable, Sendable {
        var recordID: ID
        var recordType: String
        var recordChangeTag: String?
        var creationDate: Date?
        var creatorUserRecordID: ID?
        var modificationDate: Date?
        var lastModifiedUserRecordID: ID?
        var lastModifiedDeviceID: String?
        var values: [String: RecordFieldValue] = [:]
        var originalValues: [String: RecordFieldValue?] = [:]
        var shareKeys: ShareKeys?
        var parent: Reference?
        var parentChanged = false
        var share: Reference?
    }

    /// The shared parts; changed in place only while one copy holds them.
    private final class Box: @unchecked Sendable {
        var parts: Parts
        init(_ parts: Parts) { self.parts = parts }
    }

    private var box: Box

    private var parts: Parts {
        get { box.parts }
        _modify {
            if !isKnownUniquelyReferenced(&box) { box = Box(box.parts) }
            yield &box.parts
        }
    }

    /// The record's ID.
    public var recordID: ID { parts.recordID }
    /// The record's type, such as `"Note"`.
    public var recordType: String { parts.recordType }
    /// The server's version tag of the record; `nil` for a record never saved. It changes with
    /// every save.
    public internal(set) var recordChangeTag: String? {
        get { parts.recordChangeTag }
        set { parts.recordChangeTag = newValue }
    }
    /// When the record was first saved.
    public internal(set) var creationDate: Date? {
        get { parts.creationDate }
        set { parts.creationDate = newValue }
    }
    /// The user who first saved the record.
    public internal(set) var creatorUserRecordID: ID? {
        get { parts.creatorUserRecordID }
        set { parts.creatorUserRecordID = newValue }
    }
    /// When the record was last saved.
    public internal(set) var modificationDate: Date? {
        get { parts.modificationDate }
        set { parts.modificationDate = newValue }
    }
    /// The user who last saved the record.
    public internal(set) var lastModifiedUserRecordID: ID? {
        get { parts.lastModifiedUserRecordID }
        set { parts.lastModifiedUserRecordID = newValue }
    }
    /// The device that last saved the record, when it said which one it is
    /// (``Container/Configuration/deviceID``).
    public internal(set) var lastModifiedDeviceID: String? {
        get { parts.lastModifiedDeviceID }
        set { parts.lastModifiedDeviceID = newValue }
    }

    /// The field values.
    var values: [String: RecordFieldValue] {
        get { parts.values }
        _modify { yield &parts.values }
    }
    /// For each key changed since the record was fetched or created: its value before the first
    /// change (`nil` when the field was absent).
    var originalValues: [String: RecordFieldValue?] {
        get { parts.originalValues }
        _modify { yield &parts.originalValues }
    }
    /// A share record's share keys (``Share``); `nil` for any other record.
    var shareKeys: ShareKeys? {
        get { parts.shareKeys }
        set { parts.shareKeys = newValue }
    }

    /// The record above this one in its hierarchy (CloudKit's `CKRecord.parent`), in the same zone.
    /// Sharing a record (``Share/init(rootRecord:)``) shares every record below it through `parent`.
    public var parent: Reference? {
        get { parts.parent }
        set {
            parts.parent = newValue
            parts.parentChanged = true
        }
    }
    /// Whether ``parent`` was set since the record was fetched or created, so a removal is sent.
    var parentChanged: Bool {
        get { parts.parentChanged }
        set { parts.parentChanged = newValue }
    }

    /// On the root of a hierarchical share, the share (CloudKit's `CKRecord.share`); the server
    /// sets it when the share is saved.
    public internal(set) var share: Reference? {
        get { parts.share }
        set { parts.share = newValue }
    }

    /// A new record of `recordType`; the ID defaults to a new UUID in the default zone.
    public init(recordType: String, recordID: ID = ID()) {
        box = Box(Parts(recordID: recordID, recordType: recordType))
    }

    public static func == (lhs: Record, rhs: Record) -> Bool {
        lhs.box === rhs.box || lhs.parts == rhs.parts
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(parts)
    }

    /// A new record of `recordType` with a new UUID name in `zoneID`.
    public init(recordType: String, zoneID: RecordZone.ID) {
        self.init(recordType: recordType, recordID: ID(zoneID: zoneID))
    }

    /// The value of field `key` as the Swift type it holds (`String`, `Int64`, `Double`, `Date`,
    /// `Data`, ``Reference``, ``Asset``, `Location` or an array of one); assigning a value sets
    /// the field and `nil` removes it.
    ///
    /// Whole numbers read back as `Int64`: write `record["count", as: Int.self]` for another type.
    public subscript(key: String) -> (any RecordValue)? {
        get { values[key]?.swiftValue }
        set { setFieldValue(newValue?.recordFieldValue, forKey: key) }
    }

    /// The value of field `key` converted to `type`; `nil` when the field is absent or holds a
    /// value `type` cannot represent.
    public subscript<Value: RecordValue>(key: String, as type: Value.Type) -> Value? {
        values[key].flatMap(Value.init(recordFieldValue:))
    }

    /// The field value of `key`, with its type.
    public func fieldValue(forKey key: String) -> RecordFieldValue? { values[key] }

    /// Sets field `key`; `nil` removes it.
    public mutating func setFieldValue(_ value: RecordFieldValue?, forKey key: String) {
        if originalValues.index(forKey: key) == nil { originalValues[key] = .some(values[key]) }
        values[key] = value
        if originalValues[key] == .some(value) { originalValues[key] = nil }
    }

    /// The names of the fields the record holds, sorted.
    public func allKeys() -> [String] { values.keys.sorted() }

    /// The names of the fields set or removed since the record was fetched or created, sorted.
    public func changedKeys() -> [String] { originalValues.keys.sorted() }

    /// The record as it was before the changes made to it locally: the version an edit is based on.
    var ancestor: Record {
        var ancestor = self
        for (key, original) in originalValues { ancestor.values[key] = original }
        ancestor.originalValues = [:]
        return ancestor
    }

    /// The record with its local changes marked as saved.
    var withChangesCommitted: Record {
        var record = self
        record.originalValues = [:]
        return record
    }
}
