import StratusModel

/// A position in a change order: which zone or database incarnation, and how far into it.
///
/// A zone that is deleted and created again gets a new `scopeID`, so positions in the old one no
/// longer apply.
public struct ChangePosition: Hashable, Sendable {
    /// The storage identifier of the zone (record feeds) or the database (zone feeds).
    public var scopeID: Int64
    /// Every change up to and including this sequence number has been read.
    public var sequence: Int64

    /// Creates a position.
    public init(scopeID: Int64, sequence: Int64) {
        self.scopeID = scopeID
        self.sequence = sequence
    }
}

/// A zone as storage knows it.
public struct ZoneState: Hashable, Sendable {
    /// The zone's name.
    public var name: String
    /// Its storage identifier; new for every incarnation of the name.
    public var id: Int64
    /// The sequence number of its last change.
    public var sequence: Int64
    /// Tombstones up to this sequence number have been purged; older positions are expired.
    public var purgedSequence: Int64
    /// Whether the zone was deleted (only reported by database change feeds).
    public var deleted: Bool

    /// Creates a zone state.
    public init(name: String, id: Int64, sequence: Int64, purgedSequence: Int64, deleted: Bool) {
        self.name = name
        self.id = id
        self.sequence = sequence
        self.purgedSequence = purgedSequence
        self.deleted = deleted
    }

    /// The position just after the zone's last change.
    public var currentPosition: ChangePosition { ChangePosition(scopeID: id, sequence: sequence) }
}

/// One page of a zone's record change feed.
public struct RecordChangesPage: Hashable, Sendable {
    /// The zone read.
    public var zone: ZoneState
    /// Changed records in change order, each once in its latest state; tombstones for deletions.
    public var records: [StoredRecord]
    /// Where the next read starts.
    public var position: ChangePosition
    /// Whether more changes follow `position`.
    public var moreComing: Bool

    /// Creates a page.
    public init(zone: ZoneState, records: [StoredRecord], position: ChangePosition, moreComing: Bool) {
        self.zone = zone
        self.records = records
        self.position = position
        self.moreComing = moreComing
    }

    /// The page of a read that asked for `limit + 1` records in change order: more are coming when
    /// the extra one came, and the position is the last record returned, or the zone's last change.
    public init(zone: ZoneState, fetched: [StoredRecord], limit: Int) {
        let moreComing = fetched.count > limit
        let records = Array(fetched.prefix(limit))
        self.init(
            zone: zone, records: records,
            position: ChangePosition(scopeID: zone.id, sequence: moreComing ? records[records.count - 1].sequence : zone.sequence),
            moreComing: moreComing)
    }
}

extension RecordChangesPage {
    /// Where pages of `limit` records would end, read one after another over `sequences` (the
    /// sequence numbers after a position, in change order, at most `count × limit + 1` of them to
    /// learn of `count` pages): the position of each page that more changes follow, its last record's,
    /// as ``init(zone:fetched:limit:)`` gives it.
    public static func ends(ofSequences sequences: [Int64], limit: Int, scopeID: Int64) -> [ChangePosition] {
        stride(from: limit, to: sequences.count, by: limit).map { ChangePosition(scopeID: scopeID, sequence: sequences[$0 - 1]) }
    }
}

/// One page of a database's zone change feed.
public struct DatabaseChangesPage: Hashable, Sendable {
    /// Custom zones changed, created or deleted, in change order.
    public var zones: [ZoneState]
    /// Where the next read starts.
    public var position: ChangePosition
    /// Whether more changes follow `position`.
    public var moreComing: Bool

    /// Creates a page.
    public init(zones: [ZoneState], position: ChangePosition, moreComing: Bool) {
        self.zones = zones
        self.position = position
        self.moreComing = moreComing
    }
}

extension ChangePosition {
    /// Checks a feed position against the zone or database it claims to be in (`scopeID`, its last
    /// `sequence` and its purge horizon); returns the sequence number to read after, 0 without a
    /// position. `what` names the zone or database in the `CHANGE_TOKEN_EXPIRED` reasons.
    public static func start(
        after position: ChangePosition?, scopeID: Int64, sequence: Int64, purged: Int64, what: String
    ) throws -> Int64 {
        guard let position else { return 0 }
        guard position.scopeID == scopeID else {
            throw StratusError(
                .changeTokenExpired,
                "the sync token is not from the current history of \(what) (it was deleted and created again, or the "
                    + "token belongs elsewhere); fetch again without a token")
        }
        guard position.sequence >= purged else {
            throw StratusError(
                .changeTokenExpired,
                "the sync token is older than the tombstone horizon of \(what); fetch again without a token")
        }
        guard position.sequence <= sequence else {
            throw StratusError(
                .changeTokenExpired,
                "the sync token is ahead of \(what) (was the server restored from a backup?); fetch without a token")
        }
        return position.sequence
    }
}
