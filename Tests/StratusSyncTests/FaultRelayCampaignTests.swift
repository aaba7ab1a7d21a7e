import Foundation
import Stratus
import StratusSync
import StratusTestSupport
import Synchronization
import Testing

/// The fault-relay campaign of docs/reliability.md: sync engines on several devices edit one
/// user's contacts through a ``FaultRelay`` that loses requests and answers, truncates and delays
/// answers and injects `429`/`503`, while devices go offline and come back. Afterwards every device
/// equals the server, and no edit is lost under the engine's merge rules: each contact holds its
/// last acknowledged value, or a later edit whose answer the relay lost.
///
/// `scripts/test` runs 4 devices and 300 operations; `scripts/campaign faults` runs 10 devices and
/// `STRATUS_CAMPAIGN_OPERATIONS` (10,000) operations.
@Suite("campaign: sync engines through a faulty relay")
struct FaultRelayCampaignTests {
    @Test("devices converge to the server through lost, cut, delayed and refused exchanges, and no edit is lost")
    func faultyNetwork() async throws {
        let environment = ProcessInfo.processInfo.environment
        let operations = environment["STRATUS_CAMPAIGN_OPERATIONS"].flatMap(Int.init) ?? 300
        let deviceCount = environment["STRATUS_CAMPAIGN_OPERATIONS"] == nil ? 4 : 10
        let seed = environment["STRATUS_TEST_SEED"].flatMap(UInt64.init) ?? 20_261_124
        var random = SplitMix64(seed: seed)
        var faults = FaultRelay.Faults()
        faults.loseRequest = 0.03
        faults.loseAnswer = 0.05
        faults.truncateAnswer = 0.03
        faults.delay = 0.1
        faults.maxDelay = .milliseconds(50)
        faults.throttle = 0.02
        faults.unavailable = 0.02

        try await withServer { server in
            let relay = try FaultRelay(
                upstreamPort: try #require(URL(string: server.baseURL)?.port), faults: .none, seed: seed)
            defer { relay.stop() }
            let relayURL = URL(string: "http://127.0.0.1:\(relay.port)")!
            let history = EditHistory()
            var devices: [ContactsDevice] = []
            for index in 0..<deviceCount {
                let container = server.makeContainer(
                    device: "device-\(index)", retryPolicy: RetryPolicy(maxAttempts: 4, initialBackoff: .milliseconds(5)),
                    serverURL: relayURL)
                if index == 0 {
                    try await container.signUp(username: "mei", password: "correct horse")
                } else {
                    try await container.signIn(username: "mei", password: "correct horse")
                }
                let device = try await ContactsDevice(
                    "device-\(index)", container: container, conflictPolicy: index.isMultiple(of: 2) ? .localWins : .serverWins)
                await device.observeEvents(history.record)
                devices.append(device)
            }
            await devices[0].createZone()
            try await devices[0].sendChanges()
            relay.setFaults(faults)

            var offline = Set<Int>()
            var failedSyncs = 0
            for step in 0..<operations {
                let index = Int(random.next() % UInt64(devices.count))
                let device = devices[index]
                switch random.next() % 100 {
                case 0..<60:
                    let recordName = "r\(random.next() % 40)"
                    if await device.contacts[recordName] != nil, random.next() % 4 == 0 {
                        history.edit(recordName, nil)
                        await device.delete(recordName)
                    } else {
                        let value = "\(device.name) edit \(step)"
                        history.edit(recordName, value)
                        await device.save(recordName, value)
                    }
                case 60..<78 where !offline.contains(index):
                    do { try await device.sendChanges() } catch { failedSyncs += 1 }
                case 78..<96 where !offline.contains(index):
                    do { try await device.fetchChanges() } catch { failedSyncs += 1 }
                case 96..<100:
                    if !offline.insert(index).inserted { offline.remove(index) }
                default:
                    break
                }
            }
            let counts = relay.counts

            // The network heals; everyone syncs until nothing is pending anywhere.
            relay.setFaults(.none)
            for _ in 0..<20 {
                for device in devices { try? await device.sendChanges() }
                for device in devices { try? await device.fetchChanges() }
                var pending = 0
                for device in devices { pending += await device.engine.state.pendingRecordZoneChanges.count }
                if pending == 0 { break }
            }
            for device in devices { try await device.fetchChanges() }

            let observer = try await ContactsDevice("observer", container: try await server.device(of: "mei"))
            try await observer.fetchChanges()
            let onServer = await observer.contacts
            for device in devices {
                #expect(await device.contacts == onServer, "\(device.name) equals the server")
                #expect(await device.engine.state.pendingRecordZoneChanges.isEmpty, "\(device.name) has nothing pending")
            }
            let lost = history.lostEdits(onServer: onServer)
            #expect(lost.isEmpty, "edits lost: \(lost.prefix(5))")
            print(
                "fault relay: \(deviceCount) devices, \(operations) operations, \(history.acknowledgedCount) writes acknowledged, "
                    + "\(failedSyncs) syncs failed; relay: \(counts); \(onServer.count) contacts on the server")
            #expect(counts.lostAnswers > 0 && counts.unavailable + counts.throttled > 0, "the relay misbehaved: \(counts)")
            #expect(history.acknowledgedCount > operations / 10, "the devices wrote to the server throughout")
        }
    }
}

/// Every local edit and every write the server acknowledged, on one clock, so that the final state
/// can be judged: a contact must hold its last acknowledged value, or the value of an edit made
/// after that acknowledgement whose own answer never arrived (the server applied it, the relay lost
/// the answer). Values are unique (they name the device and the step), deletions are `nil`.
final class EditHistory: Sendable {
    private struct State {
        var clock = 0
        /// Local edits: record name → (value, when).
        var edits: [String: [(value: String?, at: Int)]] = [:]
        /// Acknowledged writes: record name → (value, when), in the order they were acknowledged.
        var acknowledged: [String: [(value: String?, at: Int)]] = [:]
        var acknowledgedCount = 0
    }

    private let state = Mutex(State())

    var acknowledgedCount: Int { state.withLock { $0.acknowledgedCount } }

    func edit(_ recordName: String, _ value: String?) {
        state.withLock { state in
            state.clock += 1
            state.edits[recordName, default: []].append((value, state.clock))
        }
    }

    @Sendable func record(_ event: SyncEngine.Event) {
        guard case .sentRecordZoneChanges(let sent) = event else { return }
        state.withLock { state in
            for record in sent.savedRecords {
                state.clock += 1
                state.acknowledged[record.recordID.recordName, default: []].append((record["name", as: String.self], state.clock))
                state.acknowledgedCount += 1
            }
            for recordID in sent.deletedRecordIDs {
                state.clock += 1
                state.acknowledged[recordID.recordName, default: []].append((nil, state.clock))
                state.acknowledgedCount += 1
            }
        }
    }

    /// The contacts whose value on the server neither is their last acknowledged value nor comes
    /// from an edit made after it.
    func lostEdits(onServer: [String: String]) -> [String] {
        state.withLock { state in
            let names = Set(state.edits.keys).union(onServer.keys)
            return names.sorted().compactMap { name in
                let value = onServer[name]
                let last = state.acknowledged[name]?.last
                if let last, last.value == value { return nil }
                let since = last?.at ?? 0
                if last == nil && value == nil { return nil }
                let laterEdit = state.edits[name, default: []].contains { $0.at > since && $0.value == value }
                return laterEdit ? nil : "\(name): server \(value ?? "absent"), last acknowledged \(last.map { $0.value ?? "deleted" } ?? "none")"
            }
        }
    }
}
