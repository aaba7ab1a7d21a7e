import Foundation
import Stratus
import StratusServer
import StratusStorage
import StratusSync
import StratusTestSupport
import Synchronization
import Testing

@Suite("sync engine: failures, accounts and what the state reports")
struct FailureTests {
    @Test("a throttled send keeps the rest pending until the server's retryAfter, reports it, and finishes on the next send")
    func throttling() async throws {
        // One request every two seconds on a server whose time moves only when the test moves it:
        // the zone goes out, the first batch right after it is throttled.
        let serverTime = ManualClock()
        var configuration = ServerConfiguration(port: 0, passwordHashCost: 4, clock: serverTime.serverClock)
        configuration.rateLimit = RateLimit(requestsPerSecond: 0.5, burst: 1)
        try await withServer(configuration) { server in
            let container = server.makeContainer(retryPolicy: .never)
            try await container.signUp(username: "mei", password: "correct horse")
            serverTime.advance(bySeconds: 2)
            _ = try await container.serverLimits()  // read once, before the engine's first send
            serverTime.advance(bySeconds: 2)
            let phone = try await ContactsDevice("phone", container: container)
            await phone.createZone()
            for index in 0..<444 { await phone.save("contact-\(index)", "Person \(index)") }

            let sendStarted = Date()
            let error = await #expect(throws: CloudError.self) { try await phone.sendChanges() }
            #expect(error?.code == .requestRateLimited)
            let tracked = await phone.engine.state.trackedRecordZoneChanges
            let waiting = tracked.compactMap { change -> (CloudError, Date)? in
                if case .waitingToRetry(let error, let retryDate) = change.status { (error, retryDate) } else { nil }
            }
            #expect(!waiting.isEmpty, "the throttled records wait to be retried")
            // The server asked for two seconds; the retry date lies that far after the failure.
            #expect(waiting.allSatisfy { $0.0.code == .requestRateLimited && $0.1 >= sendStarted.addingTimeInterval(1) })
            let untried = tracked.filter { if case .pending = $0.status { true } else { false } }
            #expect(tracked.count == waiting.count + untried.count, "nothing failed for good")
            let reported = await phone.sentRecordZoneChanges.flatMap(\.failedRecordSaves)
            #expect(reported.count == waiting.count)
            #expect(reported.allSatisfy { $0.error.code == .requestRateLimited && $0.error.retryAfterSeconds != nil })

            // Sending again each time the server allows it finishes the job: one batch per request.
            var sends = 0
            while await !phone.engine.state.pendingRecordZoneChanges.isEmpty, sends < 10 {
                serverTime.advance(bySeconds: 2)
                try? await phone.sendChanges()
                sends += 1
            }
            #expect(await phone.engine.state.trackedRecordZoneChanges.isEmpty)
            let laptop = try await ContactsDevice(
                "laptop", container: server.makeContainer(session: container.session, clock: SteppingClock(moving: serverTime)))
            try await laptop.fetchChanges()
            #expect(await laptop.contacts.count == 444)
        }
    }

    @Test("the server going away in the middle of a send keeps the unsent changes pending; they go out once it is back")
    func networkFailureMidSend() async throws {
        try await withServer { server in
            let container = server.makeContainer(retryPolicy: RetryPolicy(maxAttempts: 2, initialBackoff: .milliseconds(10)))
            let transport = ThrottlingTransport(container.privateCloudDatabase, refusing: 0, retryAfterSeconds: 0)
            let phone = try await ContactsDevice("phone", container: container) { $0.transport = transport }
            try await phone.container.signUp(username: "mei", password: "correct horse")
            await phone.createZone()
            for index in 0..<444 { await phone.save("contact-\(index)", "Person \(index)") }
            // The second batch is made while the first is on its way: the server stops once it
            // answered the first, before the second goes out, however fast the machine.
            await phone.setBeforeBatch { batch in
                guard batch == 2 else { return }
                _ = await EngineClockTests.eventually { transport.answeredWrites.load(ordering: .sequentiallyConsistent) == 1 }
                try? await server.stop()
            }

            let error = await #expect(throws: CloudError.self) { try await phone.sendChanges() }
            #expect(error?.isTransient == true)
            let sent = await phone.sentRecordZoneChanges
            #expect(sent.first?.savedRecords.count == 200)
            #expect(sent.last?.failedRecordSaves.count == 200)
            #expect(await phone.engine.state.pendingRecordZoneChanges.count == 244)

            let restarted = try await server.restart()
            try await phone.sendChanges()
            #expect(await phone.engine.state.trackedRecordZoneChanges.isEmpty)
            let laptop = try await ContactsDevice("laptop", container: try await restarted.device(of: "mei"))
            try await laptop.fetchChanges()
            #expect(await laptop.contacts == phone.contacts)
            #expect(await laptop.contacts.count == 444)
        }
    }

