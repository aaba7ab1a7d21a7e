import StratusModel
import StratusStorage

/// What writing a share means: the one place that turns a share record sent by its owner into the
/// state it stores (``ShareState``), and that changes a participant's place in a share (accepting,
/// leaving).
///
/// A share record is saved through `records/modify` like any record and stored with its state
/// inside, so it versions, conflicts and syncs like one; ``prepare(_:operations:zone:user:)`` only
/// decides that state and refuses what CloudKit refuses. The rules (docs/protocol.md, "Sharing"):
/// - only the owner writes a share, in a custom zone of their private database; a zone-wide share
///   is named `cloudkit.zoneshare`, a hierarchical one names its root in `forRecord`;
/// - the owner is always the first participant (`OWNER`, `READ_WRITE`, `ACCEPTED`);
/// - invited participants are found by `userRecordName`, or by an e-mail address of a user who
///   made themselves discoverable; there are at most ``maxParticipants`` besides the owner;
/// - a public share (`publicPermission` other than `NONE`) takes no invited participants, and
///   making a share private removes its public participants;
/// - participants the owner leaves out of a new list are `REMOVED`.
struct ShareRules: Sendable {
    /// The most participants a share has besides its owner.
    static let maxParticipants = 100

    /// Where share records are written (and their changes published).
    let writer: ChangeWriter
    /// Where accounts and share memberships are read.
    var storage: any RecordStorage & AccountStorage & ShareStorage { writer.storage }

    /// Whether an operation writes a share record: one of the share type, or named like a
    /// zone-wide share.
    static func isShareOperation(_ operation: RecordOperation) -> Bool {
        ShareKeys.isShareType(operation.record.recordType) || operation.record.recordName == ShareKeys.zoneWideRecordName
            || operation.record.share != nil
    }

    /// The share a request of the shared database may be leaving: the record its single delete
    /// names. It is a participant leaving when that record is a share they take part in.
    static func leavingCandidate(_ operations: [RecordOperation]) -> String? {
        guard operations.count == 1, operations[0].operationType.isDelete else { return nil }
        return operations[0].record.recordName
    }

    /// Gives the share operations of a batch (validated into `writes`) the state they store, or
    /// refuses them. `zone` is the zone written; a participant (``ZoneAccess/memberships``) never
    /// writes a share.
    ///
    /// A share with `forRecord` is hierarchical, rooted at that record (any record name but
    /// `cloudkit.zoneshare`; the write executor attaches it to its root, ``HierarchyShaper``); one
    /// without is zone-wide, named `cloudkit.zoneshare`. A zone holds either one zone-wide share or
    /// hierarchical ones (`ALREADY_SHARED`), and a share's root never changes.
    func prepare(
        _ writes: inout [RecordWrite], operations: [RecordOperation], zone: ZoneAccess, user: String
    ) async throws {
        for (index, operation) in operations.enumerated() where Self.isShareOperation(operation) {
            let field = "operations[\(index)].record"
            guard zone.memberships.isEmpty, zone.locator.scope == .private else {
                throw StratusError(
                    .accessDenied,
                    zone.memberships.isEmpty
                        ? "shares are saved in the private database of their owner"
                        : "only the owner of a share changes it; a participant leaves by deleting it, alone in a request")
            }
            guard zone.name != ZoneID.defaultZoneName else {
                throw StratusError.badRequest("\(field): shares live in custom zones; the default zone cannot be shared")
            }
            if let type = operation.record.recordType, !ShareKeys.isShareType(type) {
                throw StratusError.badRequest(
                    "\(field).recordType: a share record is of type '\(ShareKeys.recordType)', not '\(type)'")
            }
            guard !operation.operationType.isDelete else { continue }
            let name = writes[index].recordName
            let current = try await storage.lookupRecords(names: [name], zone: zone.name, in: zone.locator)[0]
                .flatMap { $0.deleted ? nil : $0 }
            if let current, current.shareState == nil {
                throw StratusError.badRequest("\(field).recordName: record '\(name)' exists and is not a share")
            }
            let root = try await root(
                of: operation.record.share?.forRecord, name: name, current: current?.shareState, field: field, zone: zone,
                owner: user)
            var state = try await state(
                of: operation.record.share ?? ShareKeys(), replacing: current?.shareState, owner: user, field: field,
                container: zone.locator.container)
            state.rootRecordName = root
            writes[index].recordType = ShareKeys.recordType
            writes[index].fields[ShareState.fieldName] = state.fieldValue
        }
    }

