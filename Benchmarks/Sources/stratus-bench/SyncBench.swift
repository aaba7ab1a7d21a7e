import Foundation
import Stratus
import StratusModel
import StratusServer
import StratusSQLite
import StratusStorage
import StratusSync
import Synchronization

/// The sync engine end to end: how long an edit takes to reach another device, and how fast a
/// fresh device catches up, each beside what the same work costs without the engine in the same run.
struct SyncBench {
    struct LatencyRound: Encodable {
        var engineP50 = 0.0
        var engineP99 = 0.0
        var baselineP50 = 0.0
        var baselineP99 = 0.0
    }

    struct InitialSyncRound: Encodable {
        var records = 0
        var engineRate = 0.0
        var sdkRate = 0.0
        var rawRate = 0.0
    }

    let durability: SQLiteStorage.Durability
    let progress: (String) -> Void

    // MARK: - Latency

    /// `trials` edits on device A, each timed from `state.add` to device B's
    /// `fetchedRecordZoneChanges` event, both engines syncing automatically; beside the same trip
    /// made by hand with the SDK (a save, the push notification, a read of the zone's changes).
    func measureLatency(trials: Int) async throws -> LatencyRound {
        let bench = try await BenchServer.start(durability: durability)
        do {
            let round = try await measureLatency(on: bench, trials: trials)
            try await bench.stop()
            return round
        } catch {
            try? await bench.stop()
            throw error
        }
    }

    private func measureLatency(on bench: BenchServer, trials: Int) async throws -> LatencyRound {
        var round = LatencyRound()
        let zoneID = RecordZone.ID(zoneName: "Latency")
        let phone = BenchDevice(container: bench.container(device: "phone"))
        let laptop = BenchDevice(container: bench.container(device: "laptop"))
        _ = try await phone.container.privateCloudDatabase.save(RecordZone(zoneID: zoneID))
        let phoneEngine = try SyncEngine(
            SyncEngine.Configuration(database: phone.container.privateCloudDatabase, stateSerialization: nil, delegate: phone))
        let laptopEngine = try SyncEngine(
            SyncEngine.Configuration(database: laptop.container.privateCloudDatabase, stateSerialization: nil, delegate: laptop))

        // Both engines have subscribed and listen once an edit made now reaches the other device.
        progress("sync latency: waiting for both engines to listen")
        for attempt in 0..<100 {
            let recordID = Record.ID(recordName: "warm-up-\(attempt)", zoneID: zoneID)
            let arrival = laptop.expect(recordID)
            phone.set(recordID, value: attempt)
            phoneEngine.state.add(pendingRecordZoneChanges: [.saveRecord(recordID)])
            if await arrival.wait(timeout: .seconds(1)) != nil { break }
        }

        progress("sync latency: \(trials) edits through the engines and \(trials) by hand, alternating")
        let database = phone.container.privateCloudDatabase
        let notifications = laptop.container.notifications()
        var listener = notifications.makeAsyncIterator()
        _ = try await database.save(Subscription.recordZone(zoneID: zoneID, subscriptionID: "bench-baseline"))
        var token = try await laptop.container.privateCloudDatabase.recordZoneChanges(inZoneWith: zoneID, since: nil).changeToken
        var engine: [Double] = []
        var baseline: [Double] = []
        for trial in 0..<trials {
            let recordID = Record.ID(recordName: "edit-\(trial)", zoneID: zoneID)
            let arrival = laptop.expect(recordID)
            phone.set(recordID, value: trial)
            let start = ContinuousClock.now
            phoneEngine.state.add(pendingRecordZoneChanges: [.saveRecord(recordID)])
            guard let arrived = await arrival.wait(timeout: .seconds(10)) else {
                throw BenchError("edit \(trial) did not reach the other engine within 10 s")
            }
            engine.append(seconds(arrived - start))

            // The same trip by hand: save, wait for the push, read the zone's changes.
            var record = Record(recordType: "Edit", recordID: Record.ID(recordName: "manual-\(trial)", zoneID: zoneID))
            record["value"] = Int64(trial)
            let manualStart = ContinuousClock.now
            _ = try await database.save(record)
            var found = false
            while !found {
                guard try await listener.next() != nil else { throw BenchError("the push channel ended") }
                let changes = try await laptop.container.privateCloudDatabase.recordZoneChanges(inZoneWith: zoneID, since: token)
                token = changes.changeToken
                found = changes.modificationResultsByID[record.recordID] != nil
            }
            baseline.append(seconds(ContinuousClock.now - manualStart))
        }
        round.engineP50 = percentile(engine, 0.5) * 1000
        round.engineP99 = percentile(engine, 0.99) * 1000
        round.baselineP50 = percentile(baseline, 0.5) * 1000
        round.baselineP99 = percentile(baseline, 0.99) * 1000
        withExtendedLifetime((phoneEngine, laptopEngine)) {}
        return round
    }

