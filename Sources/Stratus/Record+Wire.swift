import Foundation
import StratusModel

/// Conversions between the SDK's values and the wire types of StratusModel, within a database
/// (zone owners are written and read relative to the signed-in user).
extension Database {
    /// A record from the server, in zone `zoneID`.
    func record(_ wire: RecordDictionary, zoneID: RecordZone.ID) throws(CloudError) -> Record {
        guard let recordName = wire.recordName, let recordType = wire.recordType else {
            throw CloudError(.serverRejectedRequest, "the server sent a record without recordName or recordType")
        }
        var record = Record(recordType: recordType, recordID: Record.ID(recordName: recordName, zoneID: zoneID))
        record.applySystemFields(wire)
        record.values = wire.fields.mapValues { fieldValue($0, holderZone: zoneID) }
        record.parent = wire.parent.map { Reference(recordID: Record.ID(recordName: $0.recordName, zoneID: zoneID), action: .none) }
        record.parentChanged = false
        record.share = wire.shareReference.map {
            Reference(recordID: Record.ID(recordName: $0.recordName, zoneID: zoneID), action: .none)
        }
        // A zone-wide share's permission covers the zone; hierarchical shares are checked by the server.
        if databaseScope == .shared, wire.recordName == ShareKeys.zoneWideRecordName,
            let permission = wire.share?.currentUserParticipant?.permission
        {
            connection.noteSharePermission(permission, zone: zoneID)
        }
        return record
    }

    /// The SDK form of a wire field value; references without a zone point into `holderZone`.
    func fieldValue(_ wire: FieldValue, holderZone: RecordZone.ID) -> RecordFieldValue {
        func reference(_ wire: StratusModel.Reference) -> Reference {
            Reference(
                recordID: Record.ID(recordName: wire.recordName, zoneID: wire.zoneID.map(zoneID) ?? holderZone),
                action: Reference.Action(wire.action))
        }
        func asset(_ wire: AssetValue) -> Asset {
            Asset(fileURL: nil, fileChecksum: wire.fileChecksum, size: wire.size, downloadURL: wire.downloadURL)
        }
        switch wire {
        case .string(let value): return .string(value)
        case .int64(let value): return .int64(value)
        case .double(let value): return .double(value)
        case .timestamp(let milliseconds): return .date(Date(milliseconds: milliseconds))
        case .bytes(let value): return .bytes(value)
        case .reference(let value): return .reference(reference(value))
        case .asset(let value): return .asset(asset(value))
        case .location(let value): return .location(value)
        case .list(let elementType, let values):
            func each<T>(_ transform: (FieldValue) -> T?) -> [T] { values.compactMap(transform) }
            switch elementType {
            case .int64: return .int64List(each { if case .int64(let v) = $0 { v } else { nil } })
            case .double: return .doubleList(each { if case .double(let v) = $0 { v } else { nil } })
            case .timestamp: return .dateList(each { if case .timestamp(let v) = $0 { Date(milliseconds: v) } else { nil } })
            case .bytes: return .bytesList(each { if case .bytes(let v) = $0 { v } else { nil } })
            case .reference: return .referenceList(each { if case .reference(let v) = $0 { reference(v) } else { nil } })
            case .asset: return .assetList(each { if case .asset(let v) = $0 { asset(v) } else { nil } })
            case .location: return .locationList(each { if case .location(let v) = $0 { v } else { nil } })
            // STRING_LIST, and UNKNOWN_LIST (always empty), which every list type reads as empty.
            default: return .stringList(each { if case .string(let v) = $0 { v } else { nil } })
            }
        }
    }

    /// The wire form of a field value of a record in `holderZone`: references into that zone leave
    /// the zone out.
    func wireValue(_ value: RecordFieldValue, holderZone: RecordZone.ID) -> FieldValue {
        value.wireValue { reference in
            StratusModel.Reference(
                recordName: reference.recordID.recordName,
                zoneID: reference.recordID.zoneID == holderZone ? nil : wireZoneID(reference.recordID.zoneID),
                action: reference.action.wire)
        }
    }

