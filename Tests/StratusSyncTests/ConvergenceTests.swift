import Foundation
import Stratus
import StratusSync
import StratusTestSupport
import Synchronization
import Testing

@Suite("sync engine: many devices")
struct ConvergenceTests {
    @Test("with automatic sync, an edit on one device reaches the other's delegate without any call to sync")
    func automaticSync() async throws {
        try await withServer(clientsInProcess: true) { server in
            let phone = try await ContactsDevice(
                "phone", container: try await server.signedInContainer("mei"), automaticallySync: true)
            let laptop = try await ContactsDevice(
                "laptop", container: try await server.device(of: "mei"), automaticallySync: true)

            await phone.createZone()
            await phone.save("ada", "Ada Byron")
            #expect(await eventually { await laptop.contacts["ada"] == "Ada Byron" })

            await laptop.save("ada", "Ada Lovelace")
            #expect(await eventually { await phone.contacts["ada"] == "Ada Lovelace" })

            await phone.delete("ada")
            #expect(await eventually { await laptop.contacts.isEmpty })
            let reasons = await laptop.events.compactMap { event -> SyncEngine.SyncReason? in
                if case .willFetchChanges(let fetch) = event { fetch.context.reason } else { nil }
            }
            #expect(!reasons.isEmpty && reasons.allSatisfy { $0 == .scheduled })
            #expect(await phone.engine.state.trackedRecordZoneChanges.isEmpty)
        }
    }

    @Test("5 devices × 500 random edits with offline periods and server restarts: every device ends equal to the server, and no acknowledged write is lost")
    func randomizedConvergence() async throws {
        var random = SplitMix64(seed: ProcessInfo.processInfo.environment["STRATUS_TEST_SEED"].flatMap(UInt64.init) ?? 2026)
        try await withServer(clientsInProcess: true) { started in
            var server = started
            let acknowledged = AcknowledgedWrites()
            let first = server.makeContainer(retryPolicy: RetryPolicy(maxAttempts: 2, initialBackoff: .milliseconds(5)))
            try await first.signUp(username: "mei", password: "correct horse")
            var devices: [ContactsDevice] = []
            for index in 0..<5 {
                let container =
                    index == 0
                    ? first : server.makeContainer(retryPolicy: RetryPolicy(maxAttempts: 2, initialBackoff: .milliseconds(5)))
                if index > 0 { try await container.signIn(username: "mei", password: "correct horse") }
                let device = try await ContactsDevice(
                    "device-\(index)", container: container, conflictPolicy: index.isMultiple(of: 2) ? .localWins : .serverWins)
                await device.observeEvents(acknowledged.record)
                devices.append(device)
            }
            await devices[0].createZone()
            try await devices[0].sendChanges()

            var offline = Set<Int>()
            var serverDown = false
            var edits = [Int](repeating: 0, count: devices.count)
            var step = 0
            while edits.contains(where: { $0 < 500 }) {
                step += 1
                let index = Int(random.next() % UInt64(devices.count))
                let device = devices[index]
                switch random.next() % 100 {
                case 0..<70 where edits[index] < 500:
                    edits[index] += 1
                    let recordName = "r\(random.next() % 30)"
                    if await device.contacts[recordName] != nil, random.next() % 4 == 0 {
                        await device.delete(recordName)
                    } else {
                        await device.save(recordName, "\(device.name) edit \(edits[index])")
                    }
                case 70..<82 where !offline.contains(index) && !serverDown:
                    try? await device.sendChanges()
                case 82..<94 where !offline.contains(index) && !serverDown:
                    try? await device.fetchChanges()
                case 94..<99:
                    // The device goes offline, or comes back.
                    if !offline.insert(index).inserted { offline.remove(index) }
                case 99 where !serverDown:
                    try await server.stop()
                    serverDown = true
                case 99:
                    server = try await server.restart()
                    serverDown = false
                default:
                    // A sync attempt while offline or while the server is down: it fails and keeps
                    // everything pending.
                    if serverDown { try? await device.sendChanges() }
                }
            }
            if serverDown { server = try await server.restart() }

            // Everyone comes online and syncs until nothing is pending anywhere.
            for _ in 0..<10 {
                for device in devices { try? await device.sendChanges() }
                for device in devices { try await device.fetchChanges() }
                var pending = 0
                for device in devices { pending += await device.engine.state.pendingRecordZoneChanges.count }
                if pending == 0 { break }
            }

            let observer = try await ContactsDevice("observer", container: try await server.device(of: "mei"))
            try await observer.fetchChanges()
            let onServer = await observer.contacts
            #expect(onServer == acknowledged.lastWrites(), "the server holds the last acknowledged write of every contact")
            for device in devices {
                #expect(await device.contacts == onServer, "\(device.name) equals the server")
                #expect(await device.engine.state.pendingRecordZoneChanges.isEmpty, "\(device.name) has nothing pending")
            }
            var conflicts = 0
            for device in devices {
                conflicts += await device.sentRecordZoneChanges.flatMap(\.failedRecordSaves).filter { $0.error.code == .serverRecordChanged }.count
            }
            #expect(conflicts > 50, "the devices ran into each other's edits (\(conflicts) conflicts)")
            #expect(acknowledged.count > 500, "the devices wrote to the server throughout (\(step) steps)")
        }
    }
}

/// The writes the server acknowledged, in the order it did: the devices take turns, so the order
/// the events arrive in is the order the server applied the writes.
final class AcknowledgedWrites: Sendable {
    private let writes = Mutex<[(recordName: String, value: String?)]>([])

    var count: Int { writes.withLock { $0.count } }

    /// Notes the saves and deletes an event reports as done.
    @Sendable func record(_ event: SyncEngine.Event) {
        guard case .sentRecordZoneChanges(let sent) = event else { return }
        writes.withLock { writes in
            for record in sent.savedRecords {
                writes.append((record.recordID.recordName, record["name", as: String.self]))
            }
            for recordID in sent.deletedRecordIDs { writes.append((recordID.recordName, nil)) }
        }
    }

    /// Each contact's value after the last acknowledged write; deleted contacts are absent.
    func lastWrites() -> [String: String] {
        var last: [String: String] = [:]
        for write in writes.withLock({ $0 }) { last[write.recordName] = write.value }
        return last
    }
}