    // MARK: - Initial sync

    /// A fresh engine fetching a zone of `records` records, beside the same pages read through the
    /// SDK, and read as raw HTTP requests with a byte scan (the server's rate), on the same server.
    func measureInitialSync(records: Int) async throws -> InitialSyncRound {
        let bench = try await BenchServer.start(durability: durability)
        do {
            let round = try await measureInitialSync(on: bench, records: records)
            try await bench.stop()
            return round
        } catch {
            try? await bench.stop()
            throw error
        }
    }

    private func measureInitialSync(on bench: BenchServer, records: Int) async throws -> InitialSyncRound {
        var round = InitialSyncRound(records: records)
        progress("initial sync: seeding \(records) records through storage")
        try await Self.seed(bench, zone: "Sync", records: records)

        progress("initial sync: raw change-feed read of \(records) records")
        let url = "\(bench.databaseURL())/records/changes\(bench.tokens)"
        var read = 0
        let rawSeconds = try await measure {
            var token: String?
            while true {
                var body = #"{"zoneID":{"zoneName":"Sync"}"#
                if let token { body += #","syncToken":"\#(token)""# }
                body += "}"
                let summary = FeedPageSummary(try await StratusBench.post(bench.http, url, Array(body.utf8)))
                read += summary.records
                token = summary.syncToken
                if !summary.moreComing { break }
            }
        }
        guard read == records else { throw BenchError("the raw feed listed \(read) records, expected \(records)") }
        round.rawRate = Double(records) / rawSeconds

        progress("initial sync: the same feed through the SDK")
        let sdk = bench.container(device: "sdk").privateCloudDatabase
        read = 0
        let sdkSeconds = try await measure {
            for try await page in sdk.recordZoneChangePages(inZoneWith: RecordZone.ID(zoneName: "Sync"), since: nil) {
                read += page.modificationResultsByID.count
            }
        }
        guard read == records else { throw BenchError("the SDK read \(read) records, expected \(records)") }
        round.sdkRate = Double(records) / sdkSeconds

        progress("initial sync: a fresh engine fetching \(records) records")
        let device = BenchDevice(container: bench.container(device: "fresh"))
        let engine = try SyncEngine(
            SyncEngine.Configuration(
                database: device.container.privateCloudDatabase, stateSerialization: nil, delegate: device,
                automaticallySync: false))
        let engineSeconds = try await measure { try await engine.fetchChanges() }
        guard device.fetchedCount == records else {
            throw BenchError("the engine fetched \(device.fetchedCount) records, expected \(records)")
        }
        round.engineRate = Double(records) / engineSeconds
        return round
    }

    /// Writes `records` notes into a new zone of the bench user's, straight through storage.
    static func seed(_ bench: BenchServer, zone: String, records: Int) async throws {
        _ = try await bench.storage.createZone(named: zone, in: bench.locator, timestamp: 0)
        let context = WriteContext(userRecordName: bench.userRecordName, timestamp: 1_700_000_000_000)
        for start in stride(from: 0, to: records, by: 1000) {
            let writes = (start..<min(start + 1000, records)).map {
                RecordWrite(operationType: .create, recordName: "n\($0)", recordType: "Note", fields: Workload.fields($0))
            }
            _ = try await bench.storage.modifyRecords(writes, zone: zone, in: bench.locator, atomic: true, context: context)
        }
    }

    private func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}

/// A device of the sync benchmark: it keeps the records to send, counts what it fetched, and
/// reports when an awaited record arrives.
final class BenchDevice: SyncEngineDelegate {
    let container: Container
    private let records = Mutex<[Record.ID: Record]>([:])
    private let fetched = Mutex(0)
    private let awaited = Mutex<[Record.ID: Arrival]>([:])

