public import Foundation
import StratusModel

extension Record {
    /// The record's system fields, without its field values (CloudKit's `encodeSystemFields(with:)`).
    ///
    /// Store this beside your own copy of the data. Rebuild the record with
    /// ``init(systemFieldsData:)``, set the fields you changed, and save: the change tag inside tells
    /// the server which version your edit is based on, so the save succeeds unless someone else
    /// changed the record in the meantime.
    public func encodeSystemFields() -> Data {
        SystemFields(
            version: SystemFields.currentVersion, recordName: recordID.recordName, zoneName: recordID.zoneID.zoneName,
            ownerName: recordID.zoneID.ownerName, recordType: recordType, recordChangeTag: recordChangeTag,
            creationDate: creationDate, creatorUserRecordName: creatorUserRecordID?.recordName,
            modificationDate: modificationDate, lastModifiedUserRecordName: lastModifiedUserRecordID?.recordName,
            lastModifiedDeviceID: lastModifiedDeviceID
        ).encoded()
    }

    /// A record with the system fields that ``encodeSystemFields()`` wrote and no field values.
    ///
    /// - Throws: ``CloudError`` `invalidArguments` when `systemFieldsData` was not written by
    ///   ``encodeSystemFields()``.
    public init(systemFieldsData: Data) throws {
        let fields: SystemFields
        do {
            fields = try SystemFields(json: systemFieldsData)
        } catch {
            throw CloudError(
                .invalidArguments, "systemFieldsData is not the output of Record.encodeSystemFields(): \(error)")
        }
        guard fields.version == SystemFields.currentVersion else {
            throw CloudError(
                .invalidArguments,
                "systemFieldsData has version \(fields.version); this SDK reads version \(SystemFields.currentVersion)")
        }
        self.init(
            recordType: fields.recordType,
            recordID: ID(
                recordName: fields.recordName, zoneID: RecordZone.ID(zoneName: fields.zoneName, ownerName: fields.ownerName)))
        recordChangeTag = fields.recordChangeTag
        creationDate = fields.creationDate
        creatorUserRecordID = fields.creatorUserRecordName.map { ID(recordName: $0) }
        modificationDate = fields.modificationDate
        lastModifiedUserRecordID = fields.lastModifiedUserRecordName.map { ID(recordName: $0) }
        lastModifiedDeviceID = fields.lastModifiedDeviceID
    }

    /// A record with the system fields that ``encodeSystemFields()`` wrote and `serverValues`, the
    /// field values the server held at that version, taken as unchanged: what is set afterwards
    /// (`nil` included, which removes a field) is what a save sends. For stores that keep the
    /// server's last values beside their own copy of the data, as a mirror of a local database does.
    ///
    /// - Throws: ``CloudError`` `invalidArguments` when `systemFieldsData` was not written by
    ///   ``encodeSystemFields()``.
    public init(systemFieldsData: Data, serverValues: [String: RecordFieldValue]) throws {
        try self.init(systemFieldsData: systemFieldsData)
        values = serverValues
    }
}

/// The stored form of a record's system fields: a JSON object with the keys in alphabetical order,
/// absent values left out, and dates as milliseconds since 1970. It is written and read with the
/// SDK's own JSON writer and reader (the same text `JSONEncoder` with sorted keys wrote before, at a
/// fraction of the cost: a mirror writes one per record it sends or receives).
private struct SystemFields {
    static let currentVersion = 1

    var version: Int
    var recordName: String
    var zoneName: String
    var ownerName: String
    var recordType: String
    var recordChangeTag: String?
    var creationDate: Date?
    var creatorUserRecordName: String?
    var modificationDate: Date?
    var lastModifiedUserRecordName: String?
    var lastModifiedDeviceID: String?

    struct Malformed: Error, CustomStringConvertible {
        var description: String
    }

    init(
        version: Int, recordName: String, zoneName: String, ownerName: String, recordType: String, recordChangeTag: String?,
        creationDate: Date?, creatorUserRecordName: String?, modificationDate: Date?, lastModifiedUserRecordName: String?,
        lastModifiedDeviceID: String?
    ) {
        self.version = version
        self.recordName = recordName
        self.zoneName = zoneName
        self.ownerName = ownerName
        self.recordType = recordType
        self.recordChangeTag = recordChangeTag
        self.creationDate = creationDate
        self.creatorUserRecordName = creatorUserRecordName
        self.modificationDate = modificationDate
        self.lastModifiedUserRecordName = lastModifiedUserRecordName
        self.lastModifiedDeviceID = lastModifiedDeviceID
    }

    init(json: Data) throws {
        var version: Int?
        var strings: [String: String] = [:]
        var dates: [String: Date] = [:]
        try Array(json).withUnsafeBufferPointer { buffer in
            var reader = JSONReader(bytes: buffer)
            try reader.beginObject()
            while let key = try reader.nextKey() {
                if try reader.readNull() { continue }
                switch key {
                case "version": version = Int(exactly: try Self.number(&reader, key))
                case "creationDate", "modificationDate":
                    dates[key] = Date(timeIntervalSince1970: try Self.number(&reader, key) / 1000)
                case "recordName", "zoneName", "ownerName", "recordType", "recordChangeTag", "creatorUserRecordName",
                    "lastModifiedUserRecordName", "lastModifiedDeviceID":
                    strings[key] = try reader.readString()
                default: _ = try reader.skipValue()
                }
            }
            try reader.expectEnd()
        }
        guard let version, let recordName = strings["recordName"], let zoneName = strings["zoneName"],
            let ownerName = strings["ownerName"], let recordType = strings["recordType"]
        else {
            throw Malformed(description: "a required key (version, recordName, zoneName, ownerName or recordType) is missing")
        }
        self.init(
            version: version, recordName: recordName, zoneName: zoneName, ownerName: ownerName, recordType: recordType,
            recordChangeTag: strings["recordChangeTag"], creationDate: dates["creationDate"],
            creatorUserRecordName: strings["creatorUserRecordName"], modificationDate: dates["modificationDate"],
            lastModifiedUserRecordName: strings["lastModifiedUserRecordName"], lastModifiedDeviceID: strings["lastModifiedDeviceID"])
    }

    private static func number(_ reader: inout JSONReader, _ key: String) throws -> Double {
        switch try reader.readNumber() {
        case .integer(let value): Double(value)
        case .double(let value): value
        default: throw Malformed(description: "\(key) is not a number")
        }
    }

    func encoded() -> Data {
        var writer = JSONWriter(capacity: 320)
        writer.beginObject()
        func date(_ key: String, _ value: Date?) {
            guard let value else { return }
            writer.key(key)
            writer.double(value.timeIntervalSince1970 * 1000)
        }
        func string(_ key: String, _ value: String?) {
            guard let value else { return }
            writer.key(key)
            writer.string(value)
        }
        date("creationDate", creationDate)
        string("creatorUserRecordName", creatorUserRecordName)
        string("lastModifiedDeviceID", lastModifiedDeviceID)
        string("lastModifiedUserRecordName", lastModifiedUserRecordName)
        date("modificationDate", modificationDate)
        string("ownerName", ownerName)
        string("recordChangeTag", recordChangeTag)
        string("recordName", recordName)
        string("recordType", recordType)
        writer.key("version")
        writer.int(Int64(version))
        string("zoneName", zoneName)
        writer.endObject()
        return Data(writer.bytes)
    }
}
