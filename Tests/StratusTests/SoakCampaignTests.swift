import Foundation
import StratusProcess
import StratusServer
import StratusTestSupport
import Synchronization
import Testing

/// The soak of docs/reliability.md: a steady mixed load (saves, updates, deletions, lookups,
/// queries, feeds, push polls) against a `stratus serve` child process, sampling its resident
/// memory, open files and threads every second. Nothing may grow without bound: the last quarter's
/// figures stay near the first half's, and no answer is a 5xx.
///
/// `scripts/test` soaks for 20 seconds; `scripts/campaign soak` sets `STRATUS_CAMPAIGN_SOAK_SECONDS`
/// (1,800 for the figures in docs/reliability.md).
@Suite("campaign: soak")
struct SoakCampaignTests {
    struct Sample {
        var seconds: Int
        var resident: Int
        var files: Int
        var threads: Int
    }

    /// What the load's tasks share.
    final class LoadState: Sendable {
        let stop = Atomic(false)
        let requests = Atomic(0)
        let serverErrors = Mutex<[String]>([])
        let refusals = Mutex<[String: Int]>([:])
    }

    @Test("a steady mixed load: memory, open files and threads stay level, no 5xx")
    func soak() async throws {
        let duration = ProcessInfo.processInfo.environment["STRATUS_CAMPAIGN_SOAK_SECONDS"].flatMap(Int.init) ?? 20
        let server = try CampaignServer()
        defer { server.stopAndRemove() }
        let database = server.database()

        let state = LoadState()
        let clients = 4
        let load = Task {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for client in 0..<clients {
                    let user = try await server.session("soak\(client)")
                    _ = try await CampaignServer.call(
                        "\(database)/zones/modify?\(user)",
                        ["operations": [["operationType": "create", "zone": ["zoneID": ["zoneName": "Soak"]]]]])
                    group.addTask {
                        var generator = SystemRandomNumberGenerator()
                        var feedToken: String?
                        var next = 0
                        while !state.stop.load(ordering: .relaxed) {
                            let (path, body) = Self.operation(
                                Int.random(in: 0..<10, using: &generator), next: &next, feedToken: feedToken)
                            do {
                                let answer = try await CampaignServer.call("\(database)/\(path)?\(user)", body)
                                if path == "records/changes" { feedToken = answer["syncToken"] as? String }
                            } catch let error as CampaignServer.CallError where error.description.hasPrefix("5") {
                                state.serverErrors.withLock { $0.append("\(path): \(error)") }
                            } catch let error as CampaignServer.CallError {
                                // A 4xx (a record deleted meanwhile) is an answer, not a fault; counted.
                                state.refusals.withLock { $0["\(path) \(error.description.prefix(3))", default: 0] += 1 }
                            }
                            state.requests.add(1, ordering: .relaxed)
                        }
                    }
                }
                // A push poller: a token made, registered and polled with a short timeout, over and over.
                group.addTask {
                    while !state.stop.load(ordering: .relaxed) {
                        let user = try await server.session("soak0", signIn: true)
                        let created = try await CampaignServer.call(
                            "\(server.url)/database/1/\(server.credentials.container)/development/tokens/create?\(user)", [:])
                        let pushURL = try #require(created["webcourierURL"] as? String)
                        _ = try? await CampaignServer.call("\(pushURL)?\(user)&timeout=1", [:])
                        state.requests.add(3, ordering: .relaxed)
                    }
                }
                try await group.waitForAll()
            }
        }

        var samples: [Sample] = []
        for second in 0...duration {
            samples.append(
                Sample(seconds: second, resident: server.process.residentBytes, files: Self.openFiles(of: server.process), threads: Self.threads(of: server.process)))
            try await Task.sleep(for: .seconds(1))
        }
        state.stop.store(true, ordering: .relaxed)
        try await load.value

