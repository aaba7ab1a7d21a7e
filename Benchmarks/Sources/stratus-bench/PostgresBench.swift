import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import PostgresNIO
import StratusModel
import StratusPostgres
import StratusProcess
import StratusStorage

/// Stratus on PostgreSQL: batched writes and single saves through one `stratus serve` process and
/// through two sharing the database, beside raw `INSERT` and `COPY` of the same rows through
/// postgres-nio, in one run.
///
/// Every writer of the batched workload has a zone of its own: writes to one zone take turns by
/// design (its sequence numbers are handed out in commit order), so the concurrency a deployment
/// gets is across zones. The one-zone workload measures that turn: many writers saving one record
/// per request into one zone, beside raw transactions that take the same kind of row lock (a
/// counter row), insert one row and commit, so the ratio shows what a save adds while it holds it.
struct PostgresBench {
    struct Round: Encodable {
        var oneInstanceWrites = 0.0
        var twoInstanceWrites = 0.0
        var rawInsertWrites = 0.0
        var rawCopyWrites = 0.0
        var oneInstanceSaveP50 = 0.0
        var oneInstanceSaveP99 = 0.0
        var twoInstanceSaveP50 = 0.0
        var twoInstanceSaveP99 = 0.0
        var rawSaveP50 = 0.0
        var rawSaveP99 = 0.0
        var oneZoneWrites = 0.0
        var oneZoneSaveP99 = 0.0
        var rawOneZoneWrites = 0.0
        var rawOneZoneSaveP99 = 0.0
    }

    /// Saves each writer of the one-zone workload makes, one record per request.
    static let savesPerZoneWriter = 20

    /// A server where the bench may create databases.
    let serverURL: String
    let records: Int
    let batch: Int
    let writers: Int
    let saves: Int
    /// Writers of the one-zone workload (0 skips it).
    let zoneWriters: Int
    /// Development indexes every field on first save; production has a deployed schema indexing `count` only.
    let environment: ContainerEnvironment
    let progress: (String) -> Void

    func measureRound(_ round: Int) async throws -> Round {
        var result = Round()
        for instances in [1, 2] {
            progress("round \(round): PostgreSQL, \(instances) instance(s): \(records) records by \(writers) writers, then \(saves) saves")
            let (rate, latencies, oneZone) = try await measureStratus(instances: instances)
            if let oneZone {
                result.oneZoneWrites = oneZone.rate
                result.oneZoneSaveP99 = percentile(oneZone.latencies, 0.99) * 1000
            }
            if instances == 1 {
                result.oneInstanceWrites = rate
                result.oneInstanceSaveP50 = percentile(latencies, 0.5) * 1000
                result.oneInstanceSaveP99 = percentile(latencies, 0.99) * 1000
            } else {
                result.twoInstanceWrites = rate
                result.twoInstanceSaveP50 = percentile(latencies, 0.5) * 1000
                result.twoInstanceSaveP99 = percentile(latencies, 0.99) * 1000
            }
        }
        progress("round \(round): PostgreSQL, raw INSERT and COPY of the same rows through postgres-nio")
        try await measureRaw(into: &result)
        return result
    }

