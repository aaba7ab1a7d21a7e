import Foundation
import StratusModel

/// A `records/changes` answer as the SDK reads it: records and deletions, and where the page ends.
package struct ChangePage {
    /// Records changed, each read or failed on its own, in feed order.
    package var changed: [(id: Record.ID, result: Result<Record, CloudError>)] = []
    /// Records deleted.
    package var deletions: [RecordZoneChanges.Deletion] = []
    /// Where the page ends.
    package var syncToken = ""
    /// Whether more changes follow.
    package var moreComing = false
    /// How many records were read again by the general decoder.
    package var generallyDecoded = 0
}

extension Database {
    /// Reads a `records/changes` answer straight from its bytes into ``Record``s of zone `zoneID`,
    /// without a tree of the page or wire records on the way. A record with parts this reader leaves
    /// to the general decoder (share keys, fields holding objects such as references and assets) is
    /// read again from its own bytes by ``record(decoding:zoneID:)``; both ways give the same record.
    package func decodeChangePage(_ bytes: UnsafeBufferPointer<UInt8>, zoneID: RecordZone.ID) throws -> ChangePage {
        var reader = JSONReader(bytes: bytes)
        var page = ChangePage()
        var sawToken = false
        try reader.beginObject()
        while let key = try reader.nextKey() {
            switch key {
            case "records":
                try reader.beginArray()
                while try reader.nextElement() {
                    let start = reader.offset
                    let record = try readRecord(&reader, zoneID: zoneID)
                    guard let recordName = record.name else { continue }
                    let id = Record.ID(recordName: recordName, zoneID: zoneID)
                    if record.deleted {
                        page.deletions.append(.init(recordID: id, recordType: record.type ?? ""))
                    } else if let built = record.built {
                        page.changed.append((id, .success(built)))
                    } else {
                        let slice = Array(UnsafeBufferPointer(rebasing: bytes[start..<reader.offset]))
                        page.changed.append((id, try self.record(decoding: slice, zoneID: zoneID)))
                        page.generallyDecoded += 1
                    }
                }
            case "syncToken":
                page.syncToken = try reader.readString()
                sawToken = true
            case "moreComing":
                page.moreComing = try reader.readNull() ? false : reader.readBool()
            default:
                try reader.skipValue()
            }
        }
        try reader.expectEnd()
        guard sawToken else { throw JSONDecodingError(.missing, "", at: [.key("syncToken")]) }
        return page
    }

    /// The record of a Record Dictionary's JSON text, through the general decoder (a tree, then the
    /// wire record); a record the SDK cannot take fails on its own.
    package func record(decoding json: [UInt8], zoneID: RecordZone.ID) throws -> Result<Record, CloudError> {
        let wire = try RecordDictionary(json: JSONValue.parse(json))
        return Result { () throws(CloudError) in try record(wire, zoneID: zoneID) }
    }

    /// One record of a page: its name, type and whether it is a tombstone, and the record when this
    /// reader could build it alone (`nil`: read it with the general decoder).
    private func readRecord(
        _ reader: inout JSONReader, zoneID: RecordZone.ID
    ) throws -> (name: String?, type: String?, deleted: Bool, built: Record?) {
        var name: String?
        var type: String?
        var changeTag: String?
        var created: RecordStamp?
        var modified: RecordStamp?
        var deleted = false
        var values: [String: RecordFieldValue] = [:]
        var parent: String?
        var share: String?
        var general = false
        try reader.beginObject()
        while let key = try reader.nextKey() {
            if try reader.readNull() { continue }
            switch key {
            case "recordName": name = try reader.readString()
            case "recordType": type = try reader.readString()
            case "recordChangeTag": changeTag = try reader.readString()
            case "created": created = try readStamp(&reader)
            case "modified": modified = try readStamp(&reader)
            case "deleted": deleted = try reader.readBool()
            case "zoneID": try reader.skipValue()
            case "parent": parent = try readRecordName(&reader)
            case "share": share = try readRecordName(&reader)
            case "fields":
                if let fields = try readFields(&reader, zoneID: zoneID) { values = fields } else { general = true }
            default:
                // Share keys, and whatever a newer server adds: the general decoder reads them.
                try reader.skipValue()
                general = true
            }
        }
        guard !general, let name, let type else { return (name, type, deleted, nil) }
        var record = Record(recordType: type, recordID: Record.ID(recordName: name, zoneID: zoneID))
        record.applySystemFields(changeTag: changeTag, created: created, modified: modified)
        record.values = values
        record.parent = parent.map { Reference(recordID: Record.ID(recordName: $0, zoneID: zoneID), action: .none) }
        record.parentChanged = false
        record.share = share.map { Reference(recordID: Record.ID(recordName: $0, zoneID: zoneID), action: .none) }
        return (name, type, deleted, record)
    }

    /// A `created` or `modified` stamp.
    private func readStamp(_ reader: inout JSONReader) throws -> RecordStamp {
        var timestamp: Int64?
        var user: String?
        var device: String?
        try reader.beginObject()
        while let key = try reader.nextKey() {
            switch key {
            case "timestamp":
                guard case .integer(let value) = try reader.readNumber() else {
                    throw JSONDecodingError(.wrongType, "a whole number", at: [.key("timestamp")])
                }
                timestamp = value
            case "userRecordName": user = try reader.readString()
            case "deviceID": device = try reader.readNull() ? nil : reader.readString()
            default: try reader.skipValue()
            }
        }
        guard let timestamp, let user else { throw JSONDecodingError(.missing, "", at: [.key("timestamp")]) }
        return RecordStamp(timestamp: timestamp, userRecordName: user, deviceID: device?.isEmpty == false ? device : nil)
    }

    /// The `recordName` of a `{recordName, …}` reference in the record's own zone.
    private func readRecordName(_ reader: inout JSONReader) throws -> String {
        var recordName: String?
        try reader.beginObject()
        while let key = try reader.nextKey() {
            if key == "recordName" { recordName = try reader.readString() } else { try reader.skipValue() }
        }
        guard let recordName else { throw JSONDecodingError(.missing, "", at: [.key("recordName")]) }
        return recordName
    }

    /// A record's fields, or `nil` when one holds an object (a reference, an asset, a location, or a
    /// list of them), which the general decoder reads: their zones and URLs need its rules.
    private func readFields(_ reader: inout JSONReader, zoneID: RecordZone.ID) throws -> [String: RecordFieldValue]? {
        var values: [String: RecordFieldValue] = [:]
        var complete = true
        try reader.beginObject()
        while let name = try reader.nextKey() {
            var value: JSONValue?
            var tag: String?
            try reader.beginObject()
            while let key = try reader.nextKey() {
                switch key {
                case "value":
                    if reader.peek() == UInt8(ascii: "{") || reader.peek() == UInt8(ascii: "[") {
                        // Lists and objects: scalars of a list are cheap, objects go to the general decoder.
                        let parsed = try reader.readValue()
                        if case .array(let elements) = parsed, elements.allSatisfy({ if case .object = $0 { false } else { true } }) {
                            value = parsed
                        } else {
                            complete = false
                        }
                    } else {
                        value = try reader.readValue()
                    }
                case "type": tag = try reader.readNull() ? nil : reader.readString()
                default: try reader.skipValue()
                }
            }
            guard complete, let value, value != .null else {
                complete = false
                continue
            }
            let wire = try withJSONPath(.key(name)) { try FieldValue(value: value, typeTag: tag) }
            values[name] = fieldValue(wire, holderZone: zoneID)
        }
        return complete ? values : nil
    }
}
