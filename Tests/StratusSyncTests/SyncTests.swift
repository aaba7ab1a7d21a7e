import Foundation
import Stratus
import StratusSync
import StratusTestSupport
import Synchronization
import Testing

@Suite("sync engine: two devices, manual sync")
struct SyncTests {
    /// Two devices of one user, each with an engine that syncs only when told to.
    func twoDevices(_ server: TestServer) async throws -> (ContactsDevice, ContactsDevice) {
        let phone = try await ContactsDevice("phone", container: try await server.signedInContainer("mei"))
        let laptop = try await ContactsDevice("laptop", container: try await server.device(of: "mei"))
        return (phone, laptop)
    }

    @Test("seed 004's conflict: B's send fails with serverRecordChanged, and after B's merge both devices hold the server's value")
    func conflictServerWins() async throws {
        try await withServer(clientsInProcess: true) { server in
            let (deviceA, deviceB) = try await twoDevices(server)
            await deviceA.createZone()
            await deviceA.save("value", "A")
            try await deviceA.sendChanges()

            await deviceB.createZone()
            await deviceB.save("value", "B")
            let error = await #expect(throws: CloudError.self) { try await deviceB.sendChanges() }
            #expect(error?.code == .partialFailure)
            #expect(error?.partialErrorsByItemID?[.record(ContactsDevice.recordID("value"))]?.code == .serverRecordChanged)
            #expect(await deviceB.contacts["value"] == "A")
            #expect(await deviceB.engine.state.pendingRecordZoneChanges.isEmpty)

            try await deviceA.fetchChanges()
            try await deviceB.fetchChanges()
            #expect(await deviceA.contacts["value"] == "A")
            #expect(await deviceB.contacts["value"] == "A")
            #expect(try await server.value(of: "value", in: deviceA) == "A")
        }
    }

    @Test("a conflict the delegate resolves for the local value: the merged record goes out in the same send and reaches the other device")
    func conflictLocalWins() async throws {
        try await withServer(clientsInProcess: true) { server in
            let (deviceA, deviceB) = try await twoDevices(server)
            await deviceA.createZone()
            await deviceA.save("value", "A")
            try await deviceA.sendChanges()

            await deviceB.setConflictPolicy(.localWins)
            await deviceB.createZone()
            await deviceB.save("value", "B")
            await #expect(throws: CloudError.self) { try await deviceB.sendChanges() }
            let sent = await deviceB.sentRecordZoneChanges
            #expect(sent.map(\.failedRecordSaves.count) == [1, 0])
            #expect(sent.map(\.savedRecords.count) == [0, 1])
            #expect(await deviceB.engine.state.pendingRecordZoneChanges.isEmpty)

            try await deviceA.fetchChanges()
            #expect(await deviceA.contacts["value"] == "B")
            #expect(try await server.value(of: "value", in: deviceA) == "B")
        }
    }

    @Test("1, 10 and 444 contacts reach the other device, in batches within the server's limit", arguments: [1, 10, 444])
    func counts(count: Int) async throws {
        try await withServer(clientsInProcess: true) { server in
            let (phone, laptop) = try await twoDevices(server)
            await phone.createZone()
            for index in 0..<count { await phone.save("contact-\(index)", "Person \(index)") }
            try await phone.sendChanges()
            #expect(await phone.engine.state.pendingRecordZoneChanges.isEmpty)
            #expect(await phone.engine.state.pendingDatabaseChanges.isEmpty)
            let batches = await phone.sentRecordZoneChanges.map(\.savedRecords.count)
            let limit = try await phone.container.serverLimits().maxOperationsPerRequest
            #expect(batches.reduce(0, +) == count)
            #expect(batches.allSatisfy { $0 <= limit })
            #expect(batches.count == (count + limit - 1) / limit)

            try await laptop.fetchChanges()
            #expect(await laptop.contacts == phone.contacts)
            #expect(await laptop.contacts.count == count)
        }
    }

