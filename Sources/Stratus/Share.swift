public import Foundation
import StratusModel

/// A share of a zone with other users (CloudKit's `CKShare`, zone-wide).
///
/// The owner creates one for a custom zone of their private database, invites participants (or
/// makes it public), and saves it; participants accept it from its URL and then find the zone in
/// their shared database:
///
/// ```swift
/// var share = Share(recordZoneID: album)
/// share.title = "Holiday"
/// share.addParticipant(Share.Participant(userIdentity: bob, permission: .readWrite))
/// share = try await container.privateCloudDatabase.save(share)
/// // … bob, given share.url:
/// let metadata = try await bobsContainer.shareMetadata(for: share.url!)
/// try await bobsContainer.accept(metadata)
/// let photos = try await bobsContainer.sharedCloudDatabase.records(matching: Query(recordType: "Photo"), inZoneWith: metadata.share.recordID.zoneID)
/// ```
///
/// A share is a record (``record``) of type `cloudkit.share` named `cloudkit.zoneshare`: it is
/// fetched, saved, deleted and synced like one. Deleting it stops sharing; a participant deleting it
/// from their shared database leaves.
public struct Share: Hashable, Sendable {
    /// A participant's role (CloudKit's `CKShare.ParticipantRole`).
    public enum ParticipantRole: String, Hashable, Sendable {
        /// The user who shares.
        case owner
        /// A user the owner invited.
        case privateUser
        /// A user who joined a public share through its link.
        case publicUser
    }

    /// What a participant may do (CloudKit's `CKShare.ParticipantPermission`).
    public enum ParticipantPermission: String, Hashable, Sendable {
        /// Nothing: for ``Share/publicPermission``, a share only invited users reach.
        case none
        /// Read the zone's records.
        case readOnly
        /// Read, create, change and delete the zone's records (not the share).
        case readWrite
    }

    /// Where a participant stands (CloudKit's `CKShare.ParticipantAcceptanceStatus`).
    public enum ParticipantAcceptanceStatus: String, Hashable, Sendable {
        /// Invited, not yet accepted.
        case pending
        /// Accepted: the zone is in their shared database.
        case accepted
        /// Removed by the owner, or left.
        case removed
    }

    /// A participant of a share (CloudKit's `CKShare.Participant`).
    public struct Participant: Hashable, Sendable {
        /// The participant's ID in the share; `nil` until the share is saved with them.
        public internal(set) var participantID: String?
        /// Who the participant is.
        public internal(set) var userIdentity: UserIdentity
        /// Their role.
        public internal(set) var role: ParticipantRole
        /// What they may do; the owner changes it and saves the share.
        public var permission: ParticipantPermission
        /// Whether they accepted.
        public internal(set) var acceptanceStatus: ParticipantAcceptanceStatus

        /// A participant to invite: a user found with ``Container/discoverUserIdentity(emailAddress:)``
        /// (or any identity with a record ID or an e-mail address), with `permission`.
        public init(userIdentity: UserIdentity, permission: ParticipantPermission = .readOnly) {
            self.userIdentity = userIdentity
            self.role = .privateUser
            self.permission = permission
            self.acceptanceStatus = .pending
        }

        /// A participant to invite by e-mail address (of a user who made themselves discoverable) or
        /// by user record ID, with `permission`; the server finds the user when the share is saved.
        public init(lookupInfo: UserIdentity.LookupInfo, permission: ParticipantPermission = .readOnly) {
            self.init(
                userIdentity: UserIdentity(
                    wire: UserIdentityDictionary(userRecordName: lookupInfo.userRecordID?.recordName, lookupInfo: lookupInfo.wire)),
                permission: permission)
        }

        init(wire: ShareParticipantDictionary) {
            participantID = wire.participantId
            userIdentity = UserIdentity(wire: wire.userIdentity ?? UserIdentityDictionary(userRecordName: nil))
            role = switch wire.type {
            case .owner?: .owner
            case .publicUser?: .publicUser
            case .user?, nil: .privateUser
            }
            permission = ParticipantPermission(wire: wire.permission ?? .readOnly)
            acceptanceStatus = switch wire.acceptanceStatus {
            case .accepted?: .accepted
            case .removed?: .removed
            case .invited?, nil: .pending
            }
        }