        // The first half (warm-up included: pools and caches fill) is the reference the last quarter
        // must stay near.
        let first = samples.prefix(max(1, samples.count / 2))
        let last = samples.suffix(max(1, samples.count / 4))
        let megabytes = { (bytes: Int) in bytes >> 20 }
        let total = state.requests.load(ordering: .relaxed)
        print(
            "soak \(duration) s: \(total) requests (\(total / max(duration, 1))/s); resident MB first half max "
                + "\(megabytes(first.map(\.resident).max() ?? 0)), last quarter max \(megabytes(last.map(\.resident).max() ?? 0)), "
                + "peak \(megabytes(samples.map(\.resident).max() ?? 0)); open files \(first.map(\.files).max() ?? 0) → "
                + "\(last.map(\.files).max() ?? 0); threads \(first.map(\.threads).max() ?? 0) → \(last.map(\.threads).max() ?? 0); "
                + "refused: \(state.refusals.withLock { $0 })")
        #expect(state.serverErrors.withLock { $0 }.isEmpty, "\(state.serverErrors.withLock { $0.prefix(5) })")
        #expect(total > duration * 10, "the load ran")
        let firstResident = first.map(\.resident).max() ?? 0
        #expect((last.map(\.resident).max() ?? 0) <= firstResident + firstResident / 2 + (32 << 20), "resident memory grows")
        #expect((last.map(\.files).max() ?? 0) <= (first.map(\.files).max() ?? 0) + 16, "open files grow")
        #expect((last.map(\.threads).max() ?? 0) <= (first.map(\.threads).max() ?? 0) + 4, "threads grow")
        #expect((samples.map(\.threads).max() ?? 0) <= 64, "threads stay few")
    }

    /// One request of the mix, in the user's zone: creates, updates and deletions of a small batch,
    /// lookups, queries, the zone's feed and a zone lookup.
    static func operation(_ choice: Int, next: inout Int, feedToken: String?) -> (String, [String: Any]) {
        let (path, body) = operationInZone(choice, next: &next, feedToken: feedToken)
        return (path, body.merging(["zoneID": ["zoneName": "Soak"]]) { current, _ in current })
    }

    static func operationInZone(_ choice: Int, next: inout Int, feedToken: String?) -> (String, [String: Any]) {
        func record(_ index: Int) -> [String: Any] {
            ["recordName": "r\(index)", "recordType": "Note",
             "fields": ["title": ["value": "note \(index) \(UUID().uuidString)"], "count": ["value": index]]]
        }
        switch choice {
        case 0..<3:
            let operations = (0..<5).map { _ -> [String: Any] in
                next += 1
                return ["operationType": "create", "record": record(next)]
            }
            return ("records/modify", ["operations": operations])
        case 3:
            return ("records/modify", ["operations": [["operationType": "forceReplace", "record": record(max(1, next - 3))]]])
        case 4:
            return ("records/modify", ["operations": [["operationType": "forceDelete", "record": ["recordName": "r\(max(1, next - 7))"]]]])
        case 5:
            return ("records/lookup", ["records": (0..<10).map { ["recordName": "r\(max(1, next - $0))"] }])
        case 6, 7:
            return ("records/query", [
                "query": ["recordType": "Note", "filterBy": [["comparator": "GREATER_THAN", "fieldName": "count",
                                                              "fieldValue": ["value": max(0, next - 20)]]],
                          "sortBy": [["fieldName": "count", "ascending": false]]], "resultsLimit": 20,
            ])
        case 8:
            var body: [String: Any] = ["resultsLimit": 100]
            if let feedToken { body["syncToken"] = feedToken }
            return ("records/changes", body)
        default:
            return ("zones/lookup", ["zones": [["zoneName": "Soak"]]])
        }
    }

    static func openFiles(of server: ServerProcess) -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(server.process.processIdentifier)/fd").count) ?? 0
    }

    static func threads(of server: ServerProcess) -> Int {
        guard let status = try? String(contentsOfFile: "/proc/\(server.process.processIdentifier)/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("Threads:") })
        else { return 0 }
        return Int(line.split(separator: "\t").last?.trimmingCharacters(in: .whitespaces) ?? "") ?? 0
    }
}