    @Test("the next batch is prepared while one is on the way, without its records; an edit made meanwhile goes out after its answer, without a conflict")
    func batchPreparedWhileOneIsOnTheWay() async throws {
        try await withServer(clientsInProcess: true) { server in
            let (phone, laptop) = try await twoDevices(server)
            await phone.createZone()
            for index in 0..<450 { await phone.save("contact-\(index)", "Person \(index)") }
            let seenWhilePreparingSecond = Mutex<(reported: Int, front: [SyncEngine.PendingRecordZoneChange])?>(nil)
            await phone.setBeforeBatch { batch in
                guard batch == 2 else { return }
                // The first batch is on the way: its answer is not reported yet, and an edit of one
                // of its records must wait for that answer.
                await phone.save("contact-0", "Edited")
                let reported = await phone.sentRecordZoneChanges.count
                let front = await phone.engine.state.pendingRecordZoneChanges(in: .all, limit: 1_000)
                seenWhilePreparingSecond.withLock { $0 = (reported, front) }
            }
            try await phone.sendChanges()

            let seen = try #require(seenWhilePreparingSecond.withLock { $0 })
            #expect(seen.reported == 0)
            #expect(seen.front.count == 250)
            #expect(seen.front.first { $0.recordID.recordName == "contact-0" } == nil)
            let sent = await phone.sentRecordZoneChanges
            #expect(sent.allSatisfy { $0.failedRecordSaves.isEmpty })
            let saved = sent.flatMap { $0.savedRecords.map(\.recordID.recordName) }
            #expect(saved.count == 451)
            #expect(Set(saved).count == 450)
            #expect(saved.filter { $0 == "contact-0" }.count == 2)
            #expect(await phone.engine.state.trackedRecordZoneChanges.isEmpty)

            try await laptop.fetchChanges()
            #expect(await laptop.contacts.count == 450)
            #expect(await laptop.contacts["contact-0"] == "Edited")
            #expect(try await server.value(of: "contact-0", in: phone) == "Edited")
        }
    }

    @Test("an exclusive operation waits for the send asked for before it, and the send asked for after waits for it")
    func exclusiveOperation() async throws {
        try await withServer(clientsInProcess: true) { server in
            let (phone, _) = try await twoDevices(server)
            await phone.createZone()
            await phone.save("contact-0", "Person 0")
            let order = Mutex<[String]>([])
            let (batchAsked, batchAskedContinuation) = AsyncStream<Void>.makeStream()
            let (release, releaseContinuation) = AsyncStream<Void>.makeStream()
            await phone.setBeforeBatch { batch in
                // The first batch is held; the engine asks for the next one while the first is out.
                guard batch == 1 else { return }
                batchAskedContinuation.yield()
                for await _ in release { break }
                order.withLock { $0.append("batch") }
            }
            let send = Task { try await phone.sendChanges() }
            for await _ in batchAsked { break }
            let engine = await phone.engine!
            let exclusive = Task { try await engine.performExclusively { order.withLock { $0.append("exclusive") } } }
            // The send is held in its batch. An engine that did not keep them apart would run the
            // exclusive operation now: give every other task its turns (no time is waited for).
            for _ in 0..<1_000 { await Task.yield() }
            releaseContinuation.yield()
            try await send.value
            try await exclusive.value
            #expect(order.withLock { $0 } == ["batch", "exclusive"])
        }
    }

    @Test("the engine holds its delegate weakly: an app that lets its store go frees the store and its engine")
    func delegateReleased() async throws {
        try await withServer(clientsInProcess: true) { server in
            var phone: ContactsDevice? = try await ContactsDevice("phone", container: try await server.signedInContainer("mei"))
            await phone?.createZone()
            await phone?.save("ada", "Ada Byron")
            try await phone?.sendChanges()
            weak let device = phone
            weak let engine = await phone?.engine
            phone = nil
            #expect(device == nil, "the device is freed once the app lets it go")
            #expect(engine == nil)
        }
    }

    @Test("a rename and a delete on one device show on the other")
    func renameAndDelete() async throws {
        try await withServer(clientsInProcess: true) { server in
            let (phone, laptop) = try await twoDevices(server)
            await phone.createZone()
            await phone.save("ada", "Ada Byron")
            await phone.save("alan", "Alan Turing")
            try await phone.sendChanges()
            try await laptop.fetchChanges()
            #expect(await laptop.contacts == ["ada": "Ada Byron", "alan": "Alan Turing"])

            await laptop.save("ada", "Ada Lovelace")
            try await laptop.sendChanges()
            try await phone.fetchChanges()
            #expect(await phone.contacts["ada"] == "Ada Lovelace")

            // The phone renames again with the change tag it just fetched: no conflict.
            await phone.save("ada", "Augusta Ada King")
            await phone.delete("alan")
            try await phone.sendChanges()
            #expect(await phone.sentRecordZoneChanges.last?.deletedRecordIDs == [ContactsDevice.recordID("alan")])
            try await laptop.fetchChanges()
            #expect(await laptop.contacts == ["ada": "Augusta Ada King"])
            let deletions = await laptop.fetchedRecordZoneChanges.last?.deletions
            #expect(deletions?.map(\.recordID) == [ContactsDevice.recordID("alan")])
            #expect(deletions?.first?.recordType == "Contact")
        }
    }

