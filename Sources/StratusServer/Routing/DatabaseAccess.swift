import StratusModel
import StratusStorage

/// Who may do what in a database: the one place that decides it.
///
/// Every endpoint under `/database/1/{container}/{environment}/{database}/` asks
/// ``authorize(_:for:endpoint:)`` before it touches storage, names its zones through ``zone(_:field:)``,
/// and asks ``readAccess(recordType:schema:)`` before it hands out a record. The rules (docs/protocol.md,
/// "Who must be signed in"):
/// - server-to-server keys reach the public database only, as their own user;
/// - the public database is read with the API token alone and written by signed-in users, record by
///   record under the schema's grants; it has only the default zone and no change feeds;
/// - a private database is its owner's, who alone reaches it, with every operation;
/// - the shared database is its user's view of zones other users share with them: a zone is reached
///   there only by an accepted participant of its share, read by any, written only with
///   `READ_WRITE`; to anyone else it does not exist. Its zones cannot be created or deleted there.
struct DatabaseAccess: Sendable {
    /// What a request does to the database.
    enum Operation: Sendable {
        /// Reads zones or records (`zones/list|lookup`, `records/lookup|query`, asset downloads).
        case read
        /// Writes records or assets (`records/modify`, `assets/upload|rereference`).
        case write
        /// Creates or deletes zones (`zones/modify`).
        case manageZones
        /// Reads a change feed (`records/changes`, `changes/zone|database`, `zones/changes`).
        case readChanges
        /// Reads or changes the caller's subscriptions or discoverability, or asks who the caller is.
        case ownData
        /// Finds other users (`users/discover`, `users/lookup/*`): signed-in users only. CloudKit
        /// documents these on the public database; clients written against Apple's servers send them
        /// on the private one too, which Apple answers, so every database of the path is served.
        case findUsers
        /// Resolves or accepts shares by short GUID (`records/resolve|accept`): signed-in users only,
        /// on any database of the path (Apple's clients use the public one).
        case joinShares
        /// Leaves a share: a participant deletes the zone's share from their shared database, which
        /// every accepted participant may do, read-only ones too.
        case leaveShare
    }

    /// The request, as authenticated.
    let target: DatabaseRequest
    /// What the request does.
    let operation: Operation
    /// The database reached: the public one, or the signed-in user's private or shared one.
    let locator: DatabaseLocator

    /// The access `target`'s caller has for `operation`, or the error that refuses it: `421` with the
    /// sign-in link when a user is needed and none signed in, `400` for what the database does not
    /// offer. `endpoint` names the request in those errors.
    static func authorize(_ operation: Operation, for target: DatabaseRequest, endpoint: String) throws -> DatabaseAccess {
        if target.signedByServerKey, target.scope != .public {
            throw StratusError(
                .accessDenied, "server-to-server keys reach the public database only, as in CloudKit")
        }
        switch (operation, target.scope) {
        case (.readChanges, .public):
            throw StratusError.badRequest(
                "\(endpoint) is available in the private and shared databases; the public database has no change feeds")
        case (.leaveShare, .public), (.leaveShare, .private):
            throw StratusError.badRequest("\(endpoint): a share is left from the shared database")
        case (.write, _), (.ownData, _), (.findUsers, _), (.joinShares, _), (.leaveShare, _):
            _ = try target.requireUser()
        default:
            break
        }
        let access = DatabaseAccess(target: target, operation: operation, locator: try target.locator())
        if operation == .manageZones {
            switch target.scope {
            case .public:
                throw StratusError.badRequest(
                    "the public database has only the default zone; create zones in the private database")
            case .shared:
                throw StratusError.badRequest(
                    "zones cannot be created or deleted in the shared database; they appear when a share is accepted")
            case .private:
                break
            }
        }
        return access
    }

    /// The access of a `records/modify` that deletes the zone's share from the shared database: a
    /// participant leaving it, which read-only participants may do too (``Operation/leaveShare``).
    func leavingShare() throws -> DatabaseAccess {
        try Self.authorize(.leaveShare, for: target, endpoint: "records/modify")
    }

    /// The signed-in user (always there for ``Operation/write`` and ``Operation/ownData``).
    func requireUser() throws -> String {
        try target.requireUser()
    }

