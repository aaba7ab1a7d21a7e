import Foundation
import Stratus
@testable import StratusSync
import Testing

/// The pending-change queue on its own: order, replacement, versions against in-flight sends,
/// failures kept with their error.
@Suite("sync engine: the pending-change queue")
struct ChangeQueueTests {
    typealias Queue = ChangeQueue<SyncEngine.PendingRecordZoneChange>
    static let a = Record.ID(recordName: "a")
    static let b = Record.ID(recordName: "b")

    /// A status in words, to compare (statuses carry errors, which are not equatable).
    static func describe(_ status: SyncEngine.ChangeStatus?) -> String {
        switch status {
        case nil: "none"
        case .pending?: "pending"
        case .inFlight?: "inFlight"
        case .waitingToRetry(let error, let date)?: "waitingToRetry(\(error.code), \(date.timeIntervalSince1970))"
        case .failed(let error)?: "failed(\(error.code), \(error.message))"
        }
    }

    @Test("changes keep the order they were added in; one item has one change, the latest kind")
    func orderAndReplacement() {
        var queue = Queue()
        queue.add(.saveRecord(Self.a), version: 1)
        queue.add(.saveRecord(Self.b), version: 2)
        queue.add(.saveRecord(Self.a), version: 3)
        #expect(queue.changes == [.saveRecord(Self.a), .saveRecord(Self.b)], "adding again keeps its place")
        queue.add(.deleteRecord(Self.a), version: 4)
        #expect(queue.changes == [.saveRecord(Self.b), .deleteRecord(Self.a)], "a delete replaces the save")
        queue.remove(.deleteRecord(Self.a))
        #expect(queue.changes == [.saveRecord(Self.b)])
    }

    @Test("the front of the queue is the whole queue's first changes that match, in order, across removed entries")
    func front() {
        var queue = Queue()
        let ids = (0..<300).map { Record.ID(recordName: "r\($0)", zoneID: RecordZone.ID(zoneName: $0.isMultiple(of: 3) ? "Z" : "Y")) }
        for (index, id) in ids.enumerated() { queue.add(.saveRecord(id), version: UInt64(index)) }
        // Removed entries leave holes until the queue compacts: the front skips them.
        for id in ids.prefix(100) { queue.remove(.saveRecord(id)) }
        queue.add(.deleteRecord(ids[150]), version: 400)
        let inZ: (SyncEngine.PendingRecordZoneChange) -> Bool = { $0.recordID.zoneID.zoneName == "Z" }
        for limit in [0, 1, 10, 66, 67, 500] {
            let expected = Array(queue.changes.filter(inZ).prefix(limit))
            #expect(queue.prefix(limit, where: inZ) == expected, "limit \(limit)")
        }
        #expect(queue.prefix(500) { _ in true } == queue.changes)
    }

    @Test("a confirmation removes a change only if it was not added again after the batch was built")
    func confirmationsRespectVersions() {
        var queue = Queue()
        queue.add(.saveRecord(Self.a), version: 1)
        queue.markInFlight(.saveRecord(Self.a))
        #expect(Self.describe(queue.status(of: .saveRecord(Self.a))) == "inFlight")
        queue.add(.saveRecord(Self.a), version: 5)  // edited while in flight
        queue.confirm(.saveRecord(Self.a), sentAt: 3)
        #expect(Self.describe(queue.status(of: .saveRecord(Self.a))) == "pending", "the newer edit stays pending")
        queue.confirm(.saveRecord(Self.a), sentAt: 5)
        #expect(queue.isEmpty)
    }

    @Test("a refused change leaves the queue and is kept as failed with its error, until added again")
    func refusals() {
        var queue = Queue()
        queue.add(.saveRecord(Self.a), version: 1)
        let error = CloudError(.invalidArguments, "no")
        queue.settle(.saveRecord(Self.a), failedWith: error, .refuse, sentAt: 1)
        #expect(queue.isEmpty)
        #expect(Self.describe(queue.status(of: .saveRecord(Self.a))) == "failed(\(error.code), no)")
        #expect(queue.tracked.map(\.change) == [.saveRecord(Self.a)])
        queue.add(.saveRecord(Self.a), version: 2)
        #expect(Self.describe(queue.status(of: .saveRecord(Self.a))) == "pending", "adding it again clears the failure")
    }

