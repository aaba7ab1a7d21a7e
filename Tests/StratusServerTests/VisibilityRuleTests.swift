import StratusModel
import StratusStorage
import Testing

@testable import StratusServer

/// The one rule of what a participant of a shared zone learns of a change: their change feed shows
/// it (``ZoneAccess/feedEntry(_:since:)``), and push tells them of it (``PushAudience``), from the same
/// table, so the two cannot drift apart.
@Suite("one visibility rule for the change feed and push")
struct VisibilityRuleTests {
    static let owner = DatabaseLocator(container: "iCloud.test", environment: .development, scope: .private, owner: "_owner")

    /// A record of the shared zone at `sequence`: in `share`, having left `left` at a position.
    static func record(
        _ name: String, at sequence: Int64, in share: String? = nil, left: (share: String, at: Int64)? = nil,
        deleted: Bool = false
    ) -> StoredRecord {
        var fields: [String: FieldValue] = ["title": .string(name)]
        if let share { fields[RecordHierarchy.shareField] = .string(share) }
        if let left {
            fields[RecordHierarchy.formerShareField] = .string(left.share)
            fields[RecordHierarchy.formerShareSequenceField] = .int64(left.at)
        }
        var writer = JSONWriter()
        RecordDictionary.writeFields(fields, to: &writer)
        let stamp = RecordStamp(timestamp: 1_000, userRecordName: "_owner")
        return StoredRecord(
            name: name, recordType: "Note", changeTag: "t\(sequence)", fieldsJSON: writer.bytes, created: stamp,
            modified: stamp, deleted: deleted, sequence: sequence)
    }

    struct Case: CustomTestStringConvertible, Sendable {
        var description: String
        /// The shares the participant accepted (`zoneWide` for the zone's own share).
        var shares: [String]
        var change: RecordChange
        /// Whether the participant learns of the change.
        var learns: Bool
        var testDescription: String { description }
    }

    static let zoneWide = ShareKeys.zoneWideRecordName

    static let cases: [Case] = [
        Case(
            description: "through the zone-wide share, any record", shares: [zoneWide],
            change: RecordChange(previous: record("r", at: 4), record: record("r", at: 5)), learns: true),
        Case(
            description: "a record of the share accepted", shares: ["A"],
            change: RecordChange(previous: record("r", at: 4, in: "A"), record: record("r", at: 5, in: "A")), learns: true),
        Case(
            description: "a record of another share", shares: ["A"],
            change: RecordChange(previous: record("r", at: 4, in: "B"), record: record("r", at: 5, in: "B")), learns: false),
        Case(
            description: "the owner's record in no share", shares: ["A"],
            change: RecordChange(previous: record("r", at: 4), record: record("r", at: 5)), learns: false),
        Case(
            description: "a record created in no share", shares: ["A"],
            change: RecordChange(previous: nil, record: record("r", at: 5)), learns: false),
        Case(
            description: "a record moved out of the share accepted", shares: ["A"],
            change: RecordChange(previous: record("r", at: 4, in: "A"), record: record("r", at: 5, in: "B", left: ("A", 5))),
            learns: true),
        Case(
            description: "a record moved into the share accepted", shares: ["B"],
            change: RecordChange(previous: record("r", at: 4, in: "A"), record: record("r", at: 5, in: "B", left: ("A", 5))),
            learns: true),
        Case(
            description: "a record of the share deleted", shares: ["A"],
            change: RecordChange(previous: record("r", at: 4, in: "A"), record: record("r", at: 5, in: "A", deleted: true)),
            learns: true),
        Case(
            description: "a record that left the share before, changed again", shares: ["A"],
            change: RecordChange(previous: record("r", at: 4, left: ("A", 3)), record: record("r", at: 5, left: ("A", 3))),
            learns: false),
    ]

    static func access(_ shares: [String]) -> ZoneAccess {
        ZoneAccess(
            name: "z", locator: owner, wireZoneID: ZoneID(zoneName: "z", ownerRecordName: "_owner"),
            memberships: shares.map { ShareMembership(shareRecordName: $0, permission: .readOnly, status: .accepted) })
    }

    @Test("a reader whose feed stood just before the change sees it exactly when push tells them", arguments: cases)
    func sameRule(_ row: Case) {
        let access = Self.access(row.shares)
        let fed = access.feedEntry(row.change.record, since: row.change.record.sequence - 1)
        #expect((fed != nil) == row.learns, "the change feed")
        let heard = PushAudience.changes([row.change], heardBy: "_participant", through: access)
        #expect(heard.isEmpty != row.learns, "push")
        // What the feed shows of a record the participant no longer sees is a tombstone.
        if let fed, !access.reveals(row.change.record) { #expect(fed.deleted) }
    }
}
