import Foundation
import Logging
import Stratus
import StratusSync
import StratusTestSupport
import Synchronization
import Testing

/// The real database as the engine's transport, except that its first record writes are refused as
/// a busy server refuses them: a stand-in for the server saying "not now", not for CloudKit's rules.
final class ThrottlingTransport: SyncTransport {
    let database: Database
    let retryAfterSeconds: Double
    /// Whether the server's push channel reaches the engine; when not, it hears nothing until
    /// cancelled, as an app in the background whose WebSocket is gone.
    let hearsPushChannel: Bool
    private let refusalsLeft: Mutex<Int>
    /// How many record writes the engine asked for, refused ones included.
    let writes = Atomic(0)
    /// How many record writes the server answered.
    let answeredWrites = Atomic(0)

    init(_ database: Database, refusing refusals: Int, retryAfterSeconds: Double, hearsPushChannel: Bool = true) {
        self.database = database
        self.retryAfterSeconds = retryAfterSeconds
        self.hearsPushChannel = hearsPushChannel
        refusalsLeft = Mutex(refusals)
    }

    var containerIdentifier: String { database.containerIdentifier }
    var databaseScope: Database.Scope { database.databaseScope }
    var retryPolicy: RetryPolicy { database.retryPolicy }
    var logger: Logger { database.logger }
    var signedInUserRecordName: String? { database.signedInUserRecordName }
    func saveSubscription(_ subscription: Subscription) async throws { try await database.saveSubscription(subscription) }
    func databaseChanges(since changeToken: ServerChangeToken?) async throws -> DatabaseChanges {
        try await database.databaseChanges(since: changeToken)
    }
    func recordZoneChangePages(inZoneWith zoneID: RecordZone.ID, since changeToken: ServerChangeToken?) -> RecordZoneChangePages {
        database.recordZoneChangePages(inZoneWith: zoneID, since: changeToken)
    }
    func modifyRecordZones(
        saving zonesToSave: [RecordZone], deleting zoneIDsToDelete: [RecordZone.ID]
    ) async throws -> ModifyResults<RecordZone.ID, RecordZone> {
        try await database.modifyRecordZones(saving: zonesToSave, deleting: zoneIDsToDelete)
    }
    func modifyRecords(
        saving recordsToSave: [Record], deleting recordIDsToDelete: [Record.ID], deletionChangeTags: [Record.ID: String],
        savePolicy: RecordSavePolicy, atomically: Bool
    ) async throws -> ModifyResults<Record.ID, Record> {
        writes.add(1, ordering: .sequentiallyConsistent)
        let refuse = refusalsLeft.withLock { left in
            defer { left = max(0, left - 1) }
            return left > 0
        }
        if refuse {
            throw CloudError(.requestRateLimited, "busy", retryAfterSeconds: retryAfterSeconds)
        }
        let results = try await database.modifyRecords(
            saving: recordsToSave, deleting: recordIDsToDelete, deletionChangeTags: deletionChangeTags, savePolicy: savePolicy,
            atomically: atomically)
        answeredWrites.add(1, ordering: .sequentiallyConsistent)
        return results
    }
    func serverLimits() async throws -> ServerLimits { try await database.serverLimits() }
    func notifications() -> AsyncThrowingStream<PushEvent, any Error> {
        hearsPushChannel ? database.notifications() : AsyncThrowingStream { _ in }
    }
}

/// The engine's scheduling on a clock the test moves: waits of minutes take no time.
@Suite("sync engine: scheduling on the engine's clock")
struct EngineClockTests {
    /// Waits until `condition` holds, checking as tasks yield (bounded, so a broken engine fails).
    static func eventually(_ condition: () async -> Bool) async -> Bool {
        for _ in 0..<20_000 {
            if await condition() { return true }
            try? await Task.sleep(for: .milliseconds(1))
        }
        return await condition()
    }

