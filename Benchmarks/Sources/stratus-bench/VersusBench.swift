import ArgumentParser
import AsyncHTTPClient
import Foundation
import NIOCore
import Logging
import NIOHTTP1
import NIOPosix
import Stratus
import StratusModel
import StratusPostgres
import StratusProcess
import Synchronization

/// Stratus beside Kinto, the closest self-hostable peer, on the same backend kind and the same
/// workloads, interleaved round by round (Kinto, then Stratus, each round), in one run.
struct VersusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "versus",
        abstract: "Measures Stratus beside Kinto (memory vs SQLite, then both on one PostgreSQL), in one run.")

    @Option(help: "The kinto executable (scripts/bench installs it into a virtual environment).")
    var kinto: String

    @Option(help: "A PostgreSQL server where the bench may create databases; without one only the memory/SQLite pair runs.")
    var postgres: String?

    @Flag(help: "A smoke run: small workloads, one round (about 2 minutes).")
    var quick = false

    @Option(help: "Rounds (default 3, or 1 with --quick).")
    var rounds: Int?

    @Option(help: "Write the results as JSON to this file.")
    var output: String?

    @Option(help: "Write the Markdown tables to this file.")
    var markdown: String?

    func run() async throws {
        let rounds = rounds ?? (quick ? 1 : 3)
        var pairs: [VersusPair.Result] = []
        for kind in [VersusPair.Kind.embedded] + (postgres == nil ? [] : [.postgres]) {
            let sizes = VersusPair.Sizes(kind: kind, quick: quick)
            let pair = VersusPair(kind: kind, sizes: sizes, kinto: kinto, postgres: postgres, progress: Self.progress)
            pairs.append(try await pair.run(rounds: rounds))
        }
        let text = VersusReport.markdown(pairs, rounds: rounds, quick: quick, command: CommandLine.arguments)
        print(text)
        if let markdown { try text.write(toFile: markdown, atomically: true, encoding: .utf8) }
        if let output {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            try encoder.encode(pairs).write(to: URL(fileURLWithPath: output))
        }
    }

    static func progress(_ text: String) {
        FileHandle.standardError.write(Data("[versus \(Self.clock())] \(text)\n".utf8))
    }

    private static let start = ContinuousClock.now
    private static func clock() -> String {
        let seconds = Int((ContinuousClock.now - start).components.seconds)
        return String(format: "%d:%02d", seconds / 60, seconds % 60)
    }
}

/// One system under test, as the workloads drive it: plain HTTP requests, the way each system's
/// own clients make them.
protocol VersusPeer: Sendable {
    /// Creates one record; whether the server acknowledged it.
    func create(_ collection: String, id: String, index: Int) async throws -> Bool
    /// Creates records in as few requests as the system allows; returns how many it acknowledged.
    func createBatch(_ collection: String, ids: [String], first: Int) async throws -> Int
    /// The record's current version (ETag or change tag).
    func version(_ collection: String, id: String) async throws -> String
    /// Updates a record if it is still at `version`: its new version, or `nil` for a conflict.
    func update(_ collection: String, id: String, version: String, value: Int) async throws -> String?
    /// Fills a collection with `count` records for the feed read, the fastest way the system allows.
    func seed(_ collection: String, count: Int) async throws
    /// Reads the whole change feed of a collection from the start, page by page; returns the IDs in order.
    func readFeed(_ collection: String) async throws -> [String]
    /// The largest batch the system takes.
    var batchLimit: Int { get }
    /// Waits until another client sees the record `id` saved now through this one; returns seconds
    /// from the save to the sight.
    func propagation(_ collection: String, id: String, index: Int) async throws -> Double
}

/// The servers of one backend kind and the workloads run on them.
struct VersusPair {
    enum Kind: String, Encodable {
        case embedded = "Kinto memory vs Stratus SQLite"
        case postgres = "both on one PostgreSQL"
    }

    struct Sizes: Encodable {
        var singles: Int
        var batched: Int
        var conditionalRounds: Int
        var feedRecords: Int
        var writers: [Int]
        var writesPerWriter: Int
        var propagations: Int

