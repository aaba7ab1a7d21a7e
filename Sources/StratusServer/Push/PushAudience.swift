import StratusModel
import StratusStorage

/// Who hears of changes to a private zone through their shared databases, and of which changes:
/// the participants who accepted one of the zone's shares (and, when a share changed, those it
/// just lost), each hearing of what their change feed shows them (``ZoneAccess/feedEntry(_:since:)``,
/// the one visibility rule both the feed and push apply).
///
/// It keeps, per zone written since the hub started, who accepted its shares and each subscribing
/// participant's memberships, kept up to date from the share records' own changes.
struct PushAudience {
    /// A zone of a private database.
    private struct ZoneKey: Hashable {
        var database: DatabaseLocator
        var zone: String
    }

    private let storage: any ShareStorage
    private var participants: [ZoneKey: Set<String>] = [:]
    /// Each subscribing participant's accepted memberships of a zone's shares, by participant.
    private var memberships: [ZoneKey: [String: [ShareMembership]]] = [:]

    init(storage: any ShareStorage) {
        self.storage = storage
    }

    /// The participants to notify of changes to a private zone: those who accepted one of its
    /// shares, and when a share changed, also those it just lost (they hear that the zone or their
    /// records left their shared database).
    mutating func participants(
        toNotifyOf changes: [RecordChange], zone: String, in database: DatabaseLocator
    ) async throws -> Set<String> {
        let key = ZoneKey(database: database, zone: zone)
        let shareChanges = changes.filter { $0.record.recordType == ShareKeys.recordType }
        if !shareChanges.isEmpty {
            // The change is committed, so the share index already holds who takes part now.
            let now = Set(try await storage.acceptedParticipants(zone: zone, in: database))
            participants[key] = now
            memberships[key] = nil
            return shareChanges.reduce(now) { $0.union(Self.acceptedParticipants(of: $1.previous)) }
        }
        if let known = participants[key] { return known }
        // One entry per private zone written since start; a busy server starts over rather than grow.
        if participants.count >= 100_000 {
            participants.removeAll()
            memberships.removeAll()
        }
        let loaded = Set(try await storage.acceptedParticipants(zone: zone, in: database))
        participants[key] = loaded
        return loaded
    }

    /// Who hears that a private zone was deleted: who had accepted its shares, as known here and as
    /// read before it went (`participants`); the zone is forgotten.
    mutating func zoneDeleted(_ zone: String, in database: DatabaseLocator, participants known: [String]) -> Set<String> {
        let key = ZoneKey(database: database, zone: zone)
        defer {
            participants[key] = nil
            memberships[key] = nil
        }
        return (participants[key] ?? []).union(known)
    }

    /// The changes of a private zone that `participant` hears of: ``changes(_:heardBy:through:)``
    /// with their accepted memberships of its shares.
    mutating func changes(
        _ changes: [RecordChange], heardBy participant: String, zone: String, in database: DatabaseLocator
    ) async throws -> [RecordChange] {
        let key = ZoneKey(database: database, zone: zone)
        let accepted: [ShareMembership]
        if let known = memberships[key]?[participant] {
            accepted = known
        } else {
            accepted = try await storage.shareMemberships(zone: zone, in: database, user: participant)
                .filter { $0.status == .accepted }
            memberships[key, default: [:]][participant] = accepted
        }
        let access = ZoneAccess(
            name: zone, locator: database, wireZoneID: ZoneID(zoneName: zone, ownerRecordName: database.owner),
            memberships: accepted)
        return Self.changes(changes, heardBy: participant, through: access)
    }

    /// The changes `participant`, reaching the zone through `access`, hears of: those their change
    /// feed would show them right after each change (all of them through the zone-wide share; through
    /// shares rooted at records, only changes to those records or records just leaving them, so
    /// nothing of the owner's other records, not even that they changed), and the changes to a share
    /// they had accepted, so that one who was just removed hears of it.
    static func changes(_ changes: [RecordChange], heardBy participant: String, through access: ZoneAccess) -> [RecordChange] {
        changes.filter { change in
            if acceptedParticipants(of: change.previous).contains(participant) { return true }
            guard !access.memberships.isEmpty else { return false }
            return access.feedEntry(change.record, since: change.record.sequence - 1) != nil
        }
    }

    /// Who had accepted `share`, when it is a share.
    private static func acceptedParticipants(of share: StoredRecord?) -> Set<String> {
        Set(
            share?.shareState?.participants.filter { $0.status == .accepted && $0.type != .owner }
                .map(\.userRecordName) ?? [])
    }
}