    init(container: Container) {
        self.container = container
    }

    var fetchedCount: Int { fetched.withLock { $0 } }

    /// Sets the value the device sends for `recordID`, as an `Edit` record.
    func set(_ recordID: Record.ID, value: Int) {
        var record = Record(recordType: "Edit", recordID: recordID)
        record["value"] = Int64(value)
        set(record)
    }

    /// Sets the record the device sends for its ID.
    func set(_ record: Record) {
        records.withLock { $0[record.recordID] = record }
    }

    /// Starts waiting for `recordID` to be fetched.
    func expect(_ recordID: Record.ID) -> Arrival {
        let arrival = Arrival()
        awaited.withLock { $0[recordID] = arrival }
        return arrival
    }

    func handleEvent(_ event: SyncEngine.Event, syncEngine: SyncEngine) async {
        guard case .fetchedRecordZoneChanges(let changes) = event else { return }
        let now = ContinuousClock.now
        fetched.withLock { $0 += changes.modifications.count }
        for modification in changes.modifications {
            awaited.withLock { $0.removeValue(forKey: modification.record.recordID) }?.arrive(at: now)
        }
    }

    func nextRecordZoneChangeBatch(
        _ context: SyncEngine.SendChangesContext, syncEngine: SyncEngine
    ) async -> SyncEngine.RecordZoneChangeBatch? {
        // The front of the queue, twice what a request holds by default (every record is at hand: none is skipped).
        let pending = syncEngine.state.pendingRecordZoneChanges(in: context.options.scope, limit: 400)
        return await SyncEngine.RecordZoneChangeBatch(pendingChanges: pending) { recordID in
            self.records.withLock { $0[recordID] }
        }
    }

    /// When an awaited record arrived.
    final class Arrival: Sendable {
        private let state = Mutex<(instant: ContinuousClock.Instant?, waiter: CheckedContinuation<ContinuousClock.Instant?, Never>?)>(
            (nil, nil))

        func arrive(at instant: ContinuousClock.Instant) {
            let waiter = state.withLock { state in
                state.instant = instant
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume(returning: instant)
        }

        /// The arrival time, or `nil` after `timeout`.
        func wait(timeout: Duration) async -> ContinuousClock.Instant? {
            let timer = Task { [self] in
                try? await Task.sleep(for: timeout)
                let waiter = state.withLock { state in
                    defer { state.waiter = nil }
                    return state.waiter
                }
                waiter?.resume(returning: nil)
            }
            defer { timer.cancel() }
            return await withCheckedContinuation { continuation in
                let arrived = state.withLock { state -> ContinuousClock.Instant?? in
                    if let instant = state.instant { return .some(instant) }
                    state.waiter = continuation
                    return .none
                }
                if case .some(let instant) = arrived { continuation.resume(returning: instant) }
            }
        }
    }
}

extension BenchServer {
    /// A container of the bench user on device `device`, retrying nothing, reaching the server at
    /// `url` (its own address by default; a relay's, for the shaped network).
    func container(device: String, url: String? = nil) -> Container {
        Container(
            identifier: credentials.container, serverURL: URL(string: url ?? server.baseURL)!, apiToken: credentials.apiToken,
            session: Container.Session(webAuthToken: webAuthToken, userRecordName: userRecordName, expirationDate: .distantFuture),
            configuration: Container.Configuration(deviceID: device))
    }
}