    @Test("an edit made while its previous version is on its way stays pending and goes out in the next batch")
    func editWhileInFlight() async throws {
        try await withServer { server in
            let phone = try await ContactsDevice("phone", container: try await server.signedInContainer("mei"))
            await phone.createZone()
            await phone.save("ada", "Ada Byron")
            await phone.setEditWhileSending("ada", "Ada Lovelace")
            try await phone.sendChanges()
            // The first batch's confirmation did not clear the newer edit: the next batch sent it.
            let saved = await phone.sentRecordZoneChanges.map { $0.savedRecords.map { $0["name", as: String.self] } }
            #expect(saved == [["Ada Byron"], ["Ada Lovelace"]])
            #expect(try await server.value(of: "ada", in: phone) == "Ada Lovelace")
            #expect(await phone.engine.state.pendingRecordZoneChanges.isEmpty)
        }
    }

    @Test("the state reports each change pending, in flight, or refused with its error, until the app acts on it")
    func statusReport() async throws {
        // The phone's second request (its first batch) is throttled and retried by the SDK, which
        // keeps the batch in flight for two seconds whatever the machine's load.
        var configuration = ServerConfiguration(port: 0, passwordHashCost: 4)
        configuration.rateLimit = RateLimit(requestsPerSecond: 0.5, burst: 1)
        try await withServer(configuration) { server in
            let phone = try await ContactsDevice("phone", container: try await server.signedInContainer("mei"))
            let laptop = try await ContactsDevice("laptop", container: try await server.device(of: "mei"))
            await phone.createZone()
            await phone.save("ada", "Ada")
            let change = SyncEngine.PendingRecordZoneChange.saveRecord(ContactsDevice.recordID("ada"))
            guard case .pending? = await phone.engine.state.status(of: change) else {
                Issue.record("a new change is pending")
                return
            }

            // Seen from another task while the send runs: in flight.
            let state = await phone.engine.state
            let sawInFlight = Task {
                let deadline = ContinuousClock.now + .seconds(20)
                while ContinuousClock.now < deadline {
                    if case .inFlight? = state.status(of: change) { return true }
                    try? await Task.sleep(for: .milliseconds(5))
                }
                return false
            }
            try await phone.sendChanges()
            #expect(await sawInFlight.value)
            #expect(await phone.engine.state.status(of: change) == nil, "a confirmed change is no longer tracked")

            // The laptop's stale save is refused; its delegate keeps the server's value and does not
            // send again, so the refusal stays on record.
            await laptop.save("ada", "Ada from the laptop")
            await #expect(throws: CloudError.self) { try await laptop.sendChanges() }
            guard case .failed(let error)? = await laptop.engine.state.status(of: change) else {
                Issue.record("a refused change is reported as failed")
                return
            }
            #expect(error.code == .serverRecordChanged)
            #expect(await laptop.engine.state.pendingRecordZoneChanges.isEmpty)
            #expect(await laptop.engine.state.trackedRecordZoneChanges.count == 1)

            // Adding it again clears the failure.
            await laptop.save("ada", "Ada, merged")
            guard case .pending? = await laptop.engine.state.status(of: change) else {
                Issue.record("a change added again is pending")
                return
            }
            try await laptop.sendChanges()
            #expect(await laptop.engine.state.trackedRecordZoneChanges.isEmpty)
        }
    }