        init(kind: Kind, quick: Bool) {
            // Kinto on PostgreSQL writes about 70 records/s here: its sizes keep the run within 15 minutes.
            // Its feed is seeded by SQL there, so it can hold 100,000 records; Kinto's memory backend
            // slows as a collection grows (100,000 records did not go in within 10 minutes), so the
            // first pair reads 10,000.
            let slow = kind == .postgres
            singles = quick ? 50 : slow ? 300 : 500
            batched = quick ? 250 : slow ? 1_000 : 5_000
            conditionalRounds = quick ? 20 : slow ? 100 : 200
            feedRecords = quick ? 2_000 : slow ? 100_000 : 10_000
            writers = [8, 32, 64]
            writesPerWriter = quick ? 5 : 20
            propagations = quick ? 20 : 100
        }
    }

    /// A figure of one round for both systems.
    struct Pairing: Encodable {
        var stratus: Double
        var kinto: Double
    }

    /// Every round's figures, by workload.
    struct Result: Encodable {
        var kind: Kind
        var sizes: Sizes
        var figures: [String: [Pairing]] = [:]
        var units: [String: String] = [:]
        var order: [String] = []
        var concurrency: [ConcurrencyRow] = []

        mutating func add(_ workload: String, _ unit: String, stratus: Double, kinto: Double) {
            if figures[workload] == nil { order.append(workload) }
            units[workload] = unit
            figures[workload, default: []].append(Pairing(stratus: stratus, kinto: kinto))
        }
    }

    /// What concurrent writers did, for one system, one round.
    struct ConcurrencyRow: Encodable {
        var system: String
        var writers: Int
        var round: Int
        var attempted: Int
        var acknowledged: Int
        var errors: Int
        var lost: Int
        var recordsPerSecond: Double
    }

    let kind: Kind
    let sizes: Sizes
    let kinto: String
    let postgres: String?
    let progress: @Sendable (String) -> Void

    func run(rounds: Int) async throws -> Result {
        progress("\(kind.rawValue): starting Kinto and Stratus")
        let kintoServer = try await KintoServer.start(executable: kinto, postgres: try await database("kinto"))
        defer { kintoServer.stop() }
        let stratusServer = try await StratusServer.start(postgres: try await database("stratus"))
        defer { stratusServer.stop() }
        let peers: [(String, any VersusPeer)] = [("Kinto", kintoServer.peer), ("Stratus", stratusServer.peer)]
        var result = Result(kind: kind, sizes: sizes)

        progress("\(kind.rawValue): seeding \(sizes.feedRecords) records in each system for the feed read")
        for (name, peer) in peers {
            let seconds = try await measure { try await peer.seed("feed", count: sizes.feedRecords) }
            progress("  \(name) seeded at \(Int(Double(sizes.feedRecords) / seconds)) records/s")
        }

        for round in 1...rounds {
            var figures: [String: (Double, Double)] = [:]
            var units: [String: String] = [:]
            var order: [String] = []
            func record(_ workload: String, _ unit: String, _ system: String, _ value: Double) {
                if units[workload] == nil { order.append(workload) }
                units[workload] = unit
                var pair = figures[workload] ?? (0, 0)
                if system == "Stratus" { pair.0 = value } else { pair.1 = value }
                figures[workload] = pair
            }
            // A B, then B A: neither system always runs on a machine the other just warmed or loaded.
            for (name, peer) in round.isMultiple(of: 2) ? peers.reversed() : peers {
                let tag = "r\(round)"
                progress("\(kind.rawValue), round \(round)/\(rounds): \(name)")
                // Single creates.
                progress("  \(name): single creates")
                var latencies: [Double] = []
                for index in 0..<sizes.singles {
                    latencies.append(try await measure {
                        guard try await peer.create("singles", id: "\(tag)-s\(index)", index: index) else {
                            throw BenchError("\(name) refused a single create")
                        }
                    })
                }
                record("single create, p50", "ms", name, percentile(latencies, 0.5) * 1000)
                record("single create, p99", "ms", name, percentile(latencies, 0.99) * 1000)
                // Batched creates at each system's maximum batch.
                progress("  \(name): batched creates")
                let seconds = try await measure {
                    // Kinto refuses sub-request paths containing "batch" as recursive.
                    try await Self.fill(peer, "bulk-\(tag)", count: sizes.batched, prefix: "b")
                }
                record("batched creates (Kinto /batch of 25, Stratus records/modify of 200)", "records/s", name,
                       Double(sizes.batched) / seconds)
                // Conditional updates with conflicts: two clients update from the same version.
                progress("  \(name): conditional updates")
                let id = "\(tag)-contended"
                guard try await peer.create("conditional", id: id, index: 0) else { throw BenchError("\(name): setup") }
                var conflicts = 0
                var lostUpdates = 0
                let conditionalSeconds = try await measure {
                    for value in 0..<sizes.conditionalRounds {
                        let version = try await peer.version("conditional", id: id)
                        async let first = peer.update("conditional", id: id, version: version, value: value * 2)
                        async let second = peer.update("conditional", id: id, version: version, value: value * 2 + 1)
                        switch try await [first, second].filter({ $0 != nil }).count {
                        case 1: conflicts += 1
                        // Both writes from one version were accepted: one overwrote the other unseen.
                        case 2: lostUpdates += 1
                        default: throw BenchError("\(name): neither update from the current version was accepted")
                        }
                    }
                }
                record("conditional update pairs (exactly one should win)", "pairs/s", name,
                       Double(sizes.conditionalRounds) / conditionalSeconds)
                record("conflicts detected", "of \(sizes.conditionalRounds) pairs", name, Double(conflicts))
                record("lost updates (both of a pair accepted)", "of \(sizes.conditionalRounds) pairs", name,
                       Double(lostUpdates))
                // The change feed.
                progress("  \(name): change feed")
                var read = 0
                let feedSeconds = try await measure { read = try await peer.readFeed("feed").count }
                guard read == sizes.feedRecords else { throw BenchError("\(name)'s feed listed \(read) of \(sizes.feedRecords)") }
                record("change feed read of \(sizes.feedRecords), 200/page", "records/s", name, Double(read) / feedSeconds)
                // Propagation to a second client.
                progress("  \(name): propagation")
                var trips: [Double] = []
                for index in 0..<sizes.propagations {
                    trips.append(try await peer.propagation("propagation", id: "\(tag)-p\(index)", index: index))
                }
                record("propagation to a second client (Kinto polling, Stratus push), p50", "ms", name,
                       percentile(trips, 0.5) * 1000)
                record("propagation to a second client, p99", "ms", name, percentile(trips, 0.99) * 1000)
                // Concurrent writers into one collection, read back afterwards.
                progress("  \(name): concurrent writers")
                for writers in sizes.writers {
                    let row = try await Self.concurrency(
                        peer, system: name, writers: writers, perWriter: sizes.writesPerWriter, round: round,
                        collection: "concurrent-\(tag)-\(writers)")
                    result.concurrency.append(row)
                    record("\(writers) concurrent writers", "records/s", name, row.recordsPerSecond)
                }
            }
            for workload in order {
                let pair = figures[workload]!
                result.add(workload, units[workload]!, stratus: pair.0, kinto: pair.1)
            }
        }
        return result
    }

