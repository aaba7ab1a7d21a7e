public import StratusModel

/// A user's place in a share, as the share index holds it.
public struct ShareMembership: Hashable, Sendable {
    /// The share record's name.
    public var shareRecordName: String
    /// What the participant may do.
    public var permission: SharePermission
    /// Whether they accepted, or were removed.
    public var status: ShareAcceptanceStatus

    /// Creates a membership.
    public init(shareRecordName: String, permission: SharePermission, status: ShareAcceptanceStatus) {
        self.shareRecordName = shareRecordName
        self.permission = permission
        self.status = status
    }
}

/// A share record found by its short GUID, and where it lives.
public struct LocatedShare: Sendable {
    /// The owner's private database.
    public var database: DatabaseLocator
    /// The zone that holds the share.
    public var zone: String
    /// The share record.
    public var record: StoredRecord

    /// Creates a located share.
    public init(database: DatabaseLocator, zone: String, record: StoredRecord) {
        self.database = database
        self.zone = zone
        self.record = record
    }
}

/// A zone another user shares with a participant, as their shared database lists it.
public struct SharedZone: Sendable {
    /// The zone's owner.
    public var owner: String
    /// The zone, in the owner's private database.
    public var zone: ZoneState

    /// Creates a shared zone.
    public init(owner: String, zone: ZoneState) {
        self.owner = owner
        self.zone = zone
    }
}

/// What the share index answers: who takes part in which share. Backends keep the index from the
/// share records they write (``RecordWriteExecutor/RowChange/share``), in the same transaction.
public protocol ShareStorage: Sendable {
    /// `user`'s memberships in the shares of a zone of `database` (a private database): its
    /// zone-wide share, or the hierarchical shares rooted in it, by share record name.
    func shareMemberships(zone: String, in database: DatabaseLocator, user: String) async throws -> [ShareMembership]
    /// The share record a short GUID names, if it is live.
    func share(shortGUID: String) async throws -> LocatedShare?
    /// The users other than the owner who accepted a share of a zone of `database`.
    func acceptedParticipants(zone: String, in database: DatabaseLocator) async throws -> [String]
    /// The zones shared with `user` that they accepted, by owner and zone name.
    func sharedZones(user: String, container: String, environment: ContainerEnvironment) async throws -> [SharedZone]
}