    /// The zone a request names (the default zone when `zoneID` is absent), if the caller may reach
    /// it for the operation authorized. In the shared database that is a zone of another user's
    /// private database with a share the caller accepted (``ZoneAccess/memberships``); any other
    /// zone is `ZONE_NOT_FOUND`, whether or not it exists, and a write without `READ_WRITE` in one
    /// of its shares is `ACCESS_DENIED`.
    func zone(_ zoneID: ZoneID?, field: String, limits: Limits, shares: any ShareStorage) async throws -> ZoneAccess {
        let name = try target.zoneName(zoneID, field: field, limits: limits)
        guard target.scope == .shared else {
            return ZoneAccess(name: name, locator: locator, wireZoneID: try target.wireZoneID(name), memberships: [])
        }
        let user = try requireUser()
        guard let owner = zoneID?.ownerRecordName, owner != ZoneID.currentUserOwnerName, owner != user else {
            throw Self.notShared(name)
        }
        let ownerDatabase = DatabaseLocator(
            container: target.container, environment: target.environment, scope: .private, owner: owner)
        let memberships = try await shares.shareMemberships(zone: name, in: ownerDatabase, user: user).filter {
            $0.status == .accepted && $0.permission != .none
        }
        guard !memberships.isEmpty else { throw Self.notShared(name) }
        if operation == .write, !memberships.contains(where: { $0.permission == .readWrite }) {
            throw StratusError(
                .accessDenied, "zone '\(name)' is shared with you read-only; only its owner and READ_WRITE participants write")
        }
        return ZoneAccess(
            name: name, locator: ownerDatabase, wireZoneID: ZoneID(zoneName: name, ownerRecordName: owner),
            memberships: memberships)
    }

    /// `ZONE_NOT_FOUND` for a zone of the shared database the caller has no share of.
    static func notShared(_ zoneName: String) -> StratusError {
        StratusError(.zoneNotFound, "zone '\(zoneName)' is not shared with you")
    }

    /// Whether writes are checked record by record against the schema's grants (the public database).
    var enforcesGrants: Bool { target.scope == .public }

    /// Which records of `recordType` the caller may read.
    func readAccess(recordType: String, schema: Schema) -> ReadAccess {
        ReadAccess(
            recordType: recordType, schema: schema, scope: target.scope, environment: target.environment,
            user: target.userRecordName)
    }

    /// Whether the caller may see `record` of `zone`: the zone shows it to them (``ZoneAccess/reveals(_:)``)
    /// and the schema grants them READ on it. Every answer that hands out a stored record asks this
    /// first: a lookup, an asset, the record a write saved, the `serverRecord` of a refused write.
    func mayRead(_ record: StoredRecord, in zone: ZoneAccess, schema: Schema) -> Bool {
        zone.reveals(record) && readAccess(recordType: record.recordType, schema: schema).allows(creator: record.created.userRecordName)
    }
}

/// A zone a request may reach, where its records are kept, and which of them the caller sees.
struct ZoneAccess: Sendable {
    /// The zone's name.
    let name: String
    /// The database that holds it: the caller's own, or for a zone of the shared database its
    /// owner's private one.
    let locator: DatabaseLocator
    /// The zone's ID on the wire (with the owner's record name).
    let wireZoneID: ZoneID
    /// The caller's accepted memberships of the zone's shares, when the zone is reached through the
    /// shared database; empty otherwise.
    let memberships: [ShareMembership]

    /// For a participant of hierarchical shares, those shares and the permission in each: they see
    /// and write only the records of those shares (``RecordHierarchy``). `nil` when the caller
    /// reaches the whole zone: its owner, or a participant of its zone-wide share.
    let participantShares: [String: SharePermission]?

    init(name: String, locator: DatabaseLocator, wireZoneID: ZoneID, memberships: [ShareMembership]) {
        self.name = name
        self.locator = locator
        self.wireZoneID = wireZoneID
        self.memberships = memberships
        participantShares = memberships.isEmpty
            || memberships.contains(where: { $0.shareRecordName == ShareKeys.zoneWideRecordName })
            ? nil
            : Dictionary(memberships.map { ($0.shareRecordName, $0.permission) }, uniquingKeysWith: { first, _ in first })
    }

    /// Whether the caller sees `record`: always, unless they reach only some hierarchies of the zone.
    func reveals(_ record: StoredRecord) -> Bool {
        guard let shares = participantShares else { return true }
        return record.shareName.map { shares[$0] != nil } ?? false
    }

    /// What the caller's change feed shows of `record`, read after the position `since` (`nil` for a
    /// first fetch): the record when they see it; a tombstone when it left one of their shares after
    /// that position, so that they drop it once; nothing otherwise, so that no one learns of records
    /// that were never shared with them.
    func feedEntry(_ record: StoredRecord, since: Int64?) -> StoredRecord? {
        guard let shares = participantShares else { return record }
        if reveals(record) { return record }
        guard let since, let left = record.formerShare, shares[left.shareName] != nil, left.sequence > since else {
            return nil
        }
        return RecordWritePlanner.tombstone(
            of: record, context: WriteContext(userRecordName: record.modified.userRecordName, timestamp: record.modified.timestamp))
    }
}