        var wire: ShareParticipantDictionary {
            ShareParticipantDictionary(
                participantId: participantID,
                userIdentity: UserIdentityDictionary(
                    userRecordName: userIdentity.userRecordID?.recordName, lookupInfo: userIdentity.lookupInfo?.wire),
                type: role == .owner ? .owner : role == .publicUser ? .publicUser : .user, permission: permission.wire)
        }
    }

    /// The share as a record.
    public private(set) var record: Record

    /// A new share of a whole zone (CloudKit's `CKShare(recordZoneID:)`), private until given a
    /// ``publicPermission`` or participants.
    public init(recordZoneID: RecordZone.ID) {
        record = Record(
            recordType: ShareKeys.recordType,
            recordID: Record.ID(recordName: ShareKeys.zoneWideRecordName, zoneID: recordZoneID))
        record.shareKeys = ShareKeys(publicPermission: SharePermission.none, participants: [])
    }

    /// A new share of `rootRecord` and every record below it through ``Record/parent`` (CloudKit's
    /// `CKShare(rootRecord:)`), private until given a ``publicPermission`` or participants. Save the
    /// root before the share, or with it, earlier in the same request. A record belongs to at most
    /// one share: saving a share of a record already in one fails with
    /// ``CloudError/Code/alreadyShared``.
    public init(rootRecord: Record) {
        record = Record(recordType: ShareKeys.recordType, zoneID: rootRecord.recordID.zoneID)
        record.shareKeys = ShareKeys(
            forRecord: StratusModel.Reference(recordName: rootRecord.recordID.recordName), publicPermission: SharePermission.none,
            participants: [])
    }

    /// The share a record is, when it is one (a record of type `cloudkit.share` the server sent).
    public init?(_ record: Record) {
        guard ShareKeys.isShareType(record.recordType), record.shareKeys != nil else { return nil }
        self.record = record
    }

    /// The share's record ID (`cloudkit.zoneshare` in the shared zone for a zone-wide share).
    public var recordID: Record.ID { record.recordID }

    /// The share's title (`cloudkit.title`), shown on its page.
    public var title: String? {
        get { record[Self.titleKey] as? String }
        set { record[Self.titleKey] = newValue }
    }

    static let titleKey = "cloudkit.title"

    /// What anyone who accepts through the share's URL may do; ``ParticipantPermission/none`` keeps
    /// the share to invited participants.
    public var publicPermission: ParticipantPermission {
        get { ParticipantPermission(wire: record.shareKeys?.publicPermission ?? .none) }
        set { record.shareKeys?.publicPermission = newValue.wire }
    }

    /// The participants, the owner first once saved.
    public var participants: [Participant] { (record.shareKeys?.participants ?? []).map(Participant.init(wire:)) }

    /// The owner, once saved.
    public var owner: Participant? { record.shareKeys?.owner.map(Participant.init(wire:)) }

    /// The signed-in user's own entry, when they take part.
    public var currentUserParticipant: Participant? {
        record.shareKeys?.currentUserParticipant.map(Participant.init(wire:))
    }

    /// The share's URL, to send to the people it is for; `nil` until saved.
    public var url: URL? { record.shareKeys?.url.flatMap(URL.init(string:)) }

    /// Invites a participant (or, for one already there, sets their permission); save the share to
    /// send the change.
    public mutating func addParticipant(_ participant: Participant) {
        var participants = record.shareKeys?.participants ?? []
        if let at = participants.firstIndex(where: { Self.same($0, participant.wire) }) {
            participants[at].permission = participant.permission.wire
        } else {
            participants.append(participant.wire)
        }
        record.shareKeys?.participants = participants
    }

    /// Removes a participant; save the share to send the change.
    public mutating func removeParticipant(_ participant: Participant) {
        record.shareKeys?.participants?.removeAll { Self.same($0, participant.wire) }
    }

    /// Whether two participant entries name the same user.
    private static func same(_ a: ShareParticipantDictionary, _ b: ShareParticipantDictionary) -> Bool {
        if let id = a.participantId, id == b.participantId { return true }
        let (left, right) = (a.userIdentity, b.userIdentity)
        if let name = left?.userRecordName ?? left?.lookupInfo?.userRecordName,
            name == right?.userRecordName ?? right?.lookupInfo?.userRecordName
        {
            return true
        }
        if let address = left?.lookupInfo?.emailAddress?.lowercased(),
            address == right?.lookupInfo?.emailAddress?.lowercased()
        {
            return true
        }
        return false
    }