    /// A new database on the PostgreSQL server for the `.postgres` pair.
    private func database(_ name: String) async throws -> String? {
        guard kind == .postgres, let postgres else { return nil }
        let database = "versus_\(name)_" + UUID().uuidString.prefix(8).lowercased()
        try await PostgresStorage.execute("CREATE DATABASE \(database)", at: postgres)
        var components = URLComponents(string: postgres)!
        components.path = "/" + database
        return components.string!
    }

    /// Creates `count` records in batches as large as the peer takes.
    static func fill(_ peer: any VersusPeer, _ collection: String, count: Int, prefix: String) async throws {
        for start in stride(from: 0, to: count, by: peer.batchLimit) {
            let ids = (start..<min(start + peer.batchLimit, count)).map { "\(prefix)\($0)" }
            let created = try await peer.createBatch(collection, ids: ids, first: start)
            guard created == ids.count else { throw BenchError("a batch created \(created) of \(ids.count) records") }
        }
    }

    /// `writers` clients each create `perWriter` records at once into one collection; then every
    /// record is read back, and an acknowledged write that is missing counts as lost.
    static func concurrency(
        _ peer: any VersusPeer, system: String, writers: Int, perWriter: Int, round: Int, collection: String
    ) async throws -> ConcurrencyRow {
        // The collection (or zone) exists before the writers start.
        guard try await peer.create(collection, id: "first", index: 0) else { throw BenchError("\(system): setup") }
        var acknowledged: Set<String> = []
        var errors = 0
        let seconds = try await measure {
            try await withThrowingTaskGroup(of: (Set<String>, Int).self) { group in
                for writer in 0..<writers {
                    group.addTask {
                        var done: Set<String> = []
                        var failed = 0
                        for index in 0..<perWriter {
                            let id = "w\(writer)-\(index)"
                            if (try? await peer.create(collection, id: id, index: index)) == true {
                                done.insert(id)
                            } else {
                                failed += 1
                            }
                        }
                        return (done, failed)
                    }
                }
                for try await (done, failed) in group {
                    acknowledged.formUnion(done)
                    errors += failed
                }
            }
        }
        let stored = Set(try await peer.readFeed(collection))
        return ConcurrencyRow(
            system: system, writers: writers, round: round, attempted: writers * perWriter,
            acknowledged: acknowledged.count, errors: errors, lost: acknowledged.subtracting(stored).count,
            recordsPerSecond: Double(acknowledged.count) / seconds)
    }
}

