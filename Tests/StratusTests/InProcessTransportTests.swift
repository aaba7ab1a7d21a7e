import Foundation
import Stratus
import StratusTestSupport
import Testing

/// The in-process transport the engine and store suites run on: the same server answers, through
/// the same router, as over a socket, and a stopped server is unreachable as over the network.
@Suite("SDK: the in-process transport of the test support")
struct InProcessTransportTests {
    @Test("a device in process and a device over the network share one server: what one saves, including an asset, the other reads; refusals are the same errors")
    func sameServerBothWays() async throws {
        try await withServer { server in
            let inProcess = server.makeContainer(inProcess: true)
            try await inProcess.signUp(username: "mei", password: "correct horse")
            let network = try await server.device(of: "mei")
            let file = server.directory.appendingPathComponent("photo.bin")
            try Data((0..<100_000).map { UInt8($0 % 251) }).write(to: file)
            var record = Record(recordType: "Photo")
            record["title"] = "Harbour"
            record["image"] = Asset(fileURL: file)
            let saved = try await inProcess.privateCloudDatabase.save(record)
            let read = try await network.privateCloudDatabase.record(for: saved.recordID)
            #expect(read["title", as: String.self] == "Harbour")
            let image = try #require(read["image", as: Asset.self]?.fileURL)
            #expect(try Data(contentsOf: image) == Data(contentsOf: file))

            let strangerInProcess = server.makeContainer(inProcess: true)
            let refusedInProcess = await cloudError { try await strangerInProcess.privateCloudDatabase.record(for: saved.recordID) }
            let refusedOverNetwork = await cloudError {
                try await server.makeContainer(inProcess: false).privateCloudDatabase.record(for: saved.recordID)
            }
            #expect(refusedInProcess?.code == .notAuthenticated)
            #expect(refusedInProcess?.code == refusedOverNetwork?.code)
            #expect(refusedInProcess?.serverErrorCode == refusedOverNetwork?.serverErrorCode)
        }
    }

    @Test("a request to a stopped server fails as a refused connection does; the server restarted on its port answers the same container")
    func stoppedServerIsUnreachable() async throws {
        try await withServer { server in
            let container = server.makeContainer(retryPolicy: RetryPolicy(maxAttempts: 1), inProcess: true)
            try await container.signUp(username: "mei", password: "correct horse")
            _ = try await container.privateCloudDatabase.save(RecordZone(zoneName: "Notes"))
            try await server.stop()
            let refused = await cloudError { try await container.privateCloudDatabase.allRecordZones() }
            #expect(refused?.code == .networkUnavailable)
            _ = try await server.restart()
            #expect(try await container.privateCloudDatabase.allRecordZones().map(\.zoneID.zoneName).contains("Notes"))
        }
    }
}