    /// What a share's URL leads to (CloudKit's `CKShare.Metadata`): the share, its owner, and the
    /// signed-in user's place in it.
    public struct Metadata: Hashable, Sendable {
        /// The container of the share.
        public var containerIdentifier: String
        /// The share; its ``Share/recordID`` names the shared zone (with its owner).
        public var share: Share
        /// The root of a hierarchical share (CloudKit's `hierarchicalRootRecordID`); `nil` for a
        /// zone-wide share.
        public var hierarchicalRootRecordID: Record.ID?
        /// The owner.
        public var ownerIdentity: UserIdentity
        /// The signed-in user's role.
        public var participantRole: ParticipantRole
        /// The signed-in user's status.
        public var participantStatus: ParticipantAcceptanceStatus
        /// What the signed-in user may do once they accept.
        public var participantPermission: ParticipantPermission
        /// The short GUID the metadata was found by.
        var shortGUID: String
    }
}

extension Share.ParticipantPermission {
    init(wire: SharePermission) {
        self = switch wire {
        case .none: .none
        case .readOnly: .readOnly
        case .readWrite: .readWrite
        }
    }

    var wire: SharePermission {
        switch self {
        case .none: .none
        case .readOnly: .readOnly
        case .readWrite: .readWrite
        }
    }
}

extension Database {
    /// Saves a share (the owner's, in their private database) and returns it as saved, with its URL,
    /// participants and owner.
    public func save(_ share: Share) async throws -> Share {
        let saved = try await save(share.record)
        guard let share = Share(saved) else {
            throw CloudError(.serverRejectedRequest, "the server answered the share without its share keys")
        }
        return share
    }
}

extension Container {
    /// The metadata of the share a URL (or a short GUID) leads to (CloudKit's
    /// `CKFetchShareMetadataOperation`). Throws ``CloudError/Code/unknownItem`` when no share there is
    /// open to the signed-in user.
    public func shareMetadata(for url: URL) async throws -> Share.Metadata {
        try await shareMetadata(shortGUID: ShortGUIDDictionary(value: url.absoluteString).shortGUID, accepting: false)
    }

    /// Accepts a share (CloudKit's `CKAcceptSharesOperation`): the shared zone appears in the signed-in
    /// user's shared database. Returns the share as accepted.
    @discardableResult
    public func accept(_ metadata: Share.Metadata) async throws -> Share {
        try await shareMetadata(shortGUID: metadata.shortGUID, accepting: true).share
    }

    private func shareMetadata(shortGUID: String, accepting: Bool) async throws -> Share.Metadata {
        let endpoint = accepting ? Endpoints.recordsAccept : Endpoints.recordsResolve
        let answer = try await connection.call(
            .database(.public, endpoint.erased), body: ShortGUIDsRequest(shortGUIDs: [ShortGUIDDictionary(value: shortGUID)]),
            idempotent: !accepting, as: ShareMetadataResponse.self)
        guard let result = answer.results.first else {
            throw CloudError(.serverRejectedRequest, "the server answered no result for the share")
        }
        let wire: ShareMetadataDictionary
        switch result {
        case .success(let metadata): wire = metadata
        case .failure(let error): throw CloudError(error)
        }
        let database = wire.databaseScope == .private ? privateCloudDatabase : sharedCloudDatabase
        let zoneID = database.zoneID(wire.zoneID)
        guard let share = Share(try database.record(wire.share, zoneID: zoneID)) else {
            throw CloudError(.serverRejectedRequest, "the server answered a share that is not one")
        }
        let role: Share.ParticipantRole = switch wire.participantType {
        case .owner: .owner
        case .publicUser: .publicUser
        case .user: .privateUser
        }
        let status: Share.ParticipantAcceptanceStatus = switch wire.participantStatus {
        case .accepted: .accepted
        case .removed: .removed
        case .invited: .pending
        }
        if accepting, wire.databaseScope == .shared, wire.rootRecordName == nil {
            connection.noteSharePermission(wire.participantPermission, zone: zoneID)
        }
        return Share.Metadata(
            containerIdentifier: wire.containerIdentifier, share: share,
            hierarchicalRootRecordID: wire.rootRecordName.map { Record.ID(recordName: $0, zoneID: zoneID) },
            ownerIdentity: UserIdentity(wire: wire.ownerIdentity),
            participantRole: role, participantStatus: status,
            participantPermission: Share.ParticipantPermission(wire: wire.participantPermission), shortGUID: shortGUID)
    }
}