    /// The wire form of `record` with the fields named in `keys`; keys the record no longer holds
    /// are sent as removals.
    func wireRecord(_ record: Record, keys: [String]) -> RecordDictionary {
        var wire = RecordDictionary(
            recordName: record.recordID.recordName, recordType: record.recordType,
            recordChangeTag: record.recordChangeTag,
            share: record.shareKeys.map {
                ShareKeys(forRecord: $0.forRecord, publicPermission: $0.publicPermission, participants: $0.participants)
            },
            parent: record.parent.map { StratusModel.Reference(recordName: $0.recordID.recordName) })
        wire.removesParent = record.parent == nil && record.parentChanged
        for key in keys {
            if let value = record.values[key] {
                wire.fields[key] = wireValue(value, holderZone: record.recordID.zoneID)
            } else {
                wire.removedFieldNames.insert(key)
            }
        }
        return wire
    }
}

extension Record {
    /// Takes the change tag and stamps of a record the server sent.
    mutating func applySystemFields(_ wire: RecordDictionary) {
        if let share = wire.share { shareKeys = share }
        applySystemFields(changeTag: wire.recordChangeTag, created: wire.created, modified: wire.modified)
    }

    /// Takes a change tag and stamps the server sent.
    mutating func applySystemFields(changeTag: String?, created: RecordStamp?, modified: RecordStamp?) {
        recordChangeTag = changeTag
        if let created {
            creationDate = Date(milliseconds: created.timestamp)
            creatorUserRecordID = Record.ID(recordName: created.userRecordName)
        }
        if let modified {
            modificationDate = Date(milliseconds: modified.timestamp)
            lastModifiedUserRecordID = Record.ID(recordName: modified.userRecordName)
            lastModifiedDeviceID = modified.deviceID
        }
    }
}

extension RecordFieldValue {
    /// The wire form of the value, with `reference` writing each reference. Assets carry their
    /// checksum and size and, once uploaded, the receipt that lets a record hold them.
    func wireValue(reference: (Reference) -> StratusModel.Reference) -> FieldValue {
        func asset(_ value: Asset) -> FieldValue {
            .asset(AssetValue(fileChecksum: value.fileChecksum, size: value.size, receipt: value.receipt))
        }
        switch self {
        case .string(let value): return .string(value)
        case .int64(let value): return .int64(value)
        case .double(let value): return .double(value)
        case .date(let value): return .timestamp(value.milliseconds)
        case .bytes(let value): return .bytes(value)
        case .reference(let value): return .reference(reference(value))
        case .asset(let value): return asset(value)
        case .location(let value): return .location(value)
        case .stringList(let values): return .list(elementType: .string, values.map(FieldValue.string))
        case .int64List(let values): return .list(elementType: .int64, values.map(FieldValue.int64))
        case .doubleList(let values): return .list(elementType: .double, values.map(FieldValue.double))
        case .dateList(let values): return .list(elementType: .timestamp, values.map { .timestamp($0.milliseconds) })
        case .bytesList(let values): return .list(elementType: .bytes, values.map(FieldValue.bytes))
        case .referenceList(let values): return .list(elementType: .reference, values.map { .reference(reference($0)) })
        case .assetList(let values): return .list(elementType: .asset, values.map(asset))
        case .locationList(let values): return .list(elementType: .location, values.map(FieldValue.location))
        }
    }

    /// Whether this is a list without elements, which reads as an empty list of any type.
    var isEmptyList: Bool {
        switch self {
        case .stringList(let values): values.isEmpty
        case .int64List(let values): values.isEmpty
        case .doubleList(let values): values.isEmpty
        case .dateList(let values): values.isEmpty
        case .bytesList(let values): values.isEmpty
        case .referenceList(let values): values.isEmpty
        case .assetList(let values): values.isEmpty
        case .locationList(let values): values.isEmpty
        default: false
        }
    }
}

extension Reference.Action {
    /// The action of a wire reference.
    init(_ wire: ReferenceAction) {
        switch wire {
        case .none: self = .none
        case .deleteSelf: self = .deleteSelf
        case .validate: self = .validate
        }
    }

    /// The wire form of the action.
    var wire: ReferenceAction {
        switch self {
        case .none: .none
        case .deleteSelf: .deleteSelf
        case .validate: .validate
        }
    }
}

extension Date {
    /// The date `milliseconds` after 1970-01-01T00:00:00Z.
    init(milliseconds: Int64) { self.init(timeIntervalSince1970: Double(milliseconds) / 1000) }

    /// Milliseconds since 1970-01-01T00:00:00Z, rounded.
    var milliseconds: Int64 { Int64((timeIntervalSince1970 * 1000).rounded()) }
}