    @Test("a save past the user's quota fails with quotaExceeded, is reported and not sent again by itself; once room is made the app adds it again")
    func quotaExceeded() async throws {
        var configuration = ServerConfiguration(port: 0, passwordHashCost: 4)
        configuration.quotas = Quotas(perUser: StorageQuota(records: 2))
        try await withServer(configuration) { server in
            let phone = try await ContactsDevice("phone", container: try await server.signedInContainer("mei"))
            await phone.createZone()
            for name in ["ada", "bob", "cy"] { await phone.save(name, name.capitalized) }
            // The zone's batch is atomic: the refused save fails it, its innocent members go in the next send.
            for _ in 0..<3 { try? await phone.sendChanges() }
            let cy = SyncEngine.PendingRecordZoneChange.saveRecord(ContactsDevice.recordID("cy"))
            guard case .failed(let error)? = await phone.engine.state.status(of: cy) else {
                Issue.record("the save past the quota is reported as failed: \(String(describing: await phone.engine.state.status(of: cy)))")
                return
            }
            #expect(error.code == .quotaExceeded && !error.keepsChangesPending)
            #expect(await phone.engine.state.pendingRecordZoneChanges.isEmpty, "nothing is left to send by itself")
            let reported = await phone.sentRecordZoneChanges.flatMap(\.failedRecordSaves)
            #expect(reported.contains { $0.record.recordID.recordName == "cy" && $0.error.code == .quotaExceeded })
            #expect(try await server.value(of: "ada", in: phone) == "Ada")
            #expect(try await server.value(of: "bob", in: phone) == "Bob")
            // Sending again sends nothing: the refusal is the app's to act on.
            let sends = await phone.sentRecordZoneChanges.count
            try await phone.sendChanges()
            #expect(await phone.sentRecordZoneChanges.count == sends)

            // Room made, the app adds the change again and it goes out.
            await phone.delete("bob")
            try await phone.sendChanges()
            await phone.save("cy", "Cy")
            try await phone.sendChanges()
            #expect(try await server.value(of: "cy", in: phone) == "Cy")
            #expect(await phone.engine.state.trackedRecordZoneChanges.isEmpty)
        }
    }

