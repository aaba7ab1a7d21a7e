import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import Stratus
import StratusProcess
import StratusServer
import StratusTestSupport
import Testing

/// Two `stratus serve` processes over one PostgreSQL database, as behind a load balancer.
@Suite("Several server instances on one PostgreSQL database")
struct MultiInstanceTests {
    /// Starts `stratus serve` on the database with its own data directory and the shared assets.
    static func startInstance(database: String, root: URL, name: String) throws -> ServerProcess {
        try ServerProcess(
            executable: productsDirectory.appendingPathComponent("stratus"),
            arguments: [
                "serve", "--database", database, "--data", root.appendingPathComponent(name).path, "--port", "0",
                "--assets", root.appendingPathComponent("assets").path, "--log-level", "warning",
            ])
    }

    @Test("writers through both instances lose nothing, feeds list each change once, push crosses instances and survives a lost listener, one instance survives the other")
    func twoInstances() async throws {
        let database = try await TestPostgres.createDatabase()
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("stratus-instances-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let first = try Self.startInstance(database: database.url, root: root, name: "a")
        defer { first.kill() }
        let second = try Self.startInstance(database: database.url, root: root, name: "b")
        defer { second.kill() }
        let credentials = try JSONDecoder().decode(
            ServerCredentials.self, from: Data(contentsOf: root.appendingPathComponent("a/credentials.json")))

        func container(_ instance: ServerProcess, device: String, session: Container.Session? = nil) -> Container {
            var configuration = Container.Configuration(
                retryPolicy: RetryPolicy(initialBackoff: .milliseconds(20)), deviceID: device)
            configuration.assetCacheDirectory = root.appendingPathComponent("cache-\(device)")
            return Container(
                identifier: credentials.container, serverURL: URL(string: instance.url)!, apiToken: credentials.apiToken,
                session: session, configuration: configuration)
        }

        let phone = container(first, device: "phone")
        try await phone.signUp(username: "mei", password: "correct horse")
        let session = try #require(phone.session)
        let laptop = container(second, device: "laptop", session: session)
        let zone = try await phone.privateCloudDatabase.save(RecordZone(zoneName: "Notes")).zoneID
        try await phone.privateCloudDatabase.save(Subscription.recordZone(zoneID: zone, subscriptionID: "notes"))

        // A device connected to B hears of a write through A.
        let events = PushEventCollector(laptop)
        #expect(await events.wait { $0.gaps == 1 })
        // B hears A once its listener is up, which nothing here can see: write until a change arrives.
        var note = Record(recordType: "Note", recordID: .init(recordName: "first", zoneID: zone))
        var crossed = false
        for attempt in 0..<10 where !crossed {
            note["title"] = "through A, \(attempt)"
            note = try await phone.privateCloudDatabase.save(note)
            crossed = await events.wait(for: .seconds(5)) { $0.notifications.count >= 1 }
        }
        #expect(crossed, "the write through A reached the device on B")
        #expect(events.notifications.first?.subscriptionID == "notes")

        // A subscription that fires once reaches the device on B whichever instance deletes it first.
        for round in 0..<5 {
            let id = "once-\(round)"
            try await phone.privateCloudDatabase.save(
                Subscription.query(
                    recordType: "Note", subscriptionID: id, options: [.firesOnRecordCreation, .firesOnce], zoneID: zone))
            var once = Record(recordType: "Note", recordID: .init(recordName: id, zoneID: zone))
            once["title"] = "fires \(id)"
            _ = try await phone.privateCloudDatabase.save(once)
            #expect(await events.wait { $0.notifications.contains { $0.subscriptionID == id } }, "\(id) reached B")
        }

        // Eight writers, alternating between the instances, 25 records each.
        let writers = 8
        let perWriter = 25
        try await withThrowingTaskGroup(of: Void.self) { group in
            for writer in 0..<writers {
                let client = container(writer.isMultiple(of: 2) ? first : second, device: "writer-\(writer)", session: session)
                group.addTask {
                    for index in 0..<perWriter {
                        var record = Record(recordType: "Note", recordID: .init(recordName: "w\(writer)-\(index)", zoneID: zone))
                        record["title"] = "writer \(writer) note \(index)"
                        _ = try await client.privateCloudDatabase.save(record)
                    }
                }
            }
            try await group.waitForAll()
        }
        let expected = Set((0..<writers).flatMap { writer in (0..<perWriter).map { "w\(writer)-\($0)" } }).union(["first"] + (0..<5).map { "once-\($0)" })
        for instance in [first, second] {
            var names: [String] = []
            for try await page in container(instance, device: "reader", session: session).privateCloudDatabase
                .recordZoneChangePages(inZoneWith: zone, since: nil, resultsLimit: 37)
            {
                names += page.modificationResultsByID.keys.map(\.recordName)
            }
            #expect(names.count == expected.count, "each change is listed exactly once by \(instance.url)")
            #expect(Set(names) == expected, "nothing is lost through \(instance.url)")
        }

        // The listening connections break (as when the database restarts or a proxy drops them): each
        // instance listens again, its devices hear that they may have missed notifications, and
        // changes cross instances again.
        let before = events.gaps
        try await TestPostgres.execute(
            """
            SELECT pg_terminate_backend(pid) FROM pg_stat_activity
            WHERE datname = '\(database.name)' AND query LIKE 'LISTEN%'
            """, at: database.url)
        #expect(await events.wait { $0.gaps > before }, "the device on B heard about the gap")
        let heard = events.notifications.count
        var again = Record(recordType: "Note", recordID: .init(recordName: "again", zoneID: zone))
        again["title"] = "through A after the reconnect"
        _ = try await phone.privateCloudDatabase.save(again)
        #expect(await events.wait { $0.notifications.count > heard }, "changes cross instances again")

        // B's metrics show the messages from A and how late they came, the devices connected to B,
        // and its pool of PostgreSQL connections.
        var request = HTTPClientRequest(url: second.url + "/metrics")
        request.headers.add(name: "Authorization", value: "Bearer \(credentials.adminToken)")
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
        #expect(response.status == .ok)
        let metrics = try await MetricsScrape(parsing: String(buffer: try await response.body.collect(upTo: 4 << 20)))
        #expect(metrics.value("stratus_instance_bus_lag_seconds_count") >= 2, "B measured the messages from A")
        #expect(metrics.value("stratus_push_devices_connected") == 1)
        #expect(metrics.value("stratus_notifications_queued_total") >= 2)
        #expect(metrics.value("stratus_notifications_sent_total") >= Double(events.notifications.count))
        #expect(metrics.value("stratus_storage_connections_max") == 20)
        #expect(metrics.has("stratus_storage_connections_in_use"))

        // A session ended through A is refused by B at once, not when B's credential cache (ten
        // seconds) would let it go.
        let tablet = container(first, device: "tablet")
        _ = try await tablet.signIn(username: "mei", password: "correct horse")
        let tabletOnB = container(second, device: "tablet-b", session: try #require(tablet.session))
        #expect(try await tabletOnB.privateCloudDatabase.allRecordZones().contains { $0.zoneID == zone }, "B knows the session now")
        try await tablet.signOut()
        let signedOut = ContinuousClock.now
        var refused = false
        while !refused, ContinuousClock.now - signedOut < .seconds(5) {
            do {
                _ = try await tabletOnB.privateCloudDatabase.allRecordZones()
                try await Task.sleep(for: .milliseconds(50))
            } catch let error as CloudError where error.code == .notAuthenticated {
                refused = true
            }
        }
        #expect(refused, "B refused the session ended through A within 5 s")

        // Killing A leaves B serving.
        first.kill()
        var last = Record(recordType: "Note", recordID: .init(recordName: "after", zoneID: zone))
        last["title"] = "through B alone"
        _ = try await laptop.privateCloudDatabase.save(last)
        #expect(try await laptop.privateCloudDatabase.record(for: last.recordID)["title"] as? String == "through B alone")
    }
}