    /// A new, empty database on the server.
    private func createDatabase() async throws -> String {
        let name = "stratus_bench_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        try await withClient(serverURL, connections: 1) { client in
            try await client.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)"))
        }
        var components = URLComponents(string: serverURL)!
        components.path = "/" + name
        return components.string!
    }

    /// A lease may come before `run()` starts, which postgres-nio warns about.
    static let quietLogger: Logger = {
        var logger = Logger(label: "stratus-bench")
        logger.logLevel = .error
        return logger
    }()

    @discardableResult
    private func withClient<T: Sendable>(
        _ url: String, connections: Int, _ body: @Sendable (PostgresClient) async throws -> T
    ) async throws -> T {
        let client = PostgresClient(
            configuration: try PostgresStorage.configuration(url: url, maximumConnections: connections),
            backgroundLogger: Self.quietLogger)
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask {
                await client.run()
                return nil
            }
            defer { group.cancelAll() }
            return try await body(client)
        }
    }

    // MARK: Stratus

    /// Batched writes and single saves through `instances` servers; with one, the one-zone workload too.
    private func measureStratus(
        instances: Int
    ) async throws -> (rate: Double, saveLatencies: [Double], oneZone: (rate: Double, latencies: [Double])?) {
        let database = try await createDatabase()
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("stratus-bench-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        var servers: [ServerProcess] = []
        defer { for server in servers { server.stop() } }
        for index in 0..<instances {
            servers.append(
                try ServerProcess(
                    executable: ServerProcess.sibling("stratus"),
                    arguments: [
                        "serve", "--database", database, "--data", root.appendingPathComponent("\(index)").path,
                        "--port", "0", "--log-level", "error", "--assets", root.appendingPathComponent("assets").path,
                    ]))
        }
        let account = try await BenchAccount.signUp(
            on: servers[0], dataDirectory: root.appendingPathComponent("0"), username: "bench")
        let container = account.container
        let tokens = account.tokens
        let http = StratusBench.uncompressedHTTP
        if environment == .production {
            let storage = try PostgresStorage(url: database, maximumConnections: 1)
            let schema = try Schema(parsing: QueryBench.schema)
            _ = try await storage.whileRunning {
                try await storage.updateSchema(container: container, environment: .production) { _ in schema }
            }
        }
        let bases = servers.map { "\($0.url)/database/1/\(container)/\(environment.rawValue)/private" }
        for writer in 0..<writers {
            _ = try await StratusBench.post(
                http, "\(bases[0])/zones/modify\(tokens)",
                Array(#"{"operations":[{"operationType":"create","zone":{"zoneID":{"zoneName":"W\#(writer)"}}}]}"#.utf8))
        }
        let perWriter = records / writers
        let batch = batch
        let writers = writers
        let bodies = (0..<writers).map { writer in
            stride(from: 0, to: perWriter, by: batch).map {
                Workload.modifyBody($0..<min($0 + batch, perWriter), zone: "W\(writer)", prefix: "r")
            }
        }
        let seconds = try await measure {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for writer in 0..<writers {
                    let base = bases[writer % bases.count]
                    group.addTask {
                        for body in bodies[writer] {
                            let reply = try await StratusBench.post(http, "\(base)/records/modify\(tokens)", body)
                            guard occurrences(of: "serverErrorCode", in: Array(reply.readableBytesView)).isEmpty else {
                                throw BenchError("a write failed: \(String(buffer: reply).prefix(300))")
                            }
                        }
                    }
                }
                try await group.waitForAll()
            }
        }
        var latencies: [Double] = []
        for index in 0..<saves {
            let body = Workload.modifyBody(index..<index + 1, zone: "W0", prefix: "s")
            let base = bases[index % bases.count]
            latencies.append(try await measure { _ = try await StratusBench.post(http, "\(base)/records/modify\(tokens)", body) })
        }
        var oneZone: (rate: Double, latencies: [Double])?
        if instances == 1, zoneWriters > 0 {
            progress("  one zone: \(zoneWriters) writers × \(Self.savesPerZoneWriter) saves, one record per request")
            _ = try await StratusBench.post(
                http, "\(bases[0])/zones/modify\(tokens)",
                Array(#"{"operations":[{"operationType":"create","zone":{"zoneID":{"zoneName":"Contended"}}}]}"#.utf8))
            oneZone = try await measureOneZone(http, modify: "\(bases[0])/records/modify\(tokens)")
        }
        return (Double(perWriter * writers) / seconds, latencies, oneZone)
    }

    /// `zoneWriters` clients at once, each saving records one request at a time into one custom zone
    /// (whose writes also advance the database's change feed, as an app's zones do); the rate over
    /// all of them and every save's latency.
    private func measureOneZone(_ http: HTTPClient, modify: String) async throws -> (rate: Double, latencies: [Double]) {
        let (seconds, latencies) = try await Self.timedConcurrently(zoneWriters, each: Self.savesPerZoneWriter) {
            writer, index in
            let body = Workload.modifyBody(index..<index + 1, zone: "Contended", prefix: "z\(writer)-")
            let reply = try await StratusBench.post(http, modify, body)
            guard occurrences(of: "serverErrorCode", in: Array(reply.readableBytesView)).isEmpty else {
                throw BenchError("a save failed: \(String(buffer: reply).prefix(300))")
            }
        }
        return (Double(latencies.count) / seconds, latencies)
    }

    /// `tasks` tasks at once, each timing `count` calls of `call(task, index)` one after another; the
    /// wall time of all of them and every call's latency.
    static func timedConcurrently(
        _ tasks: Int, each count: Int, _ call: @escaping @Sendable (_ task: Int, _ index: Int) async throws -> Void
    ) async throws -> (seconds: Double, latencies: [Double]) {
        var latencies: [Double] = []
        let seconds = try await measure {
            try await withThrowingTaskGroup(of: [Double].self) { group in
                for task in 0..<tasks {
                    group.addTask {
                        var latencies: [Double] = []
                        for index in 0..<count { latencies.append(try await measure { try await call(task, index) }) }
                        return latencies
                    }
                }
                for try await taskLatencies in group { latencies += taskLatencies }
            }
        }
        return (seconds, latencies)
    }

    // MARK: Raw postgres-nio

    /// The same rows as Stratus writes them (name, type, tag, fields, stamps, sequence).
    private struct Rows {
        var names: [String] = []
        var fields: [ByteBuffer] = []
        var sequences: [Int64] = []
    }

    private func rows(writer: Int, _ range: Range<Int>, fields: [[UInt8]], prefix: String) -> Rows {
        var rows = Rows()
        for index in range {
            rows.names.append("\(prefix)\(index)")
            rows.fields.append(ByteBuffer(bytes: fields[index % fields.count]))
            rows.sequences.append(Int64(index + 1))
        }
        return rows
    }

    private static let table = """
        CREATE TABLE raw_records (
            zone_id bigint NOT NULL, name text COLLATE "C" NOT NULL, record_type text NOT NULL, change_tag text NOT NULL,
            fields bytea NOT NULL, created_ms bigint NOT NULL, created_by text NOT NULL, modified_ms bigint NOT NULL,
            modified_by text NOT NULL, seq bigint NOT NULL, deleted boolean NOT NULL, PRIMARY KEY (zone_id, name))
        """

    private func measureRaw(into result: inout Round) async throws {
        let fields = (0..<1_000).map(Workload.fieldsJSON)
        let perWriter = records / writers
        let batch = batch
        let writers = writers
        let database = try await createDatabase()
        let logger = Logger(label: "stratus-bench")
        let insertRows = (0..<writers).map { writer in
            stride(from: 0, to: perWriter, by: batch).map {
                rows(writer: writer, $0..<min($0 + batch, perWriter), fields: fields, prefix: "r")
            }
        }
        let saveRows = (0..<saves).map { rows(writer: 0, $0..<$0 + 1, fields: fields, prefix: "s") }
        let copyText = (0..<writers).map { writer in
            var text = ""
            for index in 0..<perWriter {
                let hex = fields[index % fields.count].map { String(format: "%02x", $0) }.joined()
                text += "\(writer)\tc\(index)\tRow\tt\(index)\t\\\\x\(hex)\t1\t_bench\t1\t_bench\t\(index + 1)\tf\n"
            }
            return ByteBuffer(string: text)
        }
        let (insertSeconds, copySeconds, latencies) = try await withClient(database, connections: writers) { client in
            try await client.query(PostgresQuery(unsafeSQL: Self.table))
            let insertSeconds = try await measure {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for writer in 0..<writers {
                        group.addTask {
                            for rows in insertRows[writer] {
                                try await Self.insert(client, zone: writer, rows, logger: logger)
                            }
                        }
                    }
                    try await group.waitForAll()
                }
            }
            let copySeconds = try await measure {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for writer in 0..<writers {
                        group.addTask {
                            try await client.withConnection { connection in
                                try await connection.copyFrom(table: "raw_records", logger: logger) { writer2 in
                                    try await writer2.write(copyText[writer])
                                }
                            }
                        }
                    }
                    try await group.waitForAll()
                }
            }
            var latencies: [Double] = []
            for rows in saveRows {
                latencies.append(try await measure { try await Self.insert(client, zone: 0, rows, logger: logger) })
            }
            return (insertSeconds, copySeconds, latencies)
        }
        if zoneWriters > 0 {
            let (seconds, latencies) = try await measureRawOneZone(database, logger: logger)
            result.rawOneZoneWrites = Double(zoneWriters * Self.savesPerZoneWriter) / seconds
            result.rawOneZoneSaveP99 = percentile(latencies, 0.99) * 1000
        }
        result.rawInsertWrites = Double(perWriter * writers) / insertSeconds
        result.rawCopyWrites = Double(perWriter * writers) / copySeconds
        result.rawSaveP50 = percentile(latencies, 0.5) * 1000
        result.rawSaveP99 = percentile(latencies, 0.99) * 1000
    }

    /// The one-zone workload's floor: `zoneWriters` tasks over a pool as large as the server's, each
    /// transaction taking a counter row's lock (as a save takes its zone's), inserting one row and
    /// committing. The lock is held for two round trips, the insert and the commit.
    private func measureRawOneZone(_ database: String, logger: Logger) async throws -> (seconds: Double, latencies: [Double]) {
        let fields = ByteBuffer(bytes: Workload.fieldsJSON(0))
        let perWriter = Self.savesPerZoneWriter
        let zoneWriters = zoneWriters
        return try await withClient(database, connections: PostgresStorage.defaultMaximumConnections) { client in
            try await client.query("CREATE TABLE raw_zone (id integer PRIMARY KEY, seq bigint NOT NULL)")
            try await client.query("INSERT INTO raw_zone VALUES (1, 0)")
            return try await Self.timedConcurrently(zoneWriters, each: perWriter) { writer, index in
                try await client.withTransaction(logger: logger) { connection in
                    let lock: PostgresQuery = "UPDATE raw_zone SET seq = seq + 1 WHERE id = 1 RETURNING seq"
                    var sequence: Int64 = 0
                    for try await value in try await connection.query(lock, logger: logger).decode(Int64.self) {
                        sequence = value
                    }
                    try await connection.query(
                        """
                        INSERT INTO raw_records (zone_id, name, record_type, change_tag, fields, created_ms, created_by,
                            modified_ms, modified_by, seq, deleted)
                        VALUES (1, \("z\(writer)-\(index)"), 'Row', \("t\(sequence)"), \(fields), 1, '_bench', 1, '_bench',
                            \(sequence), false)
                        """, logger: logger)
                }
            }
        }
    }

    /// One multi-row `INSERT … SELECT FROM unnest(…)` in its own transaction, as Stratus sends a batch.
    private static func insert(_ client: PostgresClient, zone: Int, _ rows: Rows, logger: Logger) async throws {
        try await client.query(
            """
            INSERT INTO raw_records (zone_id, name, record_type, change_tag, fields, created_ms, created_by, modified_ms,
                modified_by, seq, deleted)
            SELECT \(Int64(zone)), r.name, 'Row', 't' || r.seq, r.fields, 1, '_bench', 1, '_bench', r.seq, false
            FROM unnest(\(rows.names)::text[], \(rows.fields)::bytea[], \(rows.sequences)::int8[]) AS r(name, fields, seq)
            """, logger: logger)
    }
}
