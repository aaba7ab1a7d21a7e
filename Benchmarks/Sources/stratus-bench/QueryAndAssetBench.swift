import AsyncHTTPClient
import Foundation
import GRDB
import Logging
import NIOCore
import NIOHTTP1
import StratusModel
import StratusServer
import StratusSQLite
import StratusStorage

/// Resident memory of this process, from `/proc/self/status` (Linux; 0 elsewhere).
enum ProcessMemory {
    /// `VmRSS` or `VmHWM` in bytes.
    static func read(_ key: String) -> Int {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix(key + ":") }),
            let kilobytes = Int(line.split(separator: " ").dropFirst().first ?? "")
        else { return 0 }
        return kilobytes * 1024
    }

    /// Resets the peak (`VmHWM`) to the current resident size.
    static func resetPeak() {
        try? "5".write(toFile: "/proc/self/clear_refs", atomically: false, encoding: .utf8)
    }

    /// How far resident memory rose above its level at the start while `body` ran, in bytes.
    static func peakGrowth(_ body: () async throws -> Void) async rethrows -> Int {
        resetPeak()
        let before = read("VmRSS")
        try await body()
        return max(0, read("VmHWM") - before)
    }
}

/// Query latency on an indexed field, beside the same SQL run directly on the same file.
struct QueryBench {
    struct Round: Encodable {
        var stratusEqualsP50 = 0.0, stratusEqualsP99 = 0.0, rawEqualsP50 = 0.0, rawEqualsP99 = 0.0
        var stratusRangeP50 = 0.0, stratusRangeP99 = 0.0, rawRangeP50 = 0.0, rawRangeP99 = 0.0
    }

    static let schema = """
        DEFINE SCHEMA
            RECORD TYPE Note (
                title STRING, body STRING, count INT64 QUERYABLE SORTABLE, score DOUBLE, when TIMESTAMP,
                GRANT WRITE TO "_creator", GRANT CREATE TO "_icloud", GRANT READ TO "_world"
            );
        """

    let bench: BenchServer
    let records: Int
    let queries: Int
    let raw: DatabasePool
    let zoneID: Int64

    /// Seeds `records` notes (with `count` = 0…records-1, QUERYABLE and SORTABLE) through storage,
    /// and returns the seconds it took.
    static func prepare(
        _ bench: BenchServer, records: Int, queries: Int, progress: (String) -> Void
    ) async throws -> (QueryBench, seedSeconds: Double) {
        let schema = try Schema(parsing: Self.schema)
        _ = try await bench.storage.updateSchema(container: bench.credentials.container, environment: .development) { _ in schema }
        _ = try await bench.storage.createZone(named: "Bench", in: bench.locator, timestamp: 0)
        let context = WriteContext(userRecordName: bench.userRecordName, timestamp: 1_700_000_000_000)
        let seconds = try await measure {
            for start in stride(from: 0, to: records, by: 1000) {
                let writes = (start..<min(start + 1000, records)).map {
                    RecordWrite(operationType: .create, recordName: "q\($0)", recordType: "Note", fields: Workload.fields($0))
                }
                _ = try await bench.storage.modifyRecords(
                    writes, zone: "Bench", in: bench.locator, atomic: true, context: context)
                if start % 100_000 == 0 { progress("seeded \(start) of \(records) records") }
            }
        }
        var configuration = Configuration()
        configuration.readonly = true
        let raw = try DatabasePool(path: bench.directory.appendingPathComponent("stratus.sqlite").path, configuration: configuration)
        let zoneID = try await raw.read { db in
            try Int64.fetchOne(db, sql: "SELECT id FROM zones WHERE name = 'Bench' AND deleted = 0")!
        }
        return (QueryBench(bench: bench, records: records, queries: queries, raw: raw, zoneID: zoneID), seconds)
    }

