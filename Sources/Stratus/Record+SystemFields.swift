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
            fields = try systemFieldsData.first == SystemFields.binaryMarker
                ? SystemFields(binary: systemFieldsData) : SystemFields(json: systemFieldsData)
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

/// The stored form of a record's system fields, opaque to apps as CloudKit's is. It is binary: the
/// byte 2, a byte whose bits say which optional values follow, then the record's name, zone name,
/// owner name and type, then the optional values present (change tag, creation date, creator,
/// modification date, last modifier, last device), each string as its UTF-8 length (LEB128) and
/// bytes, each date as the 8 bytes (little-endian) of its seconds since 1970 as a `Double`. A mirror
/// keeps one per row and looks them up by key, so their size is the size of its largest table: this
/// form is about half the JSON object that earlier versions wrote (keys in alphabetical order,
/// absent values left out, dates as milliseconds since 1970), which is still read.
private struct SystemFields {
    /// The version the JSON form carries, and the version every form stands for.
    static let currentVersion = 1
    /// The first byte of the binary form (a JSON object starts with `{`).
    static let binaryMarker: UInt8 = 2

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

    /// Which optional values the binary form holds, one bit each, in the order they follow.
    private struct Present: OptionSet {
        let rawValue: UInt8
        static let recordChangeTag = Present(rawValue: 1)
        static let creationDate = Present(rawValue: 2)
        static let creatorUserRecordName = Present(rawValue: 4)
        static let modificationDate = Present(rawValue: 8)
        static let lastModifiedUserRecordName = Present(rawValue: 16)
        static let lastModifiedDeviceID = Present(rawValue: 32)
    }

    func encoded() -> Data {
        var bytes: [UInt8] = [Self.binaryMarker, 0]
        bytes.reserveCapacity(256)
        func string(_ value: String) {
            var length = value.utf8.count
            while length >= 0x80 {
                bytes.append(UInt8(truncatingIfNeeded: length) | 0x80)
                length >>= 7
            }
            bytes.append(UInt8(length))
            bytes.append(contentsOf: value.utf8)
        }
        var present: Present = []
        func optional(_ value: String?, _ bit: Present) {
            guard let value else { return }
            present.insert(bit)
            string(value)
        }
        func optional(_ value: Date?, _ bit: Present) {
            guard let value else { return }
            present.insert(bit)
            withUnsafeBytes(of: value.timeIntervalSince1970.bitPattern.littleEndian) { bytes.append(contentsOf: $0) }
        }
        string(recordName)
        string(zoneName)
        string(ownerName)
        string(recordType)
        optional(recordChangeTag, .recordChangeTag)
        optional(creationDate, .creationDate)
        optional(creatorUserRecordName, .creatorUserRecordName)
        optional(modificationDate, .modificationDate)
        optional(lastModifiedUserRecordName, .lastModifiedUserRecordName)
        optional(lastModifiedDeviceID, .lastModifiedDeviceID)
        bytes[1] = present.rawValue
        return Data(bytes)
    }

    init(binary data: Data) throws {
        let bytes = [UInt8](data)
        var offset = 2
        func take(_ count: Int) throws -> ArraySlice<UInt8> {
            guard count >= 0, bytes.count - offset >= count else { throw Malformed(description: "the data ends early") }
            defer { offset += count }
            return bytes[offset..<offset + count]
        }
        func string() throws -> String {
            var length = 0
            var shift = 0
            while true {
                guard shift < 35, let byte = try take(1).first else { throw Malformed(description: "a length is too long") }
                length |= Int(byte & 0x7F) << shift
                shift += 7
                if byte & 0x80 == 0 { break }
            }
            guard let value = String(validating: try take(length), as: UTF8.self) else {
                throw Malformed(description: "a string is not UTF-8")
            }
            return value
        }
        func date() throws -> Date {
            let raw = try take(8).reversed().reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            return Date(timeIntervalSince1970: Double(bitPattern: raw))
        }
        guard bytes.count >= 2 else { throw Malformed(description: "the data ends early") }
        let present = Present(rawValue: bytes[1])
        guard present.rawValue & ~0x3F == 0 else { throw Malformed(description: "unknown values are marked present") }
        let recordName = try string()
        let zoneName = try string()
        let ownerName = try string()
        let recordType = try string()
        let recordChangeTag = present.contains(.recordChangeTag) ? try string() : nil
        let creationDate = present.contains(.creationDate) ? try date() : nil
        let creatorUserRecordName = present.contains(.creatorUserRecordName) ? try string() : nil
        let modificationDate = present.contains(.modificationDate) ? try date() : nil
        let lastModifiedUserRecordName = present.contains(.lastModifiedUserRecordName) ? try string() : nil
        let lastModifiedDeviceID = present.contains(.lastModifiedDeviceID) ? try string() : nil
        guard offset == bytes.count else { throw Malformed(description: "bytes follow the last value") }
        self.init(
            version: Self.currentVersion, recordName: recordName, zoneName: zoneName, ownerName: ownerName,
            recordType: recordType, recordChangeTag: recordChangeTag, creationDate: creationDate,
            creatorUserRecordName: creatorUserRecordName, modificationDate: modificationDate,
            lastModifiedUserRecordName: lastModifiedUserRecordName, lastModifiedDeviceID: lastModifiedDeviceID)
    }
}