    @Test("a change to retry waits with the date; a cancelled request puts in-flight changes back")
    func retriesAndCancellation() {
        var queue = Queue()
        queue.add(.saveRecord(Self.a), version: 1)
        queue.add(.saveRecord(Self.b), version: 1)
        let date = Date(timeIntervalSince1970: 1_000)
        let throttled = CloudError(.requestRateLimited, "slow down", retryAfterSeconds: 5)
        queue.settle(.saveRecord(Self.a), failedWith: throttled, .retry(date), sentAt: 1)
        #expect(Self.describe(queue.status(of: .saveRecord(Self.a))) == "waitingToRetry(\(throttled.code), 1000.0)")
        queue.markInFlight(.saveRecord(Self.b))
        queue.resetInFlight()
        #expect(Self.describe(queue.status(of: .saveRecord(Self.b))) == "pending")
    }

    @Test("a batch is the first changes that fit, in order: it ends at a save too large for what is left")
    func batchEndsAtFirstMisfit() async throws {
        let large = String(repeating: "x", count: 1_500_000)
        var records: [Record.ID: Record] = [:]
        for recordID in [Self.a, Self.b] {
            var record = Record(recordType: "Note", recordID: recordID)
            record["text"] = large
            records[recordID] = record
        }
        let provided = records
        let batch = try #require(
            await SyncEngine.RecordZoneChangeBatch(
                pendingChanges: [.saveRecord(Self.a), .saveRecord(Self.b), .deleteRecord(Record.ID(recordName: "c"))]
            ) { provided[$0] })
        #expect(batch.recordsToSave.map(\.recordID) == [Self.a])
        #expect(batch.recordIDsToDelete.isEmpty, "the delete after the save that did not fit waits for the next batch")
    }

    @Test("pages gathered into one fetched event give each record as the latest page has it: saved in its newest version or deleted, never both")
    func gatheredPages() throws {
        let c = Record.ID(recordName: "c")
        func page(_ saved: [Record], deleted: [Record.ID], token: String) -> RecordZoneChanges {
            RecordZoneChanges(
                modificationResultsByID: Dictionary(uniqueKeysWithValues: saved.map { ($0.recordID, .success($0)) }),
                deletions: deleted.map { .init(recordID: $0, recordType: "Note") },
                changeToken: ServerChangeToken(rawValue: token), moreComing: true)
        }
        func note(_ id: Record.ID, _ title: String) -> Record {
            var record = Record(recordType: "Note", recordID: id)
            record["title"] = title
            return record
        }
        var gathered = GatheredChanges()
        try gathered.add(page([note(Self.a, "first"), note(Self.b, "b")], deleted: [], token: "1"))
        try gathered.add(page([note(c, "c")], deleted: [Self.a], token: "2"))
        try gathered.add(page([note(Self.a, "again")], deleted: [Self.b], token: "3"))
        let event = gathered.event
        #expect(gathered.count == 3)
        #expect(Dictionary(uniqueKeysWithValues: event.modifications.map { ($0.record.recordID, $0.record.fieldValue(forKey: "title")) })
            == [Self.a: .string("again"), c: .string("c")])
        #expect(event.deletions.map(\.recordID) == [Self.b])

        // A record that could not be read (its asset, say) fails the whole gathering: nothing is handed over.
        var failing = GatheredChanges()
        let broken = RecordZoneChanges(
            modificationResultsByID: [c: .failure(CloudError(.networkFailure, "asset download failed"))], deletions: [],
            changeToken: ServerChangeToken(rawValue: "4"), moreComing: false)
        #expect(throws: CloudError.self) { try failing.add(broken) }
    }
}
