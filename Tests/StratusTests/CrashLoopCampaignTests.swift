import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import StratusProcess
import StratusServer
import StratusTestSupport
import Synchronization
import Testing

/// The crash loop of docs/reliability.md: writers of atomic and non-atomic batches and change-feed
/// followers against a `stratus serve` child process that is SIGKILLed at random moments. Afterwards
/// every acknowledged write is there with its exact fields, no unacknowledged batch is partly
/// visible, a first fetch of each zone's feed lists each record once, and each follower, fed only
/// by its tokens, holds exactly the server's records.
///
/// `scripts/test` runs a few cycles per backend; `scripts/campaign crash` sets
/// `STRATUS_CAMPAIGN_CYCLES` for the full size.
@Suite("campaign: SIGKILL under write load")
struct CrashLoopCampaignTests {
    static var cycles: Int {
        ProcessInfo.processInfo.environment["STRATUS_CAMPAIGN_CYCLES"].flatMap(Int.init) ?? 4
    }

    @Test("SQLite: nothing acknowledged is lost, no batch half-written, followers miss nothing")
    func sqlite() async throws {
        try await CrashLoop(storage: []).run(cycles: Self.cycles)
    }

    @Test("PostgreSQL: nothing acknowledged is lost, no batch half-written, followers miss nothing")
    func postgres() async throws {
        let database = try await TestPostgres.createDatabase()
        try await CrashLoop(storage: ["--database", database.url]).run(cycles: Self.cycles)
    }
}

/// One run of the crash loop over one storage backend.
struct CrashLoop {
    /// The zones written: one takes atomic batches, the other non-atomic ones.
    static let zones = ["atomic": true, "loose": false]
    let storage: [String]
    /// Writers per zone: several, so that concurrent batches commit in groups (on SQLite one fsync, on
    /// PostgreSQL one zone lock and one statement) and a kill lands in a group commit.
    var writersPerZone = 6

    /// The server of the current cycle, or `nil` between a kill and the next start.
    final class Current: Sendable {
        let url = Mutex<String?>(nil)
        let stopping = Mutex(false)
        /// The writers that have had a batch acknowledged.
        let progressed = Mutex<Set<String>>([])
    }

    /// What a record may hold at the end: the value of its last acknowledged write (`nil`: absent)
    /// and, when a later write was not acknowledged, that write's value. Records an unacknowledged
    /// batch touched are never written again.
    struct Possibilities {
        var acknowledged: String?
        var unacknowledged: String??
    }

    /// A batch sent but not acknowledged: its records' values if it was applied.
    struct UnacknowledgedBatch {
        var after: [String: String?]
    }

    /// What one writer knows at the end.
    struct WriterLog {
        var records: [String: Possibilities] = [:]
        var unacknowledged: [UnacknowledgedBatch] = []
        var acknowledgedBatches = 0
        var failures: [String] = []
    }