    @Test("a save into a zone the server does not have fails with zoneNotFound; the zone the delegate queues goes out next, then the save")
    func zoneNotFound() async throws {
        try await withServer(clientsInProcess: true) { server in
            let (phone, laptop) = try await twoDevices(server)
            try await phone.fetchChanges()
            await phone.save("ada", "Ada")
            await phone.clearEvents()
            let error = await #expect(throws: CloudError.self) { try await phone.sendChanges() }
            #expect(error?.partialErrorsByItemID?[.record(ContactsDevice.recordID("ada"))]?.code == .zoneNotFound)
            #expect(
                await phone.eventKinds == [
                    "willSendChanges", "sentRecordZoneChanges", "sentDatabaseChanges", "sentRecordZoneChanges",
                    "stateUpdate", "didSendChanges",
                ])
            #expect(await phone.sentRecordZoneChanges.map(\.savedRecords.count) == [0, 1])
            #expect(await phone.engine.state.pendingRecordZoneChanges.isEmpty)
            #expect(await phone.engine.state.pendingDatabaseChanges.isEmpty)
            try await laptop.fetchChanges()
            #expect(await laptop.contacts == ["ada": "Ada"])
        }
    }

    @Test("deleting the zone on one device wipes it on the other")
    func zoneDeletion() async throws {
        try await withServer(clientsInProcess: true) { server in
            let (phone, laptop) = try await twoDevices(server)
            await phone.createZone()
            for index in 0..<5 { await phone.save("contact-\(index)", "Person \(index)") }
            try await phone.sendChanges()
            try await laptop.fetchChanges()
            #expect(await laptop.contacts.count == 5)

            await laptop.deleteZone()
            try await laptop.sendChanges()
            guard case .sentDatabaseChanges(let sent)? = await laptop.events.first(where: { $0.kind == "sentDatabaseChanges" }) else {
                Issue.record("no sentDatabaseChanges event")
                return
            }
            #expect(sent.deletedZoneIDs == [ContactsDevice.zoneID])

            try await phone.fetchChanges()
            #expect(await phone.contacts.isEmpty)
            let zoneDeletions = await phone.events.compactMap { event -> [RecordZone.ID]? in
                if case .fetchedDatabaseChanges(let changes) = event { changes.deletions.map(\.zoneID) } else { nil }
            }
            #expect(zoneDeletions.last == [ContactsDevice.zoneID])
            #expect(await phone.engine.state.zoneIDsWithUnfetchedServerChanges.isEmpty)
        }
    }

    @Test("events of a send and a fetch come in CloudKit's order, one at a time")
    func eventOrder() async throws {
        try await withServer(clientsInProcess: true) { server in
            let (phone, laptop) = try await twoDevices(server)
            await phone.createZone()
            await phone.save("ada", "Ada")
            try await phone.sendChanges()
            #expect(
                await phone.eventKinds == [
                    "accountChange", "stateUpdate", "willSendChanges", "sentDatabaseChanges", "sentRecordZoneChanges",
                    "stateUpdate", "didSendChanges",
                ])
            try await laptop.fetchChanges()
            #expect(
                await laptop.eventKinds == [
                    "accountChange", "stateUpdate", "willFetchChanges", "fetchedDatabaseChanges", "stateUpdate",
                    "willFetchRecordZoneChanges", "fetchedRecordZoneChanges", "stateUpdate", "didFetchRecordZoneChanges",
                    "didFetchChanges",
                ])
        }
    }
}

extension TestServer {
    /// The name the server holds for contact `recordName` of `device`'s user.
    func value(of recordName: String, in device: ContactsDevice) async throws -> String? {
        let record = try await device.container.privateCloudDatabase.record(for: ContactsDevice.recordID(recordName))
        return record["name", as: String.self]
    }
}
