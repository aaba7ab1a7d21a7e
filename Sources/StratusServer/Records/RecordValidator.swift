import Foundation
import StratusModel
import StratusStorage

/// Checks the operations of a `records/modify` request before anything is written, and turns them
/// into storage writes. Any malformed operation rejects the whole request with `BAD_REQUEST`
/// naming the operation, the field and the rule, so nothing is half-written.
struct RecordValidator {
    let limits: Limits

    /// Record types and field names: a letter, then letters, digits and underscores (CloudKit's
    /// schema identifiers).
    func violation(ofIdentifier name: String) -> String? {
        guard let first = name.utf8.first else { return "must not be empty" }
        if name.utf8.count > limits.maxNameLength {
            return "is \(name.utf8.count) characters; the limit is \(limits.maxNameLength)"
        }
        let isLetter = { (byte: UInt8) in (65...90).contains(byte) || (97...122).contains(byte) }
        guard isLetter(first), name.utf8.allSatisfy({ isLetter($0) || (48...57).contains($0) || $0 == 95 }) else {
            return "must start with a letter and hold only ASCII letters, digits and underscores"
        }
        return nil
    }

    /// The writes `operations` ask for, checked. A field sent without a `type` takes the type
    /// `schema` has for it, when it has one (``FieldValue/conformed(to:)``).
    func writes(for operations: [RecordOperation], zoneName: String, schema: Schema? = nil) throws -> [RecordWrite] {
        var seen = Set<String>()
        return try operations.enumerated().map { index, operation in
            let record = operation.record
            let field = "operations[\(index)].record"
            let type = operation.operationType
            if let zoneID = record.zoneID, zoneID.zoneName != zoneName {
                throw StratusError.badRequest(
                    "\(field).zoneID '\(zoneID.zoneName)' differs from the request's zone '\(zoneName)'; "
                        + "send one request per zone")
            }
            let recordName: String
            if let name = record.recordName {
                recordName = name
            } else if type == .create {
                recordName = UUID().uuidString
            } else {
                throw StratusError.badRequest("\(field).recordName is required for \(type.rawValue)")
            }
            if let violation = limits.violation(ofName: recordName) {
                throw StratusError.badRequest("\(field).recordName \(violation)")
            }
            guard seen.insert(recordName).inserted else {
                throw StratusError.badRequest(
                    "\(field).recordName '\(recordName)' appears in more than one operation; "
                        + "send one operation per record per request")
            }
            if type == .create, record.recordType == nil {
                throw StratusError.badRequest("\(field).recordType is required for create")
            }
            let isShare = ShareKeys.isShareType(record.recordType)
            if let recordType = record.recordType, !isShare, let violation = violation(ofIdentifier: recordType) {
                throw StratusError.badRequest("\(field).recordType '\(recordType)' \(violation)")
            }
            if type.checksChangeTag, record.recordChangeTag == nil {
                throw StratusError.badRequest(
                    "\(field).recordChangeTag is required for \(type.rawValue); use force\(type.rawValue.prefix(1).uppercased() + type.rawValue.dropFirst()) to skip the check")
            }
            for name in record.fields.keys.sorted() + record.removedFieldNames.sorted() {
                // A share's own fields are CloudKit's (`cloudkit.title`, `cloudkit.type`, …).
                let identifier = isShare && name.hasPrefix("cloudkit.") ? String(name.dropFirst(9)) : name
                if let violation = violation(ofIdentifier: identifier) {
                    throw StratusError.badRequest("\(field).fields: field name '\(name)' \(violation)")
                }
            }
            for (name, value) in record.fields {
                for reference in value.references {
                    if let violation = limits.violation(ofName: reference.recordName) {
                        throw StratusError.badRequest("\(field).fields.\(name): the referenced recordName \(violation)")
                    }
                    if reference.action != .none, let target = reference.zoneID, target.zoneName != zoneName {
                        throw StratusError.badRequest(
                            "\(field).fields.\(name): a \(reference.action.rawValue) reference must point into the "
                                + "record's own zone '\(zoneName)', not '\(target.zoneName)'")
                    }
                }
            }
            if record.fields.count > limits.maxFieldsPerRecord {
                throw StratusError.badRequest(
                    "\(field).fields has \(record.fields.count) fields; the limit is \(limits.maxFieldsPerRecord)")
            }
            var fields = record.fields
            var removedFieldNames = record.removedFieldNames
            if let parent = record.parent {
                if let violation = limits.violation(ofName: parent.recordName) {
                    throw StratusError.badRequest("\(field).parent.recordName \(violation)")
                }
                if let parentZone = parent.zoneID, parentZone.zoneName != zoneName {
                    throw StratusError.badRequest(
                        "\(field).parent: a record's parent is in its own zone '\(zoneName)', not '\(parentZone.zoneName)'")
                }
                fields[RecordHierarchy.parentField] = .reference(Reference(recordName: parent.recordName))
            } else if record.removesParent {
                removedFieldNames.insert(RecordHierarchy.parentField)
            }
            if let recordType = record.recordType, let known = schema?.recordTypes[recordType]?.fields {
                for name in record.untypedFieldNames {
                    if let value = fields[name], let fieldType = known[name]?.type {
                        fields[name] = value.conformed(to: fieldType)
                    }
                }
            }
            return RecordWrite(
                operationType: type, recordName: recordName, recordType: record.recordType,
                recordChangeTag: record.recordChangeTag, fields: type.isDelete ? [:] : fields,
                removedFieldNames: removedFieldNames)
        }
    }
}