    func run(cycles: Int) async throws {
        // The first start makes the container and the tokens; a user signs up and makes the zones.
        let server = try CampaignServer(storage)
        defer { server.stopAndRemove() }
        let query = try await server.session("crash")
        let database = "/database/1/\(server.credentials.container)/development/private"
        _ = try await CampaignServer.call(
            "\(server.url)\(database)/zones/modify?\(query)",
            ["operations": Self.zones.keys.map { ["operationType": "create", "zone": ["zoneID": ["zoneName": $0]]] }])

        let current = Current()
        current.url.withLock { $0 = server.url }
        let writers = Task {
            try await withThrowingTaskGroup(of: WriterLog.self) { group in
                for (zone, atomic) in Self.zones {
                    for index in 0..<writersPerZone {
                        group.addTask {
                            await Self.write(
                                as: "\(zone)-\(index)", zone: zone, atomic: atomic, current: current,
                                path: database + "/records/modify?" + query)
                        }
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
        }
        let followers = Self.zones.keys.map { zone in
            Task { await Self.follow(zone: zone, current: current, path: database + "/records/changes?" + query) }
        }

        var generator = SystemRandomNumberGenerator()
        for _ in 0..<cycles {
            try await Task.sleep(for: .milliseconds(Int.random(in: 150...900, using: &generator)))
            current.url.withLock { $0 = nil }
            try server.crashAndRestart()
            current.url.withLock { $0 = server.url }
        }
        // After the last restart, every writer gets a batch through before they stop (on a busy
        // machine a writer may have had none acknowledged between kills).
        let writerCount = Self.zones.count * writersPerZone
        let settled = ContinuousClock.now + .seconds(120)
        while current.progressed.withLock({ $0.count }) < writerCount, ContinuousClock.now < settled {
            try await Task.sleep(for: .milliseconds(50))
        }
        current.stopping.withLock { $0 = true }
        let logs = try await writers.value

        // Every writer made progress, and no answer was an error other than a lost connection.
        for log in logs {
            #expect(log.failures.isEmpty, "\(log.failures.prefix(5))")
            #expect(log.acknowledgedBatches > 0)
        }
        let acknowledged = logs.map(\.acknowledgedBatches).reduce(0, +)
        let lost = logs.map(\.unacknowledged.count).reduce(0, +)

        // The server's state, from a first fetch of each zone's feed.
        var state: [String: [String: String]] = [:]
        for zone in Self.zones.keys {
            let (records, _) = try await Self.feed(
                url: server.url + database + "/records/changes?" + query, zone: zone, token: nil)
            var seen: Set<String> = []
            for record in records where record.fields != nil {
                #expect(seen.insert(record.name).inserted, "\(record.name) is listed twice in \(zone)'s feed")
                state[record.name] = record.fields
            }
        }
        // Every record holds its acknowledged value, or the value of the one write after it that went
        // unacknowledged.
        var checked = 0
        for log in logs {
            for (name, possible) in log.records {
                let found = state[name]?["payload"]
                let allowed = [possible.acknowledged] + (possible.unacknowledged.map { [$0] } ?? [])
                #expect(allowed.contains(found), "\(name) holds \(found ?? "nothing"), expected one of \(allowed)")
                if let found, let fields = state[name] {
                    #expect(fields == Self.fields(name: name, payload: found), "\(name) has other fields: \(fields)")
                }
                checked += 1
            }
            // A batch that went unacknowledged is there whole or not at all.
            for batch in log.unacknowledged {
                let applied = batch.after.map { name, value in state[name]?["payload"] == value }
                #expect(Set(applied).count <= 1, "a batch is partly visible: \(batch.after.keys.sorted())")
            }
        }
        // Each follower, fed only by its tokens across every crash, holds exactly the server's records.
        for (zone, follower) in zip(Self.zones.keys, followers) {
            follower.cancel()
            var view = await follower.value
            let (records, _) = try await Self.feed(
                url: server.url + database + "/records/changes?" + query, zone: zone, token: view.token)
            view.apply(records)
            let expected = state.filter { $0.key.hasPrefix(zone) }.mapValues { $0["payload"] ?? "" }
            #expect(view.records == expected, "the \(zone) follower differs from the server")
        }
        print(
            "crash loop \(storage.isEmpty ? "SQLite" : "PostgreSQL"): \(cycles) kills, \(acknowledged) batches acknowledged, "
                + "\(lost) unacknowledged, \(checked) records checked")
    }

    static func fields(name: String, payload: String) -> [String: String] {
        ["payload": payload, "writer": String(name.prefix { $0 != "." })]
    }

    /// Writes batches of 1 to 20 operations (creates, replacements and deletions of its own records)
    /// until told to stop; a batch whose answer is lost to a kill counts as unacknowledged.
    static func write(as writer: String, zone: String, atomic: Bool, current: Current, path: String) async -> WriterLog {
        var log = WriterLog()
        var live: [String] = []
        var next = 0
        var generator = SystemRandomNumberGenerator()
        while !current.stopping.withLock({ $0 }) {
            guard let url = current.url.withLock({ $0 }) else {
                try? await Task.sleep(for: .milliseconds(10))
                continue
            }
            var operations: [[String: Any]] = []
            var after: [String: String?] = [:]
            for _ in 0..<Int.random(in: 1...20, using: &generator) {
                let choice = Int.random(in: 0..<10, using: &generator)
                if choice < 2, let name = live.randomElement(using: &generator), after[name] == nil {
                    operations.append(["operationType": "forceDelete", "record": ["recordName": name]])
                    after[name] = .some(nil)
                } else if choice < 5, let name = live.randomElement(using: &generator), after[name] == nil {
                    let payload = UUID().uuidString
                    operations.append(Self.save("forceReplace", name: name, payload: payload))
                    after[name] = payload
                } else {
                    let name = "\(writer).\(next)"
                    next += 1
                    let payload = UUID().uuidString
                    operations.append(Self.save("create", name: name, payload: payload))
                    after[name] = payload
                }
            }
            let body: [String: Any] = ["operations": operations, "zoneID": ["zoneName": zone], "atomic": atomic]
            do {
                let answer = try await CampaignServer.call(url + path, body)
                let records = answer["records"] as? [[String: Any]] ?? []
                let errors = records.compactMap { $0["serverErrorCode"] as? String }
                guard records.count == operations.count, errors.isEmpty else {
                    log.failures.append("\(answer)")
                    continue
                }
                log.acknowledgedBatches += 1
                current.progressed.withLock { _ = $0.insert(writer) }
                for (name, value) in after {
                    log.records[name, default: Possibilities()].acknowledged = value
                    if value == nil { live.removeAll { $0 == name } } else if !live.contains(name) { live.append(name) }
                }
            } catch let error as CampaignServer.CallError {
                log.failures.append(error.description)
            } catch {
                // The connection was lost: the batch may or may not be there. Its records are retired.
                log.unacknowledged.append(UnacknowledgedBatch(after: after))
                for (name, value) in after {
                    log.records[name, default: Possibilities()].unacknowledged = .some(value)
                    live.removeAll { $0 == name }
                }
            }
        }
        return log
    }

    static func save(_ type: String, name: String, payload: String) -> [String: Any] {
        let fields = Self.fields(name: name, payload: payload).mapValues { ["value": $0, "type": "STRING"] }
        return ["operationType": type, "record": ["recordName": name, "recordType": "Item", "fields": fields]]
    }

    /// A follower's records, built only from the feed pages its tokens lead to.
    struct FollowerView {
        var token: String?
        var records: [String: String] = [:]

        mutating func apply(_ changes: [FeedRecord]) {
            for change in changes {
                records[change.name] = change.fields?["payload"]
            }
        }
    }

    /// Follows a zone's feed with its token until cancelled, through every crash.
    static func follow(zone: String, current: Current, path: String) async -> FollowerView {
        var view = FollowerView()
        while !Task.isCancelled {
            guard let url = current.url.withLock({ $0 }) else {
                try? await Task.sleep(for: .milliseconds(10))
                continue
            }
            if let (records, token) = try? await Self.feed(url: url + path, zone: zone, token: view.token) {
                view.apply(records)
                view.token = token
            }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return view
    }

    /// A record as a feed lists it: its fields as strings, or `nil` when it was deleted.
    struct FeedRecord {
        var name: String
        var fields: [String: String]?
    }

    /// Reads a zone's feed from `token` to its end.
    static func feed(url: String, zone: String, token: String?) async throws -> ([FeedRecord], String?) {
        var token = token
        var records: [FeedRecord] = []
        while true {
            var body: [String: Any] = ["zoneID": ["zoneName": zone], "resultsLimit": 200]
            if let token { body["syncToken"] = token }
            let page = try await CampaignServer.call(url, body)
            guard let next = page["syncToken"] as? String else { throw CampaignServer.CallError(description: "no syncToken: \(page)") }
            token = next
            for record in page["records"] as? [[String: Any]] ?? [] {
                let name = record["recordName"] as? String ?? ""
                if record["deleted"] as? Bool == true {
                    records.append(FeedRecord(name: name, fields: nil))
                } else {
                    let fields = (record["fields"] as? [String: [String: Any]] ?? [:]).compactMapValues { $0["value"] as? String }
                    records.append(FeedRecord(name: name, fields: fields))
                }
            }
            if page["moreComing"] as? Bool != true { return (records, token) }
        }
    }
}