// MARK: Kinto

/// A Kinto server started for the run, on a free loopback port.
struct KintoServer {
    let process: SpawnedProcess
    let directory: URL
    let peer: KintoPeer

    static func start(executable: String, postgres: String?) async throws -> KintoServer {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("versus-kinto-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let port = try await freePort()
        let ini = directory.appendingPathComponent("kinto.ini")
        let backend = postgres.map { url in
            let sqlAlchemyURL = url.replacingOccurrences(of: "postgres://", with: "postgresql://")
            return """
                kinto.storage_backend = kinto.core.storage.postgresql
                kinto.storage_url = \(sqlAlchemyURL)
                kinto.cache_backend = kinto.core.cache.postgresql
                kinto.cache_url = \(sqlAlchemyURL)
                kinto.permission_backend = kinto.core.permission.postgresql
                kinto.permission_url = \(sqlAlchemyURL)
                """
        } ?? """
            kinto.storage_backend = kinto.core.storage.memory
            kinto.storage_url =
            kinto.cache_backend = kinto.core.cache.memory
            kinto.cache_url =
            kinto.permission_backend = kinto.core.permission.memory
            kinto.permission_url =
            """
        // Basic auth: any user and password pair is an account, with its own default bucket.
        try """
            [server:main]
            use = egg:waitress#main
            host = 127.0.0.1
            port = \(port)

            [app:main]
            use = egg:kinto
            kinto.includes = kinto.plugins.default_bucket
            \(backend)
            kinto.userid_hmac_secret = \(UUID().uuidString)
            kinto.default_bucket_hmac_secret = \(UUID().uuidString)
            multiauth.policies = basicauth
            kinto.bucket_create_principals = system.Authenticated
            kinto.batch_max_requests = 25

            [loggers]
            keys = root

            [handlers]
            keys = console

            [formatters]
            keys = plain

            [logger_root]
            level = WARN
            handlers = console

            [handler_console]
            class = StreamHandler
            args = (sys.stderr,)
            level = WARN
            formatter = plain

            [formatter_plain]
            format = %(message)s
            """.write(to: ini, atomically: true, encoding: .utf8)
        if postgres != nil { try runToEnd(executable, ["migrate", "--ini", ini.path]) }
        let process = try SpawnedProcess(
            executable: URL(fileURLWithPath: executable), arguments: ["start", "--ini", ini.path, "--port", "\(port)"])
        let peer = KintoPeer(base: "http://127.0.0.1:\(port)/v1", database: postgres)
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            if (try? await peer.get("/")) != nil {
                return KintoServer(process: process, directory: directory, peer: peer)
            }
            guard process.isRunning else { throw BenchError("kinto exited at start; try it by hand: \(executable) start --ini \(ini.path)") }
            try await Task.sleep(for: .milliseconds(200))
        }
        process.send(SIGTERM)
        throw BenchError("kinto did not answer within 60 s")
    }

    /// Kills the server (its WSGI server may take its time over SIGTERM).
    func stop() {
        process.send(SIGKILL)
        process.waitUntilExit()
        try? FileManager.default.removeItem(at: directory)
    }

    private static func runToEnd(_ executable: String, _ arguments: [String]) throws {
        let process = try SpawnedProcess(executable: URL(fileURLWithPath: executable), arguments: arguments)
        guard process.waitUntilExit() == .exit(0) else { throw BenchError("kinto \(arguments.joined(separator: " ")) failed") }
    }
}

/// Kinto's HTTP API as its clients use it: records in the user's default bucket, `PUT` with
/// `If-None-Match: *` to create, `If-Match` to update, `/batch`, `_since` polling.
struct KintoPeer: VersusPeer {
    let base: String
    /// Kinto's PostgreSQL database, when it runs on one.
    let database: String?
    let authorization = "Basic " + Data("bench:benchmark password".utf8).base64EncodedString()
    var batchLimit: Int { 25 }

    struct Reply {
        let status: UInt
        let headers: HTTPHeaders
        let body: JSONValue?
    }