    @Test("a send the server refuses with retryAfter 120 s goes again when the engine's clock reaches it, not before")
    func retryWaitsOnTheEngineClock() async throws {
        try await withServer(clientsInProcess: true) { server in
            let container = try await server.signedInContainer("ada", device: "phone")
            _ = try await container.privateCloudDatabase.save(RecordZone(zoneID: ContactsDevice.zoneID))
            let clock = ManualSyncClock()
            let transport = ThrottlingTransport(container.privateCloudDatabase, refusing: 1, retryAfterSeconds: 120)
            let phone = try await ContactsDevice("phone", container: container, automaticallySync: true) { configuration in
                configuration.transport = transport
                configuration.clock = clock
                configuration.sendDebounce = .zero
            }
            let start = clock.now
            await phone.save("c1", "Ada Lovelace")
            // Refused once; the engine now sleeps until two minutes from now on its clock.
            #expect(await Self.eventually {
                transport.writes.load(ordering: .sequentiallyConsistent) == 1
                    && (clock.nextDeadline.map { $0 >= start + .seconds(119) } ?? false)
            })
            let early = try await container.privateCloudDatabase.records(for: [ContactsDevice.recordID("c1")])
            #expect(early.values.allSatisfy { (try? $0.get()) == nil }, "nothing was saved before the retry")
            #expect(transport.writes.load(ordering: .sequentiallyConsistent) == 1)
            clock.advance(by: .seconds(120))
            #expect(await Self.eventually { transport.writes.load(ordering: .sequentiallyConsistent) == 2 })
            #expect(await Self.eventually {
                let saved = try? await container.privateCloudDatabase.records(for: [ContactsDevice.recordID("c1")])
                return saved?.values.contains { (try? $0.get())?["name"] != nil } ?? false
            })
        }
    }

    @Test("an APNs payload the app hands the engine makes it fetch at once, with no push channel and no catch-up due; one of another database does not")
    func remoteNotificationFetches() async throws {
        try await withServer(clientsInProcess: true) { server in
            let container = try await server.signedInContainer("ada", device: "phone")
            _ = try await container.privateCloudDatabase.save(RecordZone(zoneID: ContactsDevice.zoneID))
            let clock = ManualSyncClock()
            let transport = ThrottlingTransport(
                container.privateCloudDatabase, refusing: 0, retryAfterSeconds: 0, hearsPushChannel: false)
            let phone = try await ContactsDevice("phone", container: container, automaticallySync: true) { configuration in
                configuration.transport = transport
                configuration.clock = clock
                configuration.sendDebounce = .zero
            }
            // The start's fetch ends; the next catch-up is an hour away on a clock that does not move.
            #expect(await Self.eventually { await phone.events.contains { if case .didFetchChanges = $0 { true } else { false } } })
            let laptop = try await server.device(of: "ada")
            var record = Record(recordType: "Contact", recordID: ContactsDevice.recordID("c1"))
            record["name"] = "Ada Lovelace"
            _ = try await laptop.privateCloudDatabase.save(record)

            let payload = { (database: Int, container: String) in
                Data(
                    """
                    {"aps": {"content-available": 1}, "ck": {"nid": "n1", "cid": "\(container)", "ckuserid": "_ada",
                     "fet": {"sid": "contacts", "dbs": \(database), "zid": "Contacts"}}}
                    """.utf8)
            }
            let shared = try #require(RemoteNotification(payload: payload(3, server.container)))
            #expect(shared.databaseScope == .shared && shared.zoneName == "Contacts")
            let engine = try #require(await phone.engine)
            #expect(!engine.handleRemoteNotification(shared), "the shared database's engine fetches that")
            let otherApp = try #require(RemoteNotification(payload: payload(1, "iCloud.com.example.other")))
            #expect(!engine.handleRemoteNotification(otherApp), "another container's engine fetches that")
            let own = try #require(RemoteNotification(payload: payload(1, server.container)))
            #expect(engine.handleRemoteNotification(own))
            #expect(await Self.eventually { await phone.contacts["c1"] == "Ada Lovelace" })
        }
    }
}
