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

    /// The record's ID.
    public let recordID: ID
    /// The record's type, such as `"Note"`.
    public let recordType: String
    /// The server's version tag of the record; `nil` for a record never saved. It changes with
    /// every save.
    public internal(set) var recordChangeTag: String?
    /// When the record was first saved.
    public internal(set) var creationDate: Date?
    /// The user who first saved the record.
    public internal(set) var creatorUserRecordID: ID?
    /// When the record was last saved.
    public internal(set) var modificationDate: Date?
    /// The user who last saved the record.
    public internal(set) var lastModifiedUserRecordID: ID?
    /// The device that last saved the record, when it said which one it is
    /// (``Container/Configuration/deviceID``).
    public internal(set) var lastModifiedDeviceID: String?

    /// The field values.
    var values: [String: RecordFieldValue]
    /// For each key changed since the record was fetched or created: its value before the first
    /// change (`nil` when the field was absent).
    var originalValues: [String: RecordFieldValue?]
    /// A share record's share keys (``Share``); `nil` for any other record.
    var shareKeys: ShareKeys?

    /// The record above this one in its hierarchy (CloudKit's `CKRecord.parent`), in the same zone.
    /// Sharing a record (``Share/init(rootRecord:)``) shares every record below it through `parent`.
    public var parent: Reference? {
        didSet { parentChanged = true }
    }
    /// Whether ``parent`` was set since the record was fetched or created, so a removal is sent.
    var parentChanged = false

    /// On the root of a hierarchical share, the share (CloudKit's `CKRecord.share`); the server
    /// sets it when the share is saved.
    public internal(set) var share: Reference?

    /// A new record of `recordType`; the ID defaults to a new UUID in the default zone.
    public init(recordType: String, recordID: ID = ID()) {
        self.recordID = recordID
        self.recordType = recordType
        self.values = [:]
        self.originalValues = [:]
    }

    /// A new record of `recordType` with a new UUID name in `zoneID`.
    public init(recordType: String, zoneID: RecordZone.ID) {
        self.init(recordType: recordType, recordID: ID(zoneID: zoneID))
    }

    /// The value of field `key` as the Swift type it holds (`String`, `Int64`, `Double`, `Date`,
    /// `Data`, ``Reference``, ``Asset``, ``Location`` or an array of one); assigning a value sets
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