    /// The root record of a share being saved: `forRecord` for a hierarchical share, `nil` for a
    /// zone-wide one. Refuses a name that does not fit the kind of share, a root that changes, and
    /// a kind of share the zone's other shares exclude.
    private func root(
        of forRecord: Reference?, name: String, current: ShareState?, field: String, zone: ZoneAccess, owner: String
    ) async throws -> String? {
        let root = forRecord?.recordName ?? current?.rootRecordName
        if root == name {
            throw StratusError.badRequest("\(field).forRecord: a share is rooted at another record than itself")
        }
        if let current, current.rootRecordName != root {
            throw StratusError.badRequest("\(field).forRecord: a share's root record does not change")
        }
        guard current == nil else { return root }
        let others = try await storage.shareMemberships(zone: zone.name, in: zone.locator, user: owner)
            .map(\.shareRecordName).filter { $0 != name }
        if root == nil {
            guard name == ShareKeys.zoneWideRecordName else {
                throw StratusError.badRequest(
                    "\(field).forRecord: a share needs forRecord (its root record), unless it is the zone-wide share "
                        + "'\(ShareKeys.zoneWideRecordName)'")
            }
            if !others.isEmpty {
                throw StratusError(
                    .alreadyShared,
                    "zone '\(zone.name)' has shares rooted at records (\(others.joined(separator: ", "))); it cannot "
                        + "also be shared whole")
            }
        } else {
            guard name != ShareKeys.zoneWideRecordName else {
                throw StratusError.badRequest(
                    "\(field).forRecord: '\(ShareKeys.zoneWideRecordName)' is the zone-wide share, which has no root record")
            }
            if others.contains(ShareKeys.zoneWideRecordName) {
                throw StratusError(
                    .alreadyShared,
                    "zone '\(zone.name)' is shared whole ('\(ShareKeys.zoneWideRecordName)'); its records cannot be shared "
                        + "one by one too")
            }
        }
        return root
    }

    /// The state a share takes when its owner saves `keys` over `current`.
    private func state(
        of keys: ShareKeys, replacing current: ShareState?, owner: String, field: String, container: String
    ) async throws -> ShareState {
        let publicPermission = keys.publicPermission ?? current?.publicPermission ?? .none
        var participants = current?.participants ?? []
        if participants.first?.type != .owner {
            participants.insert(
                ShareState.Participant(
                    participantID: Self.makeParticipantID(), userRecordName: owner, type: .owner, permission: .readWrite,
                    status: .accepted), at: 0)
        }
        if let requested = keys.participants {
            // Each participant is looked up: a list longer than a share can hold is refused first.
            let listed = requested.count { $0.type != .owner }
            guard listed <= Self.maxParticipants else {
                throw StratusError.badRequest(
                    "\(field).participants: a share has at most \(Self.maxParticipants) participants besides its owner, "
                        + "not \(listed)")
            }
            var kept: Set<String> = [owner]
            for (index, item) in requested.enumerated() where item.type != .owner {
                let itemField = "\(field).participants[\(index)]"
                let user = try await invitee(item, field: itemField, container: container)
                guard user != owner else { continue }
                kept.insert(user)
                let permission = item.permission ?? .readOnly
                guard permission != .none else {
                    throw StratusError.badRequest("\(itemField).permission: a participant reads at least (READ_ONLY)")
                }
                if let at = participants.firstIndex(where: { $0.userRecordName == user }) {
                    participants[at].permission = permission
                    if participants[at].status == .removed { participants[at].status = .invited }
                } else {
                    guard publicPermission == .none else {
                        throw StratusError.badRequest(
                            "\(itemField): a public share (publicPermission \(publicPermission.rawValue)) takes no "
                                + "invited participants; anyone with its link joins")
                    }
                    participants.append(
                        ShareState.Participant(
                            participantID: Self.makeParticipantID(), userRecordName: user,
                            emailAddress: item.userIdentity?.lookupInfo?.emailAddress, type: .user,
                            permission: permission, status: .invited))
                }
            }
            for at in participants.indices where !kept.contains(participants[at].userRecordName)
                && participants[at].type == .user
            {
                participants[at].status = .removed
            }
        }
        if publicPermission == .none {
            for at in participants.indices where participants[at].type == .publicUser {
                participants[at].status = .removed
            }
        } else {
            if participants.contains(where: { $0.type == .user && $0.status != .removed }) {
                throw StratusError.badRequest(
                    "\(field).publicPermission: a share with invited participants stays private; remove them first")
            }
            for at in participants.indices where participants[at].type == .publicUser {
                participants[at].permission = publicPermission
            }
        }
        let active = participants.count { $0.type != .owner && $0.status != .removed }
        guard active <= Self.maxParticipants else {
            throw StratusError.badRequest(
                "\(field).participants: a share has at most \(Self.maxParticipants) participants besides its owner, not \(active)")
        }
        return ShareState(
            shortGUID: current?.shortGUID ?? Self.makeShortGUID(), publicPermission: publicPermission,
            participants: participants)
    }