    private func queryBody(_ filter: String, sorted: Bool) -> [UInt8] {
        let sort = sorted ? #","sortBy":[{"fieldName":"count"}]"# : ""
        return Array(#"""
            {"zoneID":{"zoneName":"Bench"},"resultsLimit":100,"query":{"recordType":"Note","filterBy":[\#(filter)]\#(sort)}}
            """#.utf8)
    }

    private static let columns = """
        r.name, r.record_type, r.change_tag, r.fields, r.created_ms, r.created_by, r.created_device, r.modified_ms,
        r.modified_by, r.modified_device, r.seq, r.deleted
        """

    func measureRound() async throws -> Round {
        var round = Round()
        var generator = SystemRandomNumberGenerator()
        let targets = (0..<queries).map { _ in Int.random(in: 0..<records, using: &generator) }
        let url = "\(bench.databaseURL())/records/query\(bench.tokens)"

        var equals: [Double] = []
        var range: [Double] = []
        for target in targets {
            let one = queryBody(
                #"{"comparator":"EQUALS","fieldName":"count","fieldValue":{"value":\#(target)}}"#, sorted: false)
            equals.append(try await measure {
                let reply = try await StratusBench.post(bench.http, url, one)
                guard occurrences(of: #""recordName":"#, in: Array(reply.readableBytesView)).count == 1 else {
                    throw BenchError("an EQUALS query did not find its record")
                }
            })
            let page = queryBody(
                #"{"comparator":"GREATER_THAN_OR_EQUALS","fieldName":"count","fieldValue":{"value":\#(target)}}"#,
                sorted: true)
            range.append(try await measure { _ = try await StratusBench.post(bench.http, url, page) })
        }
        round.stratusEqualsP50 = percentile(equals, 0.5) * 1000
        round.stratusEqualsP99 = percentile(equals, 0.99) * 1000
        round.stratusRangeP50 = percentile(range, 0.5) * 1000
        round.stratusRangeP99 = percentile(range, 0.99) * 1000

        let zoneID = zoneID
        let join = """
            SELECT \(Self.columns) FROM record_index i JOIN records r ON r.zone_id = i.zone_id AND r.name = i.name
            WHERE i.zone_id = ? AND i.record_type = 'Note' AND i.field = 'count' AND i.kind = 0
            """
        equals = []
        range = []
        for target in targets {
            equals.append(try await measure {
                let rows = try raw.read { db in
                    try Row.fetchAll(db.cachedStatement(sql: join + " AND i.value = ?"), arguments: [zoneID, target])
                }
                guard rows.count == 1 else { throw BenchError("the raw EQUALS query did not find its record") }
            })
            range.append(try await measure {
                _ = try raw.read { db in
                    try Row.fetchAll(
                        db.cachedStatement(sql: join + " AND i.value >= ? ORDER BY i.value, i.created_ms, i.name LIMIT 100"),
                        arguments: [zoneID, target])
                }
            })
        }
        round.rawEqualsP50 = percentile(equals, 0.5) * 1000
        round.rawEqualsP99 = percentile(equals, 0.99) * 1000
        round.rawRangeP50 = percentile(range, 0.5) * 1000
        round.rawRangeP99 = percentile(range, 0.99) * 1000
        return round
    }
}

/// Asset upload and download over HTTP, beside copying the same bytes on disk, with the process's
/// peak memory growth during each transfer.
struct AssetBench {
    struct Round: Encodable {
        var uploadMBps = 0.0, downloadMBps = 0.0, diskCopyMBps = 0.0
        var uploadPeakMB = 0.0, downloadPeakMB = 0.0
    }

    let bench: BenchServer
    let megabytes: Int
    let source: URL

    static func prepare(_ bench: BenchServer, megabytes: Int) throws -> AssetBench {
        let source = bench.directory.appendingPathComponent("source.bin")
        _ = FileManager.default.createFile(atPath: source.path, contents: nil)
        let handle = try FileHandle(forWritingTo: source)
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<megabytes {
            try handle.write(contentsOf: Data((0..<(1 << 20)).map { _ in UInt8.random(in: 0...255, using: &generator) }))
        }
        try handle.close()
        return AssetBench(bench: bench, megabytes: megabytes, source: source)
    }

    /// The source file as a stream of 1 MiB buffers, so the client holds one chunk at a time.
    private func chunks() throws -> AsyncThrowingStream<ByteBuffer, any Error> {
        let handle = try FileHandle(forReadingFrom: source)
        return AsyncThrowingStream {
            let data = try handle.read(upToCount: 1 << 20) ?? Data()
            if data.isEmpty {
                try handle.close()
                return nil
            }
            return ByteBuffer(bytes: data)
        }
    }

    func measureRound(_ round: Int) async throws -> Round {
        var result = Round()
        let size = megabytes << 20
        let megabytes = Double(size) / 1_048_576

        let tokens = try JSONValue.parse(Array(try await StratusBench.post(
            bench.http, "\(bench.databaseURL())/assets/upload\(bench.tokens)",
            Array(#"{"tokens":[{"recordType":"Note","fieldName":"file"}]}"#.utf8)).readableBytesView)).object()
        guard case .array(let items)? = tokens["tokens"], let first = items.first else {
            throw BenchError("assets/upload returned no token")
        }
        let uploadURL: String = try first.object().decode("url")
        var singleFile: [UInt8] = []
        var uploadSeconds = 0.0
        let uploadPeak = try await ProcessMemory.peakGrowth {
            uploadSeconds = try await measure {
                var request = HTTPClientRequest(url: uploadURL)
                request.method = .POST
                request.body = .stream(try chunks(), length: .known(Int64(size)))
                let response = try await bench.http.execute(request, timeout: .seconds(600))
                let body = try await response.body.collect(upTo: 1 << 20)
                guard response.status == .ok else { throw BenchError("upload: HTTP \(response.status.code)") }
                let asset: AssetValue = try JSONValue.parse(Array(body.readableBytesView)).object().decode("singleFile")
                singleFile = asset.jsonBytes
            }
        }
        result.uploadMBps = megabytes / uploadSeconds
        result.uploadPeakMB = Double(uploadPeak) / 1_048_576

        let save = #"{"operations":[{"operationType":"forceReplace","record":{"recordName":"asset\#(round)","recordType":"File","fields":{"file":{"value":"#
            + String(decoding: singleFile, as: UTF8.self) + #","type":"ASSETID"}}}}]}"#
        let saved = try await StratusBench.post(bench.http, "\(bench.databaseURL())/records/modify\(bench.tokens)", Array(save.utf8))
        guard let start = occurrences(of: #""downloadURL":""#, in: Array(saved.readableBytesView)).first else {
            throw BenchError("the saved record has no downloadURL: \(String(buffer: saved).prefix(300))")
        }
        let savedBytes = Array(saved.readableBytesView)
        let end = savedBytes[start...].firstIndex(of: UInt8(ascii: "\""))!
        let downloadURL = String(decoding: savedBytes[start..<end], as: UTF8.self)
            + "&" + bench.tokens.dropFirst()
        var received = 0
        var downloadSeconds = 0.0
        let downloadPeak = try await ProcessMemory.peakGrowth {
            downloadSeconds = try await measure {
                let response = try await bench.http.execute(HTTPClientRequest(url: downloadURL), timeout: .seconds(600))
                for try await buffer in response.body { received += buffer.readableBytes }
            }
        }
        guard received == size else { throw BenchError("downloaded \(received) bytes, expected \(size)") }
        result.downloadMBps = megabytes / downloadSeconds
        result.downloadPeakMB = Double(downloadPeak) / 1_048_576

        let copy = bench.directory.appendingPathComponent("copy-\(round).bin")
        let copySeconds = try await measure {
            _ = FileManager.default.createFile(atPath: copy.path, contents: nil)
            let output = try FileHandle(forWritingTo: copy)
            for try await chunk in try chunks() { try output.write(contentsOf: Data(chunk.readableBytesView)) }
            try output.close()
        }
        try? FileManager.default.removeItem(at: copy)
        result.diskCopyMBps = megabytes / copySeconds
        return result
    }
}