    @Test("signing out, in and switching accounts reset the state and are reported; one user never sees another's contacts")
    func accountChanges() async throws {
        try await withServer { server in
            let container = try await server.signedInContainer("mei")
            let phone = try await ContactsDevice("phone", container: container)
            await phone.createZone()
            await phone.save("ada", "Ada")
            try await phone.sendChanges()
            let mei = try #require(container.session?.userRecordName)

            // Sign out: the next sync reports it, resets the state and fails for want of a user.
            try await container.signOut()
            await phone.save("alan", "Alan")
            await phone.clearEvents()
            let error = await #expect(throws: CloudError.self) { try await phone.fetchChanges() }
            #expect(error?.code == .notAuthenticated)
            #expect(await phone.accountChanges == [.signOut(previousUser: Record.ID(recordName: mei))])
            #expect(await phone.contacts.isEmpty)
            #expect(await phone.engine.state.pendingRecordZoneChanges.isEmpty)
            // Alan was mei's edit, made before the engine saw her sign out: kept for her.
            #expect(
                await phone.engine.state.parkedRecordZoneChanges(ofUser: Record.ID(recordName: mei))
                    == [.saveRecord(ContactsDevice.recordID("alan"))])

            // Another user signs in: reported as a sign-in; changes made meanwhile go to them.
            await phone.save("grace", "Grace")
            _ = try await container.signUp(username: "lin", password: "correct horse")
            let lin = try #require(container.session?.userRecordName)
            try await phone.fetchChanges()
            #expect(await phone.accountChanges.last == .signIn(currentUser: Record.ID(recordName: lin)))
            try await phone.sendChanges()
            #expect(await phone.contacts == ["grace": "Grace"], "lin's device holds only lin's contacts")
            #expect(try await server.value(of: "grace", in: phone) == "Grace")

            // Switching straight to mei again: reported as a switch; mei's data comes back, lin's is gone.
            _ = try await container.signIn(username: "mei", password: "correct horse")
            try await phone.fetchChanges()
            #expect(
                await phone.accountChanges.last
                    == .switchAccounts(previousUser: Record.ID(recordName: lin), currentUser: Record.ID(recordName: mei)))
            #expect(await phone.engine.state.pendingRecordZoneChanges == [.saveRecord(ContactsDevice.recordID("alan"))])
            #expect(await phone.contacts == ["ada": "Ada", "alan": "Alan"])
            try await phone.sendChanges()
            #expect(try await server.value(of: "alan", in: phone) == "Alan", "mei's offline edit reached mei's account")
            let linsLaptop = try await ContactsDevice("laptop", container: try await server.device(of: "lin"))
            try await linsLaptop.fetchChanges()
            #expect(await linsLaptop.contacts == ["grace": "Grace"], "and never lin's")
        }
    }

    @Test("pending changes added with a journal survive the engine's process ending before the state was persisted")
    func journalKeepsPendingChanges() async throws {
        try await withServer { server in
            let container = try await server.signedInContainer("mei")
            let journal = server.directory.appendingPathComponent("phone/journal")
            var phone: ContactsDevice? = try await ContactsDevice("phone", container: container, journalURL: journal)
            await phone?.createZone()
            await phone?.save("ada", "Ada")
            await phone?.save("alan", "Alan")
            await phone?.delete("alan")
            #expect(await phone?.stateSerialization == nil, "no state was handed over")
            phone = nil

            let engine = try SyncEngine(
                SyncEngine.Configuration(
                    database: container.privateCloudDatabase, stateSerialization: nil, delegate: NoDelegate(),
                    automaticallySync: false, journalURL: journal))
            #expect(
                engine.state.pendingRecordZoneChanges == [
                    .saveRecord(ContactsDevice.recordID("ada")), .deleteRecord(ContactsDevice.recordID("alan")),
                ])
            #expect(engine.state.pendingDatabaseChanges == [.saveZone(RecordZone(zoneID: ContactsDevice.zoneID))])
        }
    }

    @Test("another account signing in while a send goes on receives none of the previous account's records")
    func switchDuringSend() async throws {
        try await withServer { server in
            let container = try await server.signedInContainer("mei")
            let mei = try #require(container.session?.userRecordName)
            let lin = try #require(try await server.signedInContainer("lin").session?.userRecordName)
            let phone = try await ContactsDevice("phone", container: container)
            await phone.createZone()
            for index in 0..<444 { await phone.save("contact-\(index)", "Person \(index)") }
            // The second batch is made while the first is on its way; lin signs in meanwhile.
            await phone.setBeforeBatch { batch in
                if batch == 2 { _ = try? await container.signIn(username: "lin", password: "correct horse") }
            }
            let error = await #expect(throws: CloudError.self) { try await phone.sendChanges() }
            #expect(error?.code == .operationCancelled, "\(String(describing: error))")
            #expect(
                await phone.accountChanges.last
                    == .switchAccounts(previousUser: Record.ID(recordName: mei), currentUser: Record.ID(recordName: lin)))

            let linsLaptop = try await ContactsDevice("laptop", container: try await server.device(of: "lin"))
            try await linsLaptop.fetchChanges()
            #expect(await linsLaptop.contacts.isEmpty, "lin's account holds none of mei's contacts")
            let meisLaptop = try await ContactsDevice("laptop", container: try await server.device(of: "mei"))
            try await meisLaptop.fetchChanges()
            #expect(await meisLaptop.contacts.count == 200, "the batch sent before the switch is mei's")
        }
    }

    @Test("untracked changes the app reports while the delegate is asked for a batch stay reported for the next send")
    func untrackedChangesDuringSend() async throws {
        try await withServer { server in
            let container = try await server.signedInContainer("mei")
            let delegate = UntrackedDuringBatch()
            let engine = try SyncEngine(
                SyncEngine.Configuration(
                    database: container.privateCloudDatabase, stateSerialization: nil, delegate: delegate,
                    automaticallySync: false))
            engine.state.hasPendingUntrackedChanges = true
            try await engine.sendChanges()
            #expect(engine.state.hasPendingUntrackedChanges, "the app reported more while the delegate was answering")
            try await engine.sendChanges()
            #expect(!engine.state.hasPendingUntrackedChanges)
        }
    }

    @Test("a device whose token expired hears of the deletions the server no longer remembers")
    func deletionsAfterExpiredToken() async throws {
        try await withServer { server in
            let phone = try await ContactsDevice("phone", container: try await server.signedInContainer("mei"))
            let laptop = try await ContactsDevice("laptop", container: try await server.device(of: "mei"))
            await phone.createZone()
            for name in ["ada", "alan", "grace"] { await phone.save(name, name.capitalized) }
            try await phone.sendChanges()
            try await laptop.fetchChanges()
            #expect(await laptop.contacts.count == 3)

            // Away, the laptop misses a deletion whose tombstone is then purged.
            await phone.delete("alan")
            await phone.save("linus", "Linus")
            try await phone.sendChanges()
            _ = try await server.storage.purgeTombstones(before: Int64(Date().timeIntervalSince1970 * 1000) + 60_000)
            try await laptop.fetchChanges()
            #expect(await laptop.contacts == ["ada": "Ada", "grace": "Grace", "linus": "Linus"])

            // The same for the database feed: a zone deleted and purged meanwhile.
            await phone.deleteZone()
            try await phone.sendChanges()
            _ = try await server.storage.purgeTombstones(before: Int64(Date().timeIntervalSince1970 * 1000) + 60_000)
            try await laptop.fetchChanges()
            #expect(await laptop.contacts.isEmpty)
        }
    }

    /// An engine of `container`'s private database with no delegate, syncing only when told, journaling to `journal`.
    static func journaledEngine(_ container: Container, journal: URL) throws -> SyncEngine {
        try SyncEngine(
            SyncEngine.Configuration(
                database: container.privateCloudDatabase, stateSerialization: nil, delegate: NoDelegate(),
                automaticallySync: false, journalURL: journal))
    }

    @Test("a second engine on a journal another one has open is refused, saying why; once the first is released the journal opens")
    func oneEnginePerJournal() async throws {
        try await withServer { server in
            let container = try await server.signedInContainer("mei")
            let journal = server.directory.appendingPathComponent("phone/journal")
            func engine() throws -> SyncEngine { try Self.journaledEngine(container, journal: journal) }
            var first: SyncEngine? = try engine()
            first?.state.add(pendingRecordZoneChanges: [.saveRecord(ContactsDevice.recordID("ada"))])
            let refused = #expect(throws: CloudError.self) { try engine() }
            #expect(refused?.code == .invalidArguments && refused?.message.contains("in use by another sync engine") == true)
            first = nil
            #expect(try engine().state.pendingRecordZoneChanges == [.saveRecord(ContactsDevice.recordID("ada"))])
        }
    }

    @Test("a journal line cut short by a crash does not swallow the next change")
    func tornJournalLine() async throws {
        try await withServer { server in
            let container = try await server.signedInContainer("mei")
            let journal = server.directory.appendingPathComponent("phone/journal")
            func engine() throws -> SyncEngine { try Self.journaledEngine(container, journal: journal) }
            try engine().state.add(pendingRecordZoneChanges: [.saveRecord(ContactsDevice.recordID("ada"))])
            let torn = try FileHandle(forWritingTo: journal)
            try torn.seekToEnd()
            try torn.write(contentsOf: Data(#"{"sequence":2,"operation":{"addRec"#.utf8))
            try torn.close()
            try engine().state.add(pendingRecordZoneChanges: [.saveRecord(ContactsDevice.recordID("bob"))])
            #expect(
                try engine().state.pendingRecordZoneChanges == [
                    .saveRecord(ContactsDevice.recordID("ada")), .saveRecord(ContactsDevice.recordID("bob")),
                ])
        }
    }
}