    func send(_ method: HTTPMethod, _ path: String, headers extra: [(String, String)] = [], body: [UInt8]? = nil)
        async throws -> Reply
    {
        var request = HTTPClientRequest(url: path.hasPrefix("http") ? path : base + path)
        request.method = method
        request.headers.add(name: "Authorization", value: authorization)
        request.headers.add(name: "Content-Type", value: "application/json")
        for (name, value) in extra { request.headers.add(name: name, value: value) }
        if let body { request.body = .bytes(ByteBuffer(bytes: body)) }
        let response = try await StratusBench.uncompressedHTTP.execute(request, timeout: .seconds(120))
        let bytes = try await response.body.collect(upTo: 256 << 20)
        return Reply(
            status: response.status.code, headers: response.headers,
            body: bytes.readableBytes == 0 ? nil : try? JSONValue.parse(Array(bytes.readableBytesView)))
    }

    func get(_ path: String) async throws -> Reply {
        let reply = try await send(.GET, path)
        guard reply.status == 200 else { throw BenchError("kinto GET \(path): HTTP \(reply.status)") }
        return reply
    }

    private func recordPath(_ collection: String, _ id: String) -> String {
        "/buckets/default/collections/\(collection)/records/\(id)"
    }

    static func data(_ index: Int) -> [UInt8] {
        var writer = JSONWriter()
        writer.beginObject()
        writer.key("data")
        writer.beginObject()
        writer.field("title", "Note number \(index)")
        writer.field("body", Workload.body)
        writer.field("count", Int64(index))
        writer.key("score")
        writer.double(Double(index) / 7)
        writer.field("when", 1_700_000_000_000 + Int64(index))
        writer.endObject()
        writer.endObject()
        return writer.bytes
    }

    func create(_ collection: String, id: String, index: Int) async throws -> Bool {
        let reply = try await send(
            .PUT, recordPath(collection, id), headers: [("If-None-Match", "*")], body: Self.data(index))
        return reply.status == 201
    }

    func createBatch(_ collection: String, ids: [String], first: Int) async throws -> Int {
        var writer = JSONWriter()
        writer.beginObject()
        writer.key("defaults")
        writer.beginObject()
        writer.field("method", "PUT")
        writer.key("headers")
        writer.beginObject()
        writer.field("If-None-Match", "*")
        writer.endObject()
        writer.endObject()
        writer.key("requests")
        writer.beginArray()
        for (offset, id) in ids.enumerated() {
            writer.beginObject()
            writer.field("path", recordPath(collection, id))
            writer.key("body")
            writer.raw(Self.data(first + offset))
            writer.endObject()
        }
        writer.endArray()
        writer.endObject()
        let reply = try await send(.POST, "/batch", body: writer.bytes)
        guard reply.status == 200, case .array(let responses)? = try reply.body?.object()["responses"] else {
            throw BenchError("kinto /batch: HTTP \(reply.status)")
        }
        return responses.filter { (try? $0.object().decode("status") as Int) == 201 }.count
    }

    func version(_ collection: String, id: String) async throws -> String {
        let reply = try await get(recordPath(collection, id))
        guard let etag = reply.headers.first(name: "ETag") else { throw BenchError("kinto: no ETag") }
        return etag
    }

    func update(_ collection: String, id: String, version: String, value: Int) async throws -> String? {
        let reply = try await send(.PUT, recordPath(collection, id), headers: [("If-Match", version)], body: Self.data(value))
        switch reply.status {
        case 200: return reply.headers.first(name: "ETag")
        case 412: return nil
        default: throw BenchError("kinto conditional update: HTTP \(reply.status)")
        }
    }

    /// Through the API on the memory backend; on PostgreSQL, straight into Kinto's `objects` table
    /// with distinct, increasing timestamps in the last `count` milliseconds (as writes one after the
    /// other would leave them), because Kinto writes about 70 records/s there.
    func seed(_ collection: String, count: Int) async throws {
        guard let database else {
            try await VersusPair.fill(self, collection, count: count, prefix: "f")
            return
        }
        let reply = try await send(.PUT, "/buckets/default/collections/\(collection)", body: Array("{}".utf8))
        guard reply.status == 200 || reply.status == 201 else { throw BenchError("kinto: collection: HTTP \(reply.status)") }
        guard let data = try await get("/buckets/default").body?.object()["data"],
            let bucket: String = try? data.object().decode("id")
        else { throw BenchError("kinto: the default bucket has no id") }
        try await PostgresStorage.execute(
            """
            INSERT INTO objects (id, parent_id, resource_name, last_modified, data, deleted)
            SELECT 'f' || i, '/buckets/\(bucket)/collections/\(collection)', 'record',
                from_epoch(as_epoch(now()::timestamp) - \(count) + i),
                jsonb_build_object('title', 'Note number ' || i, 'body', '\(Workload.body)', 'count', i,
                    'score', i / 7.0, 'when', 1700000000000 + i),
                false
            FROM generate_series(0, \(count - 1)) AS i
            """, at: database)
    }

