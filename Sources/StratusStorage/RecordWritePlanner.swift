import Foundation
public import StratusModel

/// The semantics of the seven `records/modify` operation types, shared by every storage backend.
///
/// A backend reads the current row inside its write transaction, asks the planner what to do, and
/// writes the planned record after giving it its sequence number and change tag. Keeping the rules
/// here means SQLite and PostgreSQL cannot disagree about them.
public enum RecordWritePlanner {
    /// Plans one write against the record as it is now (`current`, which may be a tombstone), and
    /// checks it against the schema, which development writes extend.
    /// The returned record has `sequence` 0 and an empty `changeTag`: the backend assigns both.
    public static func plan(
        _ write: RecordWrite, current: StoredRecord?, context: WriteContext, schema: inout SchemaInForce
    ) -> RecordWriteResult {
        let live = current.flatMap { $0.deleted ? nil : $0 }
        var write = write
        write.fields = sizingKeptAssets(write.fields, live: live)
        let name = write.recordName
        let operation = write.operationType

        guard let live else {
            switch operation {
            case .create, .forceUpdate, .forceReplace:
                if context.enforcesGrants, let recordType = write.recordType,
                    let denial = grantDenial(.create, recordType: recordType, creator: nil, schema: schema, context: context)
                {
                    return .failure(RecordWriteFailure(.accessDenied, denial))
                }
                return build(write, fields: write.fields, created: context.stamp, context: context, schema: &schema)
            case .update, .replace, .delete, .forceDelete:
                return .failure(RecordWriteFailure(.notFound, "record '\(name)' does not exist"))
            }
        }
        if operation == .create {
            return .failure(RecordWriteFailure(.exists, "record '\(name)' already exists", serverRecord: live))
        }
        if context.enforcesGrants,
            let denial = grantDenial(
                .write, recordType: live.recordType, creator: live.created.userRecordName, schema: schema,
                context: context)
        {
            return .failure(RecordWriteFailure(.accessDenied, "record '\(name)': \(denial)"))
        }
        if operation.checksChangeTag, write.recordChangeTag != live.changeTag {
            return .failure(
                RecordWriteFailure(
                    .conflict,
                    "record '\(name)' has changed: recordChangeTag '\(write.recordChangeTag ?? "")' is not the "
                        + "current '\(live.changeTag)'; merge into serverRecord and retry",
                    serverRecord: live))
        }
        if let recordType = write.recordType, recordType != live.recordType {
            return .failure(
                RecordWriteFailure(
                    .badRequest,
                    "record '\(name)' has recordType '\(live.recordType)'; a write cannot change it to '\(recordType)'"
                ))
        }
        switch operation {
        case .delete, .forceDelete:
            return .success(tombstone(of: live, context: context))
        case .update, .forceUpdate:
            let existing: [String: FieldValue]
            do {
                existing = try live.decodeFields()
            } catch {
                return .failure(RecordWriteFailure(.internalError, "stored fields of '\(name)' are unreadable"))
            }
            var merged = existing.filter { !write.removedFieldNames.contains($0.key) }
            merged.merge(write.fields) { _, new in new }
            var planned = write
            planned.recordType = live.recordType
            return build(
                planned, fields: keepingShareStatuses(merged, of: live, context: context), created: live.created,
                context: context, schema: &schema)
        case .replace, .forceReplace:
            var planned = write
            planned.recordType = live.recordType
            // Reserved fields are not the client's to clear: a replace keeps them unless it sets or removes them.
            var fields = (try? live.decodeFields())?.filter {
                RecordHierarchy.isReserved($0.key) && !write.removedFieldNames.contains($0.key)
            } ?? [:]
            fields.merge(write.fields) { _, new in new }
            return build(
                planned, fields: keepingShareStatuses(fields, of: live, context: context), created: live.created,
                context: context, schema: &schema)
        case .create:
            preconditionFailure("handled above")
        }
    }

    /// `fields` with each asset saved without a receipt (a kept asset comes without a size, since a
    /// client's claim is not taken) given the size that `live` stores for its checksum, or that
    /// another value of the write has from its receipt. An asset found in neither stays without a
    /// size; unless the record held it, the save then fails as unknown
    /// (``unknownAsset(record:checksum:uploaded:)``).
    private static func sizingKeptAssets(_ fields: [String: FieldValue], live: StoredRecord?) -> [String: FieldValue] {
        let assets = fields.values.lazy.filter { $0.type == .asset || $0.type == .assetList }.flatMap(\.elements)
        guard assets.contains(where: { if case .asset(let asset) = $0 { asset.size == nil } else { false } }) else {
            return fields
        }
        var sizes: [String: Int64] = [:]
        for case .asset(let asset) in (live.flatMap { try? $0.decodeFields() } ?? [:]).values.flatMap(\.elements)
            + Array(assets)
        {
            if let checksum = asset.fileChecksum, let size = asset.size { sizes[checksum] = size }
        }
        return fields.mapValues { value in
            value.mappingAssets { asset in
                var asset = asset
                if asset.size == nil, let checksum = asset.fileChecksum { asset.size = sizes[checksum] }
                return asset
            }
        }
    }