extension ContactsDevice {
    /// The account changes reported so far.
    var accountChanges: [SyncEngine.Event.AccountChange.ChangeType] {
        events.compactMap { if case .accountChange(let change) = $0 { change.changeType } else { nil } }
    }
}

/// A delegate with nothing to send that, the first time it is asked, hears from the app of more
/// untracked changes just before it answers.
final class UntrackedDuringBatch: SyncEngineDelegate {
    private let first = Mutex(true)

    func handleEvent(_ event: SyncEngine.Event, syncEngine: SyncEngine) async {}

    func nextRecordZoneChangeBatch(
        _ context: SyncEngine.SendChangesContext, syncEngine: SyncEngine
    ) async -> SyncEngine.RecordZoneChangeBatch? {
        if first.withLock({ first in defer { first = false }; return first }) {
            syncEngine.state.hasPendingUntrackedChanges = true
        }
        return nil
    }
}

/// A delegate with nothing to send, that ignores events.
final class NoDelegate: SyncEngineDelegate {
    func handleEvent(_ event: SyncEngine.Event, syncEngine: SyncEngine) async {}

    func nextRecordZoneChangeBatch(
        _ context: SyncEngine.SendChangesContext, syncEngine: SyncEngine
    ) async -> SyncEngine.RecordZoneChangeBatch? { nil }
}