    func readFeed(_ collection: String) async throws -> [String] {
        var ids: [String] = []
        var next: String? = "/buckets/default/collections/\(collection)/records?_since=0&_sort=last_modified&_limit=200"
        while let path = next {
            let reply = try await get(path)
            guard case .array(let records)? = try reply.body?.object()["data"] else { throw BenchError("kinto: no data") }
            for record in records { ids.append(try record.object().decode("id")) }
            next = reply.headers.first(name: "Next-Page")
        }
        return ids
    }

    /// The reader polls `_since` back to back, the fastest a Kinto client learns of a change.
    func propagation(_ collection: String, id: String, index: Int) async throws -> Double {
        let list = "/buckets/default/collections/\(collection)/records"
        let since = try await send(.GET, list + "?_limit=1").headers.first(name: "ETag")?
            .trimmingCharacters(in: CharacterSet(charactersIn: "\"")) ?? "0"
        let start = ContinuousClock.now
        async let saved = create(collection, id: id, index: index)
        while true {
            let reply = try await send(.GET, list + "?_since=\(since)")
            if case .array(let records)? = try reply.body?.object()["data"],
                records.contains(where: { (try? $0.object().decode("id") as String) == id })
            {
                break
            }
        }
        guard try await saved else { throw BenchError("kinto refused a save") }
        return Double((ContinuousClock.now - start).components.attoseconds) / 1e18
            + Double((ContinuousClock.now - start).components.seconds)
    }
}

// MARK: Stratus

/// A `stratus serve` process for the run, with one signed-up user.
struct StratusServer {
    let process: ServerProcess
    let directory: URL
    let peer: StratusPeer

    static func start(postgres: String?) async throws -> StratusServer {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("versus-stratus-\(UUID().uuidString)")
        var arguments = ["serve", "--data", directory.path, "--port", "0", "--log-level", "error"]
        if let postgres { arguments += ["--database", postgres] }
        let process = try ServerProcess(executable: ServerProcess.sibling("stratus"), arguments: arguments)
        let account = try await BenchAccount.signUp(on: process, dataDirectory: directory, username: "bench")
        let peer = StratusPeer(
            base: "\(process.url)/database/1/\(account.container)/development/private", serverURL: process.url,
            account: account, zones: ZoneRegistry())
        return StratusServer(process: process, directory: directory, peer: peer)
    }

    func stop() {
        process.stop()
        try? FileManager.default.removeItem(at: directory)
    }
}

/// The zones a Stratus peer has created (collections map to zones).
final class ZoneRegistry: Sendable {
    private let created = Mutex<Set<String>>([])

    func insert(_ zone: String) -> Bool { created.withLock { $0.insert(zone).inserted } }
}

/// Stratus's HTTP API as its clients use it: `records/modify` (200 operations at most), change
/// tags, `records/changes`, and push through the SDK.
struct StratusPeer: VersusPeer {
    let base: String
    let serverURL: String
    let account: BenchAccount
    let zones: ZoneRegistry
    var batchLimit: Int { 200 }
    private var tokens: String { account.tokens }

    private func post(_ endpoint: String, _ body: [UInt8]) async throws -> JSONObject {
        try JSONValue.parse(Array(try await StratusBench.post(StratusBench.uncompressedHTTP, "\(base)/\(endpoint)\(tokens)", body)
            .readableBytesView)).object()
    }

