public import ArgumentParser
import AsyncHTTPClient
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import StratusModel
import StratusServer
import StratusProcess
import StratusSQLite
import StratusStorage

@main
struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stratus-bench",
        abstract: "Measures Stratus beside baselines measured in the same run.",
        subcommands: [
            StratusBench.self, WebSocketFloor.self, VersusCommand.self, DevicePushCommand.self, ShapedNetworkCommand.self, DelayRelayCommand.self,
        ], defaultSubcommand: StratusBench.self)

    /// Runs the command with the allocator settings and the log handler `stratus serve` runs with
    /// (server and clients share this process).
    static func main() async {
        AllocatorSettings.keepFreedMemoryForReuse()
        LoggingSystem.bootstrap { ServerLogHandler(label: $0, format: .text) }
        do {
            var command = try parseAsRoot()
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            exit(withError: error)
        }
    }
}

struct StratusBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "measure",
        abstract: "Measures Stratus over loopback HTTP beside raw GRDB on the same rows, in one run.")

    @Option(help: "Records written by the batched workload and read by the change-feed workload (0 skips the write, save and feed workloads).")
    var records = 100_000

    @Option(help: "Operations per records/modify request (and rows per raw transaction).")
    var batch = 200

    @Option(help: "Records per page of the change-feed workload (Stratus's resultsLimit and the raw read's page), apart from --batch.")
    var feedPage = 200

    @Option(help: "Concurrent clients in the batched-write workload.")
    var clients = 1

    @Option(help: """
        Segments the batched-write workload alternates between Stratus and the raw baseline in, so that \
        both meet the machine as it is at the time (1: all of Stratus's writes, then all of the baseline's).
        """)
    var segments = 10

    @Option(help: """
        Times each round reads the whole change feed through Stratus and through the raw baseline, alternating, \
        so that both meet the machine as it is at the time.
        """)
    var feedReads = 5

    @Option(help: """
        How the write workloads name their records: 'counted' (r0, r1, …: a batch's names are neighbours) or \
        'uuid' (as apps name them: a batch's names land all over every name-keyed B-tree).
        """)
    var recordNames: Workload.RecordNaming = .counted

    @Option(help: "Single-record saves timed for latency.")
    var saves = 2_000

    @Option(help: "Repetitions; each runs Stratus and the raw baseline on fresh files.")
    var repeats = 3

    @Option(help: "Commit durability of both Stratus and the baseline: full or normal.")
    var durability: SQLiteStorage.Durability = .full

    @Option(help: """
        Environment of the write and feed workloads: 'development' (every field gets CloudKit's automatic \
        indexes on first save) or 'production' (a deployed schema indexing only 'count').
        """)
    var environment: ContainerEnvironment = .development

    @Option(help: "Records in the zone the query workload reads (0 skips it).")
    var queryRecords = 1_000_000

    @Option(help: "Queries of each kind timed per round.")
    var queries = 500

    @Option(help: "Size of the asset the transfer workload uploads and downloads, in MiB (0 skips it).")
    var assetMegabytes = 50

    @Option(help: "Records saved through the client SDK, beside raw requests of the same bodies (0 skips it).")
    var sdkRecords = 10_000

    @Option(help: "Single saves and fetches timed through the SDK and as raw requests, per round.")
    var sdkCalls = 1_000

    @Option(
        parsing: .upToNextOption,
        help: "Listening devices of the push workload, one measurement each (0 skips it; it needs the release-built stratus beside this executable).")
    var pushDevices: [Int] = [1, 100, 1_000, 10_000]

    @Option(help: "Deliveries timed with 100 devices listening; fewer with more devices, at least 50.")
    var pushTrials = 200

    @Option(
        parsing: .upToNextOption,
        help: "Records in the zone a fresh sync engine fetches, one measurement each (0 skips the initial-sync workload).")
    var syncRecords: [Int] = [100_000, 1_000_000]

    @Option(help: "Edits timed from one engine to another, and as many by hand with the SDK (0 skips the sync-latency workload).")
    var syncTrials = 200

    @Option(help: "Edits timed from a participant of a shared zone to the owner's device, and as many between the owner's own devices (0 skips the sharing workload).")
    var shareTrials = 200

    @Option(help: "Records in the shared zone whose change feed the sharing workload reads as participant and as owner.")
    var shareRecords = 50_000

    @Option(help: "A PostgreSQL server where the bench may create databases, for the PostgreSQL workload (default: STRATUS_BENCH_POSTGRES_URL; without one it is skipped).")
    var postgres: String?

    @Option(help: "Records written per round by the PostgreSQL workload (0 skips it).")
    var postgresRecords = 40_000

    @Option(help: "Concurrent writers of the PostgreSQL workload, each into a zone of its own.")
    var postgresWriters = 8

    @Option(help: "Writers of the PostgreSQL one-zone workload, each saving \(PostgresBench.savesPerZoneWriter) records one request at a time into one zone (0 skips it).")
    var postgresZoneWriters = 64

    @Option(help: "Rows a StratusStore writes and mirrors to a second device's store (0 skips the store workload).")
    var storeRows = 100_000

    @Option(help: "Write the results as JSON to this file.")
    var output: String?

    struct Round: Encodable {
        var stratusBatchedWrites = 0.0
        var rawBatchedWrites = 0.0
        /// One `records/modify` request of the batched workload under its concurrent clients, and
        /// one transaction of the baseline's batched inserts.
        var stratusWriteP50 = 0.0
        var stratusWriteP99 = 0.0
        var rawWriteP50 = 0.0
        var rawWriteP99 = 0.0
        var stratusSaveP50 = 0.0
        var stratusSaveP99 = 0.0
        var rawSaveP50 = 0.0
        var rawSaveP99 = 0.0
        var stratusFeedRead = 0.0
        var rawFeedRead = 0.0
    }

    func validate() throws {
        guard feedReads >= 1 else { throw ValidationError("--feed-reads must be at least 1 (got \(feedReads))") }
    }

    func run() async throws {
        let fieldsJSON = (0..<1_000).map(Workload.fieldsJSON)
        var rounds: [Round] = []
        for round in 1...repeats where records > 0 {
            var result = Round()
            let directory = try temporaryDirectory()
            defer { try? FileManager.default.removeItem(at: directory) }
            let raw = try RawSQLiteBaseline(path: directory.appendingPathComponent("raw.sqlite").path, durability: durability)
            try await measureRound(into: &result, beside: raw, fields: fieldsJSON, round: round)
            rounds.append(result)
        }
        var queryRounds: [QueryBench.Round] = []
        var seedRate = 0.0
        if queryRecords > 0 {
            let bench = try await BenchServer.start(durability: durability)
            progress("queries: seeding \(queryRecords) records through storage")
            let (queryBench, seedSeconds) = try await QueryBench.prepare(
                bench, records: queryRecords, queries: queries, progress: progress)
            seedRate = Double(queryRecords) / seedSeconds
            for round in 1...repeats {
                progress("round \(round): \(queries) EQUALS and \(queries) range queries, Stratus then raw SQL")
                queryRounds.append(try await queryBench.measureRound())
            }
            try await bench.stop()
        }
        var assetRounds: [AssetBench.Round] = []
        if assetMegabytes > 0 {
            let bench = try await BenchServer.start(durability: durability)
            let assetBench = try AssetBench.prepare(bench, megabytes: assetMegabytes)
            for round in 1...repeats {
                progress("round \(round): \(assetMegabytes) MiB asset upload, download and disk copy")
                assetRounds.append(try await assetBench.measureRound(round))
            }
            try await bench.stop()
        }
        var sdkRounds: [SDKBench.Round] = []
        if sdkRecords > 0 {
            let sdkBench = SDKBench(records: sdkRecords, calls: sdkCalls, durability: durability)
            for round in 1...repeats { sdkRounds.append(try await sdkBench.measureRound(round, progress: progress)) }
        }
        var pushRounds: [PushBench.Round] = []
        let pushDevices = pushDevices.filter { $0 > 0 }
        if !pushDevices.isEmpty {
            let http = Self.rawHTTPClient()
            do {
                pushRounds = try await PushBench(
                    deviceCounts: pushDevices.sorted(), trials: pushTrials, http: http, progress: progress
                ).run()
            } catch {
                try? await http.shutdown()
                throw error
            }
            try await http.shutdown()
        }
        var postgresRounds: [PostgresBench.Round] = []
        if let url = postgres ?? ProcessInfo.processInfo.environment["STRATUS_BENCH_POSTGRES_URL"], postgresRecords > 0 {
            let bench = PostgresBench(
                serverURL: url, records: postgresRecords, batch: batch, writers: postgresWriters, saves: saves,
                zoneWriters: postgresZoneWriters, environment: environment, progress: progress)
            for round in 1...repeats { postgresRounds.append(try await bench.measureRound(round)) }
        }
        let syncBench = SyncBench(durability: durability, progress: progress)
        var syncLatencyRounds: [SyncBench.LatencyRound] = []
        if syncTrials > 0 {
            for _ in 1...repeats { syncLatencyRounds.append(try await syncBench.measureLatency(trials: syncTrials)) }
        }
        var initialSyncRounds: [SyncBench.InitialSyncRound] = []
        for count in syncRecords where count > 0 {
            initialSyncRounds.append(try await syncBench.measureInitialSync(records: count))
        }
        var shareRounds: [ShareBench.Round] = []
        if shareTrials > 0 {
            let shareBench = ShareBench(durability: durability, progress: progress)
            for _ in 1...repeats {
                shareRounds.append(try await shareBench.measureRound(trials: shareTrials, records: shareRecords))
            }
        }
        var storeRounds: [StoreBench.Round] = []
        if storeRows > 0 {
            let storeBench = StoreBench(rows: storeRows, durability: durability, progress: progress)
            for round in 1...repeats { storeRounds.append(try await storeBench.measureRound(round)) }
        }
        try report(
            rounds, queries: queryRounds, seedRate: seedRate, assets: assetRounds, sdk: sdkRounds, push: pushRounds,
            syncLatency: syncLatencyRounds, initialSync: initialSyncRounds, sharing: shareRounds, postgres: postgresRounds,
            store: storeRounds)
    }

    private func temporaryDirectory() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("stratus-bench-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    private func progress(_ text: String) {
        FileHandle.standardError.write(Data("[stratus-bench] \(text)\n".utf8))
    }

    // MARK: Stratus over HTTP

    /// Measures Stratus's writes, saves and feed, each beside the raw baseline's: its batched inserts
    /// of the same rows (with the index rows of `fields` under the schema the first segment of
    /// Stratus's writes ended with: in development, the one it grew) between segments of Stratus's
    /// writes, its single-row saves after Stratus's, and its reads of every row alternating with
    /// Stratus's feed reads.
    private func measureRound(
        into result: inout Round, beside raw: RawSQLiteBaseline, fields: [[UInt8]], round: Int
    ) async throws {
        let bench = try await BenchServer.start(durability: durability)
        do {
            if environment == .production {
                let schema = try Schema(parsing: QueryBench.schema)
                _ = try await bench.storage.updateSchema(
                    container: bench.credentials.container, environment: .production) { _ in schema }
            }
            let http = bench.http
            let base = bench.databaseURL(environment)
            let query = bench.tokens
            _ = try await Self.post(
                http, "\(base)/zones/modify\(query)",
                Array(#"{"operations":[{"operationType":"create","zone":{"zoneID":{"zoneName":"Bench"}}}]}"#.utf8))

            progress("round \(round): Stratus batched writes (\(records) records, \(batch) per request, \(clients) client(s))")
            let bodies = stride(from: 0, to: records, by: batch).map {
                Workload.modifyBody($0..<min($0 + batch, records), zone: "Bench", prefix: "r", naming: recordNames)
            }
            let writers = try await ClientLoad.connect(host: "127.0.0.1", port: bench.server.port, connections: clients)
            let modifyPath = String("\(base)/records/modify\(query)".dropFirst(bench.server.baseURL.count))
            let groupsBefore = bench.storage.commitGroupCounts
            var (writeSeconds, rawWriteSeconds) = (0.0, 0.0)
            var (writeLatencies, rawWriteLatencies): ([Double], [Double]) = ([], [])
            var indexEntries: [[IndexEntry]]?
            // Segment by segment, Stratus writes its share of the bodies, then the baseline inserts
            // the same records.
            let segmentCount = max(1, min(segments, bodies.count))
            for segment in 0..<segmentCount {
                let requests = segment * bodies.count / segmentCount..<(segment + 1) * bodies.count / segmentCount
                writeSeconds += try await measure {
                    writeLatencies += try await writers.run(BodyQueue(bodies[requests]), to: modifyPath)
                }
                if indexEntries == nil {
                    let schema = try await bench.storage.schema(container: bench.credentials.container, environment: environment)
                    indexEntries = RawSQLiteBaseline.indexEntries(of: fields, schema: schema)
                }
                let rows = requests.lowerBound * batch..<min(requests.upperBound * batch, records)
                for start in stride(from: rows.lowerBound, to: rows.upperBound, by: batch) {
                    let transaction = start..<min(start + batch, rows.upperBound)
                    let seconds = try await measure {
                        try await raw.insert(
                            transaction, batch: batch, prefix: "r", naming: recordNames, fields: fields,
                            indexEntries: indexEntries!)
                    }
                    rawWriteSeconds += seconds
                    rawWriteLatencies.append(seconds)
                }
            }
            await writers.close()
            let groupsAfter = bench.storage.commitGroupCounts
            progress(
                "round \(round): \(groupsAfter.writes - groupsBefore.writes) record writes committed in "
                    + "\(groupsAfter.groups - groupsBefore.groups) commits; the baseline inserted the same rows "
                    + "(\(indexEntries!.map(\.count).reduce(0, +) / indexEntries!.count) index rows per record) in "
                    + "\(segmentCount) segments between them")
            result.stratusBatchedWrites = Double(records) / writeSeconds
            result.rawBatchedWrites = Double(records) / rawWriteSeconds
            result.stratusWriteP50 = percentile(writeLatencies, 0.5) * 1000
            result.stratusWriteP99 = percentile(writeLatencies, 0.99) * 1000
            result.rawWriteP50 = percentile(rawWriteLatencies, 0.5) * 1000
            result.rawWriteP99 = percentile(rawWriteLatencies, 0.99) * 1000

            progress("round \(round): Stratus single-record saves (\(saves))")
            var latencies: [Double] = []
            for index in 0..<saves {
                let body = Workload.modifyBody(index..<index + 1, zone: "Bench", prefix: "s", naming: recordNames)
                latencies.append(try await measure { _ = try await Self.post(http, "\(base)/records/modify\(query)", body) })
            }
            result.stratusSaveP50 = percentile(latencies, 0.5) * 1000
            result.stratusSaveP99 = percentile(latencies, 0.99) * 1000

            progress("round \(round): raw GRDB single-row saves")
            latencies = []
            for index in 0..<saves {
                latencies.append(try await measure {
                    try await raw.insert(
                        records + index..<records + index + 1, batch: 1, prefix: "s", naming: recordNames, fields: fields,
                        indexEntries: indexEntries!)
                })
            }
            result.rawSaveP50 = percentile(latencies, 0.5) * 1000
            result.rawSaveP99 = percentile(latencies, 0.99) * 1000

            // A whole read leaves nothing read ahead behind it (its last page has no more coming), so
            // the baseline's turn runs on a quiet server.
            progress("round \(round): Stratus change feed read and the raw read of the same rows, \(feedReads) times each")
            let reader = try await ClientLoad.connect(host: "127.0.0.1", port: bench.server.port, connections: 1)
            let changesPath = String("\(base)/records/changes\(query)".dropFirst(bench.server.baseURL.count))
            var (feedSeconds, rawFeedSeconds) = (0.0, 0.0)
            var (feedCPU, rawFeedCPU) = (0.0, 0.0)
            for _ in 0..<feedReads {
                let walk = FeedWalk(zoneName: "Bench", resultsLimit: feedPage)
                feedCPU -= processCPUSeconds()
                feedSeconds += try await measure { _ = try await reader.run(walk, to: changesPath) }
                feedCPU += processCPUSeconds()
                var read = walk.records
                guard read == records + saves else { throw BenchError("the feed listed \(read) records, expected \(records + saves)") }
                rawFeedCPU -= processCPUSeconds()
                rawFeedSeconds += try await measure { read = try await raw.readAll(page: feedPage) }
                rawFeedCPU += processCPUSeconds()
                guard read == records + saves else { throw BenchError("the raw read gave \(read) rows, expected \(records + saves)") }
            }
            await reader.close()
            let recordsRead = Double((records + saves) * feedReads)
            let pages = recordsRead / Double(feedPage)
            progress(String(
                format: "round %d: CPU per page of %d: Stratus %.3f ms (server and client), raw read %.3f ms", round, feedPage,
                feedCPU * 1000 / pages, rawFeedCPU * 1000 / pages))
            result.stratusFeedRead = recordsRead / feedSeconds
            result.rawFeedRead = recordsRead / rawFeedSeconds
            try await bench.stop()
        } catch {
            try? await bench.stop()
            throw error
        }
    }

    /// An HTTP client for the benches' raw requests, never shut down (as `HTTPClient.shared`), that
    /// sends no `Accept-Encoding`: answers come uncompressed, as the raw baselines beside them read
    /// their rows. (The shared client asks for gzip and refuses answers that inflate more than 25
    /// times, which a page of similar records does.)
    static let uncompressedHTTP = rawHTTPClient()

    /// The most clients any workload runs at once (`--clients`, the concurrent writers).
    static let maximumConcurrentClients = 64

    /// An HTTP client that sends no `Accept-Encoding` and opens a connection for each concurrent
    /// request, up to ``maximumConcurrentClients``, as that many devices would. (AsyncHTTPClient's
    /// default, 8 connections per host, would queue the other writers of a 64-writer workload inside
    /// the client, where the server never sees them.)
    static func rawHTTPClient() -> HTTPClient {
        var configuration = HTTPClient.Configuration()
        configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = maximumConcurrentClients
        return HTTPClient(eventLoopGroup: MultiThreadedEventLoopGroup.singleton, configuration: configuration)
    }

    static func post(_ http: HTTPClient, _ url: String, _ body: [UInt8]) async throws -> ByteBuffer {
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.body = .bytes(ByteBuffer(bytes: body))
        let response = try await http.execute(request, timeout: .seconds(120))
        let buffer = try await response.body.collect(upTo: 64 << 20)
        guard response.status == .ok else { throw BenchError("HTTP \(response.status.code): \(String(buffer: buffer))") }
        return buffer
    }

    // MARK: Report

    private func report(
        _ rounds: [Round], queries queryRounds: [QueryBench.Round], seedRate: Double, assets assetRounds: [AssetBench.Round],
        sdk sdkRounds: [SDKBench.Round], push pushRounds: [PushBench.Round], syncLatency: [SyncBench.LatencyRound],
        initialSync: [SyncBench.InitialSyncRound], sharing shareRounds: [ShareBench.Round],
        postgres postgresRounds: [PostgresBench.Round], store storeRounds: [StoreBench.Round]
    ) throws {
        func f(_ value: Double) -> String {
            value >= 100 ? String(Int(value.rounded())) : String(format: "%.3f", value)
        }
        func compare<R>(_ rounds: [R], _ name: String, _ unit: String, _ stratus: KeyPath<R, Double>, _ raw: KeyPath<R, Double>)
            -> String
        {
            let s = Statistics(rounds.map { $0[keyPath: stratus] })
            let r = Statistics(rounds.map { $0[keyPath: raw] })
            let ratio = Statistics(rounds.map { $0[keyPath: stratus] / $0[keyPath: raw] })
            return "| \(name) | \(unit) | \(f(s.median)) (\(f(s.min))–\(f(s.max))) | \(f(r.median)) (\(f(r.min))–\(f(r.max))) | "
                + String(format: "%.2f (%.2f–%.2f)", ratio.median, ratio.min, ratio.max) + " |"
        }
        func row(_ name: String, _ unit: String, _ stratus: KeyPath<Round, Double>, _ raw: KeyPath<Round, Double>) -> String {
            compare(rounds, name, unit, stratus, raw)
        }
        let lines = [
            "| workload | unit | Stratus median (min–max) | raw GRDB median (min–max) | Stratus / raw, per round |",
            "|---|---|---|---|---|",
            row("batched creates, \(batch)/request, \(clients) client(s)", "records/s", \.stratusBatchedWrites, \.rawBatchedWrites),
            row("one batched-create request (raw: transaction), p50", "ms", \.stratusWriteP50, \.rawWriteP50),
            row("one batched-create request (raw: transaction), p99", "ms", \.stratusWriteP99, \.rawWriteP99),
            row("single-record save, p50", "ms", \.stratusSaveP50, \.rawSaveP50),
            row("single-record save, p99", "ms", \.stratusSaveP99, \.rawSaveP99),
            row("change feed read, \(feedPage)/page", "records/s", \.stratusFeedRead, \.rawFeedRead),
        ]
        print("\(repeats) rounds, durability \(durability.rawValue), \(environment.rawValue) environment")
        if !rounds.isEmpty {
            print("\n\(records) records\n")
            print(lines.joined(separator: "\n"))
        }
        if !queryRounds.isEmpty {
            print("\nQueries over \(queryRecords) records in one zone (indexed INT64 field), \(queries) of each kind per round; "
                  + "seeding through storage ran at \(Int(seedRate)) records/s\n")
            print([
                "| workload | unit | Stratus over HTTP median (min–max) | same SQL on the same file median (min–max) | Stratus / raw, per round |",
                "|---|---|---|---|---|",
                compare(queryRounds, "EQUALS, 1 result, p50", "ms", \.stratusEqualsP50, \.rawEqualsP50),
                compare(queryRounds, "EQUALS, 1 result, p99", "ms", \.stratusEqualsP99, \.rawEqualsP99),
                compare(queryRounds, "range + sort, 100 results, p50", "ms", \.stratusRangeP50, \.rawRangeP50),
                compare(queryRounds, "range + sort, 100 results, p99", "ms", \.stratusRangeP99, \.rawRangeP99),
            ].joined(separator: "\n"))
        }
        if !assetRounds.isEmpty {
            print("\nOne \(assetMegabytes) MiB asset per round\n")
            print([
                "| workload | unit | Stratus over HTTP median (min–max) | disk copy median (min–max) | Stratus / copy, per round |",
                "|---|---|---|---|---|",
                compare(assetRounds, "upload", "MiB/s", \.uploadMBps, \.diskCopyMBps),
                compare(assetRounds, "download", "MiB/s", \.downloadMBps, \.diskCopyMBps),
            ].joined(separator: "\n"))
            let up = Statistics(assetRounds.map(\.uploadPeakMB))
            let down = Statistics(assetRounds.map(\.downloadPeakMB))
            print("\nPeak resident memory growth of the whole process (server and client) during one transfer: "
                  + "upload \(f(up.median)) MiB (\(f(up.min))–\(f(up.max))), download \(f(down.median)) MiB "
                  + "(\(f(down.min))–\(f(down.max)))")
        }
        if !sdkRounds.isEmpty {
            print("\nThe client SDK beside raw HTTP requests of the same bodies (same server, same round; "
                  + "\(sdkRecords) records, \(sdkCalls) single calls of each kind, SDK and raw alternating)\n")
            print([
                "| workload | unit | SDK median (min–max) | raw HTTP median (min–max) | SDK / raw, per round |",
                "|---|---|---|---|---|",
                compare(sdkRounds, "\(sdkRecords)-record save, 200/request", "records/s", \.sdkBatchedSave, \.rawBatchedSave),
                compare(sdkRounds, "single-record save, p50", "ms", \.sdkSaveP50, \.rawSaveP50),
                compare(sdkRounds, "single-record fetch, p50", "ms", \.sdkFetchP50, \.rawFetchP50),
            ].joined(separator: "\n"))
        }
        if !pushRounds.isEmpty {
            print("\nPush: a save through HTTP until the notification reached every listening device (all devices "
                  + "of one user with a zone subscription), beside a raw WebSocket broadcast server (same client, same "
                  + "run, both servers as child processes)\n")
            print("| devices listening | Stratus p50 / p99 / last device (ms) | raw WebSocket p50 / p99 / last device (ms) | "
                  + "server memory per connection, Stratus / raw (KiB) |")
            print("|---|---|---|---|")
            for round in pushRounds {
                print("| \(round.devices) | \(f(round.stratusP50)) / \(f(round.stratusP99)) / \(f(round.stratusLastMedian)) | "
                      + "\(f(round.floorP50)) / \(f(round.floorP99)) / \(f(round.floorLastMedian)) | "
                      + "\(f(round.stratusBytesPerConnection / 1024)) / \(f(round.floorBytesPerConnection / 1024)) |")
            }
        }
        if !syncLatency.isEmpty {
            print("\nSync engine latency: an edit from `state.add` on one device to the other device's "
                  + "fetchedRecordZoneChanges event, both engines syncing automatically, beside the same trip by hand "
                  + "with the SDK (a save, the push notification, one read of the zone's changes); \(syncTrials) of each "
                  + "per round, alternating\n")
            print([
                "| workload | unit | engine median (min–max) | by hand median (min–max) | engine / by hand, per round |",
                "|---|---|---|---|---|",
                compare(syncLatency, "edit to other device, p50", "ms", \.engineP50, \.baselineP50),
                compare(syncLatency, "edit to other device, p99", "ms", \.engineP99, \.baselineP99),
            ].joined(separator: "\n"))
        }
        if !initialSync.isEmpty {
            print("\nInitial sync: a fresh engine fetching one zone, beside the same change feed read through the SDK "
                  + "and as raw HTTP requests scanned for their records (the server's rate), same server, same run\n")
            print("| records | engine (records/s, seconds) | SDK reads (records/s) | raw HTTP feed (records/s) | engine / raw |")
            print("|---|---|---|---|---|")
            for round in initialSync {
                print("| \(round.records) | \(f(round.engineRate)) (\(String(format: "%.1f", Double(round.records) / round.engineRate)) s) | "
                      + "\(f(round.sdkRate)) | \(f(round.rawRate)) | \(String(format: "%.2f", round.engineRate / round.rawRate)) |")
            }
        }
        if !shareRounds.isEmpty {
            print("\nSharing: a participant's edit (their engine on the shared database) to the owner's laptop, beside an "
                  + "edit from the owner's phone to the same laptop, \(shareTrials) of each per round, alternating; and the "
                  + "shared zone's change feed (\(shareRecords) records) read through the SDK by the participant, beside the "
                  + "owner reading it from their private database; same server, same run\n")
            print([
                "| workload | unit | shared median (min–max) | own median (min–max) | shared / own, per round |",
                "|---|---|---|---|---|",
                compare(shareRounds, "edit to the owner's device, p50", "ms", \.participantToOwnerP50, \.ownDevicesP50),
                compare(shareRounds, "edit to the owner's device, p99", "ms", \.participantToOwnerP99, \.ownDevicesP99),
                compare(shareRounds, "change feed read", "records/s", \.sharedFeedRead, \.privateFeedRead),
            ].joined(separator: "\n"))
        }
        if !postgresRounds.isEmpty {
            print("\nPostgreSQL: \(postgresRecords) records per round by \(postgresWriters) writers (a zone each, "
                  + "\(batch)/request, \(environment.rawValue) environment), then \(saves) single saves; Stratus as `stratus serve` processes over one database, "
                  + "beside the same rows through postgres-nio; same run\n")
            print([
                "| workload | unit | Stratus median (min–max) | raw median (min–max) | Stratus / raw, per round |",
                "|---|---|---|---|---|",
                compare(postgresRounds, "batched creates, 1 instance vs raw INSERT", "records/s", \.oneInstanceWrites, \.rawInsertWrites),
                compare(postgresRounds, "batched creates, 1 instance vs raw COPY", "records/s", \.oneInstanceWrites, \.rawCopyWrites),
                compare(postgresRounds, "batched creates, 2 instances vs raw INSERT", "records/s", \.twoInstanceWrites, \.rawInsertWrites),
                compare(postgresRounds, "batched creates, 2 instances vs 1 instance", "records/s", \.twoInstanceWrites, \.oneInstanceWrites),
                compare(postgresRounds, "single save p50, 1 instance", "ms", \.oneInstanceSaveP50, \.rawSaveP50),
                compare(postgresRounds, "single save p99, 1 instance", "ms", \.oneInstanceSaveP99, \.rawSaveP99),
                compare(postgresRounds, "single save p50, 2 instances", "ms", \.twoInstanceSaveP50, \.rawSaveP50),
                compare(postgresRounds, "\(postgresZoneWriters) writers × 1 record/request into one zone vs raw lock-insert-commit", "records/s", \.oneZoneWrites, \.rawOneZoneWrites),
                compare(postgresRounds, "one-zone save p99 vs raw lock-insert-commit p99", "ms", \.oneZoneSaveP99, \.rawOneZoneSaveP99),
            ].joined(separator: "\n"))
        }
        if !storeRounds.isEmpty {
            print("\nStratusStore: \(storeRows) rows written locally (\(StoreBench.rowsPerTransaction) per transaction), then "
                  + "sent and imported into a second device's store, with a reader timed on that device meanwhile; each beside "
                  + "its baseline in the same round (plain GRDB writes of the same rows; two sync engines moving the same "
                  + "records; the same reads with nothing running)\n")
            print([
                "| workload | unit | StratusStore median (min–max) | baseline median (min–max) | store / baseline, per round |",
                "|---|---|---|---|---|",
                compare(storeRounds, "local writes, mirroring on vs plain GRDB", "rows/s", \.mirroredWrites, \.plainWrites),
                compare(storeRounds, "rows to the second device vs engines alone", "s", \.storeTransferSeconds, \.engineTransferSeconds),
                compare(storeRounds, "… of which the first device's sync vs the sending engine", "s", \.storeSendSeconds, \.engineSendSeconds),
                compare(storeRounds, "… of which the second device's sync vs the receiving engine", "s", \.storeReceiveSeconds, \.engineReceiveSeconds),
                compare(storeRounds, "reader p99 during the import vs idle", "ms", \.readerP99DuringImport, \.readerP99Idle),
                compare(storeRounds, "sending device: the store's tables (a week of history) vs the app's rows", "MB", \.senderMetadataMB, \.senderDataMB),
                compare(storeRounds, "… its history deleted (deleteHistory)", "MB", \.senderMetadataHistoryDeletedMB, \.senderDataMB),
                compare(storeRounds, "receiving device: the store's tables (a week of history) vs the app's rows", "MB", \.receiverMetadataMB, \.receiverDataMB),
                compare(storeRounds, "… its history deleted (deleteHistory)", "MB", \.receiverMetadataHistoryDeletedMB, \.receiverDataMB),
            ].joined(separator: "\n"))
        }
        if let output {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            struct Document: Encodable {
                let records: Int, batch: Int, clients: Int, saves: Int, durability: String, environment: String
                let rounds: [Round]
                let queryRecords: Int, querySeedRecordsPerSecond: Double, queryRounds: [QueryBench.Round]
                let assetMegabytes: Int, assetRounds: [AssetBench.Round]
                let sdkRecords: Int, sdkCalls: Int, sdkRounds: [SDKBench.Round]
                let pushRounds: [PushBench.Round]
                let syncTrials: Int, syncLatencyRounds: [SyncBench.LatencyRound]
                let initialSyncRounds: [SyncBench.InitialSyncRound]
                let shareTrials: Int, shareRecords: Int, shareRounds: [ShareBench.Round]
                let postgresRecords: Int, postgresWriters: Int, postgresRounds: [PostgresBench.Round]
                let storeRows: Int, storeRounds: [StoreBench.Round]
            }
            try encoder.encode(Document(
                records: records, batch: batch, clients: clients, saves: saves, durability: durability.rawValue,
                environment: environment.rawValue, rounds: rounds, queryRecords: queryRecords, querySeedRecordsPerSecond: seedRate, queryRounds: queryRounds,
                assetMegabytes: assetMegabytes, assetRounds: assetRounds, sdkRecords: sdkRecords, sdkCalls: sdkCalls,
                sdkRounds: sdkRounds, pushRounds: pushRounds, syncTrials: syncTrials, syncLatencyRounds: syncLatency,
                initialSyncRounds: initialSync, shareTrials: shareTrials, shareRecords: shareRecords,
                shareRounds: shareRounds, postgresRecords: postgresRecords, postgresWriters: postgresWriters,
                postgresRounds: postgresRounds, storeRows: storeRows, storeRounds: storeRounds)).write(to: URL(fileURLWithPath: output))
        }
    }
}

extension SQLiteStorage.Durability: ExpressibleByArgument {}
extension ContainerEnvironment: ExpressibleByArgument {}
extension Workload.RecordNaming: ExpressibleByArgument {}

/// What the benchmark client reads from a `records/changes` page without parsing every record
/// (a plain byte scan, so the client's own work stays small beside the server's).
struct FeedPageSummary {
    let records: Int
    let syncToken: String
    let moreComing: Bool

    init(_ page: ByteBuffer) {
        // Read in place: a page is ~150 KB, which a copy would add to the client's work.
        // The token and the flag follow the records, at the page's end: only its tail is searched.
        (records, syncToken, moreComing) = page.withUnsafeReadableBytes { bytes in
            let tail = UnsafeRawBufferPointer(rebasing: bytes[max(0, bytes.count - 4096)...])
            let tokenStart = occurrences(of: #""syncToken":""#, in: tail).last!
            let tokenEnd = tail[tokenStart...].firstIndex(of: UInt8(ascii: "\""))!
            return (
                occurrences(of: #""recordName":"#, in: bytes).count,
                String(decoding: tail[tokenStart..<tokenEnd], as: UTF8.self),
                !occurrences(of: #""moreComing":true"#, in: tail).isEmpty
            )
        }
    }
}

/// The indexes just past each occurrence of `marker` in `bytes`.
func occurrences(of marker: String, in bytes: [UInt8]) -> [Int] {
    bytes.withUnsafeBytes { occurrences(of: marker, in: $0) }
}

/// The indexes just past each occurrence of `marker` in `haystack`. It jumps with libc's `memchr`
/// to the marker's least common byte (uppercase letters are rare in JSON) and compares around it,
/// so the client's own work stays small beside the server's.
func occurrences(of marker: String, in haystack: UnsafeRawBufferPointer) -> [Int] {
    let needle = Array(marker.utf8)
    let anchor = needle.lastIndex(where: { (65...90).contains($0) }) ?? needle.count - 1
    var found: [Int] = []
    guard let base = haystack.baseAddress else { return found }
    needle.withUnsafeBytes { needleBytes in
        var offset = anchor
        while offset < haystack.count, let match = memchr(base + offset, Int32(needle[anchor]), haystack.count - offset) {
            let position = base.distance(to: UnsafeRawPointer(match))
            let start = position - anchor
            if start + needle.count <= haystack.count,
                memcmp(base + start, needleBytes.baseAddress!, needle.count) == 0
            {
                found.append(start + needle.count)
            }
            offset = position + 1
        }
    }
    return found
}

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
