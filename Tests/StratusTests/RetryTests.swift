import Foundation
import Stratus
import StratusServer
import StratusTestSupport
import Testing

@Suite("SDK: retries")
struct RetryTests {
    @Test("throttled requests are retried after the server's retryAfter, saves included; without retries the error carries it")
    func throttling() async throws {
        // The server's time stands still; the SDK's waits move it, so each retry finds the server
        // exactly as much later as it waited.
        let serverTime = ManualClock()
        let clock = SteppingClock(moving: serverTime)
        var configuration = ServerConfiguration(port: 0, passwordHashCost: 4, clock: serverTime.serverClock)
        configuration.rateLimit = RateLimit(requestsPerSecond: 1, burst: 1)
        try await withServer(configuration) { server in
            let log = LogRecorder()
            let setup = server.makeContainer(clock: clock)
            try await setup.signUp(username: "mei", password: "correct horse")
            let container = server.makeContainer(session: setup.session, logger: log.logger, clock: clock)
            let database = container.privateCloudDatabase
            let zone = try await database.save(RecordZone(zoneName: "Notes")).zoneID
            let retriesBefore = log.messages.filter { $0 == "retrying after a transient failure" }.count
            let waitedBefore = clock.totalWaited
            for index in 0..<4 {
                var record = Record(recordType: "Note", recordID: .init(recordName: "n\(index)", zoneID: zone))
                record["index"] = index
                _ = try await database.save(record)
            }
            // At one request per second with a bucket of one, each save finds the bucket empty,
            // waits the second the server names, and goes through.
            let retries = log.messages.filter { $0 == "retrying after a transient failure" }.count - retriesBefore
            #expect(retries == 4)
            #expect(clock.totalWaited - waitedBefore >= .seconds(4))
            #expect(try await database.records(for: (0..<4).map { .init(recordName: "n\($0)", zoneID: zone) }).count == 4)

            let impatient = server.makeContainer(session: setup.session, retryPolicy: .never)
            let throttled = await firstError(of: 5) { _ = try await impatient.privateCloudDatabase.allRecordZones() }
            #expect(throttled?.code == .requestRateLimited)
            #expect(throttled?.serverErrorCode == "THROTTLED")
            #expect((throttled?.retryAfterSeconds ?? 0) >= 1)
            #expect(throttled?.isTransient == true)

            // A retryAfter longer than the policy sits out is handed to the caller at once.
            let brief = server.makeContainer(
                session: setup.session, retryPolicy: RetryPolicy(maxAttempts: 10, maxRetryAfter: .milliseconds(100)))
            let handedBack = await firstError(of: 5) { _ = try await brief.privateCloudDatabase.allRecordZones() }
            #expect(handedBack?.code == .requestRateLimited)
        }
    }

    @Test("a call made while the server is down succeeds once it is back; without a server it fails as networkUnavailable")
    func serverRestart() async throws {
        try await withServer { first in
            let container = try await first.signedInContainer("mei")
            let zone = try await container.privateCloudDatabase.save(RecordZone(zoneName: "Notes")).zoneID
            _ = try await container.privateCloudDatabase.save(Record(recordType: "Note", recordID: .init(recordName: "n", zoneID: zone)))
            try await first.stop()

            let log = LogRecorder()
            let patient = first.makeContainer(
                session: container.session,
                retryPolicy: RetryPolicy(maxAttempts: 30, initialBackoff: .milliseconds(100), maxBackoff: .milliseconds(200)),
                logger: log.logger)
            async let fetched = patient.privateCloudDatabase.record(for: .init(recordName: "n", zoneID: zone))
            // The server comes back once the call has failed against it and is waiting to retry.
            while !log.messages.contains("retrying after a transient failure") { await Task.yield() }
            let second = try await first.restart()
            #expect(try await fetched.recordType == "Note")
            try await second.stop()

            let down = first.makeContainer(
                session: container.session, retryPolicy: RetryPolicy(maxAttempts: 3, initialBackoff: .milliseconds(10)))
            let error = await cloudError { _ = try await down.privateCloudDatabase.allRecordZones() }
            #expect(error?.code == .networkUnavailable)
            #expect(error?.isTransient == true)
        }
    }

    @Test("a lost answer is retried for reads but never for a write, which fails as serverResponseLost")
    func lostAnswers() async throws {
        let silent = try await SilentServer.start()
        let container = Container(
            identifier: "iCloud.com.example.test", serverURL: URL(string: "http://127.0.0.1:\(silent.port)")!,
            apiToken: "token",
            session: Container.Session(webAuthToken: "web", userRecordName: "_u", expirationDate: .distantFuture),
            configuration: .init(retryPolicy: RetryPolicy(maxAttempts: 3, initialBackoff: .milliseconds(10))))
        let database = container.privateCloudDatabase

        let read = await cloudError { _ = try await database.allRecordZones() }
        #expect(read?.code == .networkFailure)
        #expect(silent.requestCount == 3, "an idempotent read is retried")

        let before = silent.requestCount
        let write = await cloudError { try await container.signUp(username: "mei", password: "correct horse") }
        #expect(write?.code == .serverResponseLost)
        #expect(write?.message.contains("not repeated") == true)
        #expect(silent.requestCount - before == 1, "a write whose answer was lost is sent once")
        try await silent.stop()
    }
}

/// The error of the first of `attempts` calls of `body` that fails; `nil` when none does.
private func firstError(of attempts: Int, _ body: () async throws -> Void) async -> CloudError? {
    for _ in 0..<attempts {
        do {
            try await body()
        } catch {
            return error as? CloudError
        }
    }
    return nil
}