    private func ensureZone(_ zone: String) async throws {
        guard zones.insert(zone) else { return }
        _ = try await post(
            Endpoints.zonesModify.path, Array(#"{"operations":[{"operationType":"create","zone":{"zoneID":{"zoneName":"\#(zone)"}}}]}"#.utf8))
    }

    /// Writes a `records/modify` body and returns the per-record results.
    private func modify(_ zone: String, _ operations: (inout JSONWriter) -> Void) async throws -> [JSONObject] {
        try await ensureZone(zone)
        var writer = JSONWriter()
        writer.beginObject()
        writer.key("zoneID")
        ZoneID(zoneName: zone).write(to: &writer)
        writer.key("operations")
        writer.beginArray()
        operations(&writer)
        writer.endArray()
        writer.field("desiredKeys", array: [String]())
        writer.endObject()
        let answer = try await post(Endpoints.recordsModify.path, writer.bytes)
        guard case .array(let records)? = answer["records"] else { throw BenchError("stratus: no records in the answer") }
        return try records.map { try $0.object() }
    }

    private static func operation(_ type: String, id: String, index: Int, tag: String? = nil, to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("operationType", type)
        writer.key("record")
        RecordDictionary(recordName: id, recordType: "Note", recordChangeTag: tag, fields: Workload.fields(index))
            .write(to: &writer)
        writer.endObject()
    }

    func create(_ collection: String, id: String, index: Int) async throws -> Bool {
        let results = try await modify(collection) { Self.operation("create", id: id, index: index, to: &$0) }
        return results.first?["serverErrorCode"] == nil
    }

    func createBatch(_ collection: String, ids: [String], first: Int) async throws -> Int {
        let results = try await modify(collection) { writer in
            for (offset, id) in ids.enumerated() { Self.operation("create", id: id, index: first + offset, to: &writer) }
        }
        return results.filter { $0["serverErrorCode"] == nil }.count
    }

    func version(_ collection: String, id: String) async throws -> String {
        var writer = JSONWriter()
        writer.beginObject()
        writer.key("zoneID")
        ZoneID(zoneName: collection).write(to: &writer)
        writer.key("records")
        writer.beginArray()
        writer.beginObject()
        writer.field("recordName", id)
        writer.endObject()
        writer.endArray()
        writer.endObject()
        let answer = try await post(Endpoints.recordsLookup.path, writer.bytes)
        guard case .array(let records)? = answer["records"], let record = records.first,
            let tag: String = try? record.object().decode("recordChangeTag")
        else { throw BenchError("stratus lookup: no change tag") }
        return tag
    }

    func update(_ collection: String, id: String, version: String, value: Int) async throws -> String? {
        let results = try await modify(collection) { Self.operation("update", id: id, index: value, tag: version, to: &$0) }
        guard let result = results.first else { throw BenchError("stratus update: no result") }
        if let code: String = try? result.decode("serverErrorCode") {
            guard code == "CONFLICT" else { throw BenchError("stratus update: \(code)") }
            return nil
        }
        return try result.decode("recordChangeTag")
    }

    func seed(_ collection: String, count: Int) async throws {
        try await VersusPair.fill(self, collection, count: count, prefix: "f")
    }

    func readFeed(_ collection: String) async throws -> [String] {
        var names: [String] = []
        var token: String?
        while true {
            var body = #"{"zoneID":{"zoneName":"\#(collection)"},"resultsLimit":200"#
            if let token { body += #","syncToken":"\#(token)""# }
            body += "}"
            let page = try await post(Endpoints.recordsChanges.path, Array(body.utf8))
            if case .array(let records)? = page["records"] {
                for record in records { names.append(try record.object().decode("recordName")) }
            }
            token = try page.decode("syncToken")
            guard (try? page.decode("moreComing") as Bool) == true else { return names }
        }
    }

    /// A second device, signed in as the same user, hears of the save through its push connection
    /// and reads the zone's changes since its token.
    func propagation(_ collection: String, id: String, index: Int) async throws -> Double {
        try await ensureZone(collection)
        let reader = PropagationReader.shared(for: self)
        return try await reader.measure(collection: collection) {
            guard try await create(collection, id: id, index: index) else { throw BenchError("stratus refused a save") }
        } until: { names in names.contains(id) }
    }
}

/// The second client of the Stratus propagation workload: an SDK container with a zone subscription
/// and its push connection, kept for the whole run.
actor PropagationReader {
    private static let readers = Mutex<[String: PropagationReader]>([:])

    static func shared(for peer: StratusPeer) -> PropagationReader {
        readers.withLock { readers in
            if let reader = readers[peer.serverURL] { return reader }
            let reader = PropagationReader(peer: peer)
            readers[peer.serverURL] = reader
            return reader
        }
    }

    private let container: Container
    private var events: AsyncThrowingStream<PushEvent, any Error>.AsyncIterator?
    private var tokens: [String: ServerChangeToken] = [:]

    private init(peer: StratusPeer) {
        container = Container(
            identifier: peer.account.container, serverURL: URL(string: peer.serverURL)!, apiToken: peer.account.apiToken,
            session: Container.Session(
                webAuthToken: peer.account.webAuthToken, userRecordName: peer.account.userRecordName,
                expirationDate: Date().addingTimeInterval(86_400)),
            configuration: Container.Configuration(deviceID: "reader"))
    }

    func measure(
        collection: String, save: @Sendable () async throws -> Void, until arrived: ([String]) -> Bool
    ) async throws -> Double {
        let zone = RecordZone.ID(zoneName: collection)
        let database = container.privateCloudDatabase
        if tokens[collection] == nil {
            try await database.save(Subscription.recordZone(zoneID: zone, subscriptionID: "versus-\(collection)"))
            var iterator = container.notifications().makeAsyncIterator()
            _ = try await iterator.next(isolation: self)  // the connection's first event: notifications may have been missed
            events = iterator
            tokens[collection] = try await database.recordZoneChanges(inZoneWith: zone, since: nil).changeToken
        }
        let start = ContinuousClock.now
        try await save()
        while true {
            guard var iterator = events else { throw BenchError("the reader has no push connection") }
            let event = try await iterator.next(isolation: self)
            events = iterator
            guard case .notification? = event else {
                if event == nil { throw BenchError("the reader's push connection ended") }
                continue
            }
            let changes = try await database.recordZoneChanges(inZoneWith: zone, since: tokens[collection])
            tokens[collection] = changes.changeToken
            if arrived(changes.modificationResultsByID.keys.map(\.recordName)) { break }
        }
        let elapsed = ContinuousClock.now - start
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }
}

/// A free TCP port on loopback: one NIO binds and lets go.
func freePort() async throws -> Int {
    let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
        .bind(host: "127.0.0.1", port: 0).get()
    defer { channel.close(promise: nil) }
    guard let port = channel.localAddress?.port else { throw BenchError("no free port") }
    return port
}

// MARK: Report

enum VersusReport {
    static func markdown(_ pairs: [VersusPair.Result], rounds: Int, quick: Bool, command: [String]) -> String {
        func f(_ value: Double) -> String { value >= 100 ? String(Int(value.rounded())) : String(format: "%.2f", value) }
        var lines: [String] = []
        let machine = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8))?
            .split(separator: "\n").first { $0.hasPrefix("model name") }?.split(separator: ":").last?
            .trimmingCharacters(in: .whitespaces) ?? "unknown CPU"
        let cores = ProcessInfo.processInfo.activeProcessorCount
        let date = ISO8601DateFormatter().string(from: Date())
        lines.append("Run \(date) on \(cores) cores (\(machine)), \(rounds) round(s)\(quick ? ", quick sizes" : ""); "
                     + "command: `\(command.map { $0.contains(" ") ? "'\($0)'" : $0 }.joined(separator: " "))`")
        for pair in pairs {
            lines.append("")
            lines.append("### \(pair.kind.rawValue)")
            lines.append("")
            lines.append("| workload | unit | Stratus median (min–max) | Kinto median (min–max) | Stratus / Kinto, per round |")
            lines.append("|---|---|---|---|---|")
            for workload in pair.order {
                let rounds = pair.figures[workload] ?? []
                let s = Statistics(rounds.map(\.stratus))
                let k = Statistics(rounds.map(\.kinto))
                let ratio = Statistics(rounds.map { $0.kinto == 0 ? 0 : $0.stratus / $0.kinto })
                lines.append(
                    "| \(workload) | \(pair.units[workload] ?? "") | \(f(s.median)) (\(f(s.min))–\(f(s.max))) | "
                        + "\(f(k.median)) (\(f(k.min))–\(f(k.max))) | "
                        + String(format: "%.2f (%.2f–%.2f)", ratio.median, ratio.min, ratio.max) + " |")
            }
            lines.append("")
            lines.append("Concurrent writers (each creates \(pair.sizes.writesPerWriter) records, one request each, into one "
                         + "collection or zone; lost = acknowledged but missing when everything is read back):")
            lines.append("")
            lines.append("| system | writers | round | attempted | acknowledged | errors | lost | records/s |")
            lines.append("|---|---|---|---|---|---|---|---|")
            for row in pair.concurrency {
                lines.append("| \(row.system) | \(row.writers) | \(row.round) | \(row.attempted) | \(row.acknowledged) | "
                             + "\(row.errors) | \(row.lost) | \(f(row.recordsPerSecond)) |")
            }
        }
        return lines.joined(separator: "\n") + "\n"
    }
}