    /// The fields of a share record written over `live`, with the participants' acceptance kept as
    /// stored (``ShareState/keepingStatuses(of:writer:)``); any other record's fields as they are.
    private static func keepingShareStatuses(
        _ fields: [String: FieldValue], of live: StoredRecord, context: WriteContext
    ) -> [String: FieldValue] {
        guard let stored = live.shareState, let value = fields[ShareState.fieldName],
            let written = try? ShareState(fieldValue: value)
        else { return fields }
        var fields = fields
        fields[ShareState.fieldName] = written.keepingStatuses(of: stored, writer: context.userRecordName).fieldValue
        return fields
    }

    /// The tombstone that replaces `record` when it is deleted; the backend assigns its sequence
    /// number and change tag.
    public static func tombstone(of record: StoredRecord, context: WriteContext) -> StoredRecord {
        var tombstone = record.replacingFields(RecordHierarchy.tombstoneFields(of: record))
        tombstone.deleted = true
        tombstone.modified = context.stamp
        tombstone.changeTag = ""
        tombstone.sequence = 0
        return tombstone
    }

    /// The links of a stored record that storage keeps: its references that storage enforces,
    /// `DELETE_SELF` (deleting the target deletes the record) and `VALIDATE` (the target must exist
    /// while the record points at it), and its parent, as a link with action `NONE` (references
    /// with action `NONE` are not kept otherwise), so that the records under a record are found.
    public static func links(of record: StoredRecord) -> [ReferenceLink] {
        guard let fields = fields(of: record, holding: #""type":"REFERENCE"#) else { return [] }
        var links = Set<ReferenceLink>()
        for (name, value) in fields {
            let isParent = name == RecordHierarchy.parentField
            for reference in value.references where isParent ? reference.action == .none : reference.action != .none {
                links.insert(ReferenceLink(target: reference.recordName, action: reference.action))
            }
        }
        return links.sorted { ($0.target, $0.action.rawValue) < ($1.target, $1.action.rawValue) }
    }

    /// The links of `record` that bind, given the live records its references may bind (`targets`:
    /// for a participant of hierarchical shares, those of their shares): a `VALIDATE` or
    /// `DELETE_SELF` link counts only when its target is one of them and, in the public database,
    /// of the same creator (or the record itself); others stay plain references. Parent links are kept.
    public static func boundLinks(
        _ links: [ReferenceLink], of record: StoredRecord, targets: [String: StoredRecord], context: WriteContext
    ) -> [ReferenceLink] {
        links.filter { link in
            guard link.action != .none, link.target != record.name else { return true }
            guard let target = targets[link.target], !target.deleted else { return false }
            return !context.enforcesGrants || target.created.userRecordName == record.created.userRecordName
        }
    }

    /// The fields of a live record that may hold a value with the type tag `tag`; `nil` when its JSON
    /// has no such tag, so that the many records without one are not decoded.
    private static func fields(of record: StoredRecord, holding tag: String) -> [String: FieldValue]? {
        guard !record.deleted else { return nil }
        if let fields = record.decodedFields { return fields }
        guard record.fieldsJSON.contains(tag: tag) else { return nil }
        return try? record.decodeFields()
    }

    /// The checksums of the assets a stored record holds.
    public static func assetChecksums(of record: StoredRecord) -> Set<String> {
        guard let fields = fields(of: record, holding: #""type":"ASSETID"#) else { return [] }
        var checksums = Set<String>()
        for value in fields.values {
            for case .asset(let asset) in value.elements {
                if let checksum = asset.fileChecksum { checksums.insert(checksum) }
            }
        }
        return checksums
    }

    /// The bytes of the distinct assets `record` holds, each by the size its field stores: what the
    /// record counts for against a quota of assets held (``StorageUsage``).
    public static func assetBytes(of record: StoredRecord) -> Int64 {
        guard let fields = fields(of: record, holding: #""type":"ASSETID"#) else { return 0 }
        var sizes: [String: Int64] = [:]
        for value in fields.values {
            for case .asset(let asset) in value.elements {
                if let checksum = asset.fileChecksum { sizes[checksum] = max(sizes[checksum] ?? 0, asset.size ?? 0) }
            }
        }
        return sizes.values.reduce(0, +)
    }

    // MARK: Participants of hierarchical shares

    /// Why a participant of hierarchical shares (``WriteContext/participantShares``) may not write
    /// over `current`: a record outside their shares does not exist for them (`NOT_FOUND`, or
    /// `ACCESS_DENIED` for a create, which cannot say so without revealing it), one in a share they
    /// read only is `ACCESS_DENIED`, and so are a share's root and the share itself, which only the
    /// owner changes. `nil` for the owner, and when the write may go on.
    public static func participantDenial(
        _ write: RecordWrite, current: StoredRecord?, context: WriteContext
    ) -> RecordWriteFailure? {
        guard let shares = context.participantShares, let live = current, !live.deleted else { return nil }
        let name = write.recordName
        guard let share = live.shareName, let permission = shares[share] else {
            return write.operationType == .create
                ? RecordWriteFailure(.accessDenied, "record '\(name)' cannot be created here: it is not in a share of yours")
                : RecordWriteFailure(.notFound, "record '\(name)' does not exist")
        }
        guard permission == .readWrite else {
            return RecordWriteFailure(.accessDenied, "record '\(name)' is shared with you read-only")
        }
        if live.rootShareName != nil || live.shareState != nil {
            return RecordWriteFailure(
                .accessDenied, "record '\(name)' is the root of its share or the share itself; only the owner changes it")
        }
        return nil
    }

    /// Why a participant's operation may not change the records `names` besides its own (deleted with
    /// it through `DELETE_SELF`, or moved in or out of a share by it): each must have been, `before`
    /// the operation, an ordinary record of a share they write. `nil` for the owner.
    static func participantDenial(
        touching names: [String], before: [String: StoredRecord], context: WriteContext
    ) -> RecordWriteFailure? {
        guard let shares = context.participantShares else { return nil }
        for name in names {
            guard let record = before[name], !record.deleted, let share = record.shareName, shares[share] == .readWrite,
                record.rootShareName == nil, record.shareState == nil
            else {
                return RecordWriteFailure(
                    .accessDenied, "the write would change records outside the shares you write; only the owner may")
            }
        }
        return nil
    }

    /// Why a participant may not save `record` where its parent places it: their records stay in
    /// the shares they write. `nil` for the owner, a deletion, or a record placed in such a share.
    static func participantDenial(placing record: StoredRecord, context: WriteContext) -> RecordWriteFailure? {
        guard let shares = context.participantShares, !record.deleted else { return nil }
        guard let share = record.shareName, shares[share] == .readWrite else {
            return RecordWriteFailure(
                .accessDenied,
                "record '\(record.name)' would not be in a share you write: give it a parent that is in the share")
        }
        return nil
    }

    // MARK: Reference and asset rules, as every backend words them

    /// A saved asset the zone cannot vouch for: gone since its upload, or not in the record before.
    public static func unknownAsset(record: String, checksum: String, uploaded: Bool) -> RecordWriteFailure {
        RecordWriteFailure(
            .badRequest,
            uploaded
                ? "record '\(record)': asset \(checksum) is no longer stored; upload it again"
                : "record '\(record)': asset \(checksum) is not in this record; save a new asset with "
                    + "the receipt from its upload (assets/upload or assets/rereference)")
    }

    /// A deletion (`cascaded` when through `DELETE_SELF`) refused because `guardian` holds a `VALIDATE`
    /// reference to the record.
    /// The guardian is left unnamed (`nil`) for a caller who may not know of it.
    public static func guardedDeletion(record: String, cascaded: Bool, guardian: String?) -> RecordWriteFailure {
        RecordWriteFailure(
            .validatingReferenceError,
            "record '\(record)'\(cascaded ? " (deleted with it through DELETE_SELF)" : "") is referenced by "
                + (guardian.map { "'\($0)' with action VALIDATE; delete or change '\($0)' first" }
                    ?? "another record with action VALIDATE"))
    }

    /// A save whose `VALIDATE` reference points at a record that does not exist.
    public static func missingTarget(record: String, target: String) -> RecordWriteFailure {
        RecordWriteFailure(
            .validatingReferenceError,
            "record '\(record)' references '\(target)' with action VALIDATE, but '\(target)' does not exist in this zone")
    }

    /// A save that would give `target` more `DELETE_SELF` references than `limit`.
    public static func tooManyDeleteSelfReferences(
        record: String, target: String, count: Int, limit: Int
    ) -> RecordWriteFailure {
        RecordWriteFailure(
            .badRequest,
            "record '\(target)' already has \(count) DELETE_SELF references; the limit is \(limit), so '\(record)' "
                + "cannot add one")
    }

    /// Turns the outcomes of an atomic batch with a failure into CloudKit's answer: failed items keep
    /// their error, every other item fails with `ATOMIC_ERROR`.
    public static func failAtomically(_ results: [RecordWriteResult], names: [String]) -> [RecordWriteResult] {
        guard let firstFailure = results.firstIndex(where: { if case .failure = $0 { true } else { false } })
        else { return results }
        return results.map { result in
            guard case .success = result else { return result }
            return .failure(
                RecordWriteFailure(
                    .atomicError,
                    "not saved: the atomic batch failed at record '\(names[firstFailure])'"))
        }
    }

    /// Why the schema's grants refuse `permission` on a record of `recordType` (created by
    /// `creator`) to the writing user; `nil` when they allow it. `_icloud` and `_world` cover every
    /// signed-in user, `_creator` the record's creator; custom roles have no members in Stratus.
    public static func grantDenial(
        _ permission: SchemaPermission, recordType: String, creator: String?, schema: SchemaInForce,
        context: WriteContext
    ) -> String? {
        let grants = schema.schema.recordTypes[recordType]?.grants ?? (schema.evolves ? RecordTypeSchema.defaultGrants : [])
        let roles = grants.filter { $0.permission == permission }.map(\.role)
        if roles.contains("_world") || roles.contains("_icloud") { return nil }
        if roles.contains("_creator"), let creator, creator == context.userRecordName { return nil }
        let verb = permission == .create ? "create" : "change or delete"
        let allowed = roles.contains("_creator") ? " only its creator may \(verb) it" : " nobody may \(verb) it"
        return "the schema grants \(permission.rawValue) on record type '\(recordType)' to "
            + (roles.isEmpty ? "no role;" : roles.sorted().joined(separator: ", ") + ";") + allowed
    }

    private static func build(
        _ write: RecordWrite, fields: [String: FieldValue], created: RecordStamp, context: WriteContext,
        schema: inout SchemaInForce
    ) -> RecordWriteResult {
        guard let recordType = write.recordType else {
            return .failure(
                RecordWriteFailure(
                    .badRequest, "record '\(write.recordName)' does not exist, so recordType is required to create it"))
        }
        if let violation = schema.admit(recordType: recordType, fields: fields) {
            return .failure(RecordWriteFailure(.badRequest, "record '\(write.recordName)': \(violation)"))
        }
        let limits = context.limits
        let fieldCount = fields.keys.count { !RecordHierarchy.isReserved($0) }
        if fieldCount > limits.maxFieldsPerRecord {
            return .failure(
                RecordWriteFailure(
                    .badRequest,
                    "record '\(write.recordName)' has \(fieldCount) fields; the limit is \(limits.maxFieldsPerRecord)"
                ))
        }
        var writer = JSONWriter(capacity: 128)
        RecordDictionary.writeFields(fields, to: &writer)
        if writer.bytes.count > limits.maxRecordSizeBytes {
            return .failure(
                RecordWriteFailure(
                    .badRequest,
                    "record '\(write.recordName)' is \(writer.bytes.count) bytes without assets; the limit is "
                        + "\(limits.maxRecordSizeBytes) bytes"))
        }
        var record = StoredRecord(
            name: write.recordName, recordType: recordType, changeTag: "", fieldsJSON: writer.bytes,
            created: created, modified: context.stamp, deleted: false, sequence: 0)
        record.decodedFields = fields
        return .success(record)
    }
}

/// A reference that storage enforces, from the record that holds it to `target` in the same zone.
public struct ReferenceLink: Hashable, Sendable {
    /// The referenced record's name.
    public var target: String
    /// `DELETE_SELF` or `VALIDATE`.
    public var action: ReferenceAction

    /// Creates a link.
    public init(target: String, action: ReferenceAction) {
        self.target = target
        self.action = action
    }
}

extension [UInt8] {
    /// Whether canonical field JSON holds a type tag that starts with `tag` (`"type":"REFERENCE`
    /// also finds `REFERENCE_LIST`): records without one need not be decoded.
    func contains(tag: String) -> Bool {
        // This runs for every record of every feed page: libc's `memchr` jumps to each occurrence of
        // the tag's last byte, which is rarely a match, rather than its first, a quote, which often is.
        var tag = tag
        return tag.withUTF8 { needle in
            guard let last = needle.last else { return true }
            return withUnsafeBytes { bytes in
                guard let base = bytes.baseAddress else { return false }
                var end = needle.count - 1
                while end < bytes.count, let found = memchr(base + end, Int32(last), bytes.count - end) {
                    end = base.distance(to: UnsafeRawPointer(found))
                    if memcmp(base + end - (needle.count - 1), needle.baseAddress!, needle.count - 1) == 0 { return true }
                    end += 1
                }
                return false
            }
        }
    }
}