    /// The user a participant of a request names: by record name, or by the e-mail address of a
    /// discoverable user (anyone else is answered like nobody, as `users/lookup/email` does).
    private func invitee(_ item: ShareParticipantDictionary, field: String, container: String) async throws -> String {
        let identity = item.userIdentity
        if let recordName = identity?.userRecordName ?? identity?.lookupInfo?.userRecordName {
            guard try await storage.user(container: container, recordName: recordName) != nil else {
                throw StratusError.badRequest("\(field).userIdentity: there is no user '\(recordName)'")
            }
            return recordName
        }
        if let address = identity?.lookupInfo?.emailAddress {
            guard let user = try await storage.user(container: container, emailAddress: address), user.discoverable else {
                throw StratusError.badRequest(
                    "\(field).userIdentity: nobody discoverable has the e-mail address '\(address)'")
            }
            return user.recordName
        }
        throw StratusError.badRequest(
            "\(field).userIdentity: name the participant by userRecordName or lookupInfo (userRecordName or emailAddress)")
    }

    /// Changes `user`'s place in a share through the write path, as `user`: `change` gets the share's
    /// state and returns it changed, or `nil` to leave it as it is. A write that raced another
    /// change of the share is tried again with the new state. Returns the share as stored; the
    /// write's changes are published by the ``ChangeWriter``.
    func changeParticipant(
        of share: LocatedShare, user: String, deviceID: String?, timestamp: Int64, limits: Limits,
        _ change: (ShareState) throws -> ShareState?
    ) async throws -> StoredRecord {
        var record = share.record
        for _ in 0..<5 {
            guard let state = record.shareState else { break }
            guard let changed = try change(state) else { return record }
            let write = RecordWrite(
                operationType: .update, recordName: record.name, recordChangeTag: record.changeTag,
                fields: [ShareState.fieldName: changed.fieldValue])
            let outcome = try await writer.modifyRecords(
                [write], zone: share.zone, in: share.database, atomic: false,
                context: WriteContext(userRecordName: user, deviceID: deviceID, timestamp: timestamp, limits: limits))
            switch outcome.results[0] {
            case .success(let written):
                return written
            case .failure(let failure) where failure.code == .conflict:
                guard let latest = failure.serverRecord, !latest.deleted else {
                    throw StratusError(.notFound, "the share no longer exists")
                }
                record = latest
            case .failure(let failure):
                throw StratusError(failure.code, failure.reason)
            }
        }
        throw StratusError(.notFound, "the share no longer exists")
    }

    /// A new short GUID: 24 random characters from `[0-9a-z]` (about 124 bits).
    static func makeShortGUID() -> String {
        randomString(length: 24)
    }

    /// A new participant ID.
    static func makeParticipantID() -> String {
        randomString(length: 16)
    }

    private static func randomString(length: Int) -> String {
        let alphabet = Array("0123456789abcdefghijklmnopqrstuvwxyz")
        var generator = SystemRandomNumberGenerator()
        return String((0..<length).map { _ in alphabet.randomElement(using: &generator)! })
    }
}
