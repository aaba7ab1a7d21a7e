import Foundation
import Stratus
import StratusModel
import StratusServer
import StratusSQLite

/// The client SDK beside raw HTTP requests of the same bodies, on the same server in the same
/// round: what the SDK costs on top of the wire.
struct SDKBench {
    struct Round: Encodable {
        var sdkBatchedSave = 0.0
        var rawBatchedSave = 0.0
        var sdkSaveP50 = 0.0
        var rawSaveP50 = 0.0
        var sdkFetchP50 = 0.0
        var rawFetchP50 = 0.0
    }

    let records: Int
    let calls: Int
    let durability: SQLiteStorage.Durability

    /// One round on a fresh server: the batched save through the SDK and as raw requests, then
    /// `calls` single saves and fetches, alternating SDK and raw calls so that drift hits both.
    func measureRound(_ round: Int, progress: (String) -> Void) async throws -> Round {
        let bench = try await BenchServer.start(durability: durability)
        do {
            let result = try await run(on: bench, round: round, progress: progress)
            try await bench.stop()
            return result
        } catch {
            try? await bench.stop()
            throw error
        }
    }

    private func run(on bench: BenchServer, round: Int, progress: (String) -> Void) async throws -> Round {
        var result = Round()
        let database = bench.container(device: "sdk-bench").privateCloudDatabase
        let sdkZone = try await database.save(RecordZone(zoneName: "SDK")).zoneID
        _ = try await database.save(RecordZone(zoneName: "Raw"))
        let base = bench.databaseURL()

        // Odd rounds save through the SDK first, even rounds raw first: the second writer meets a larger index.
        progress("round \(round): \(records) records saved through the SDK and as raw records/modify requests")
        let sdkRecords = (0..<records).map { record(index: $0, name: "b\($0)", zone: sdkZone) }
        let bodies = stride(from: 0, to: records, by: 200).map {
            Workload.modifyBody($0..<min($0 + 200, records), zone: "Raw", prefix: "b")
        }
        for step in round.isMultiple(of: 2) ? ["raw", "sdk"] : ["sdk", "raw"] {
            if step == "sdk" {
                let seconds = try await measure {
                    let results = try await database.modifyRecords(saving: sdkRecords, deleting: [], atomically: false)
                    if let failure = results.partialFailure { throw BenchError("SDK save failed: \(failure)") }
                }
                result.sdkBatchedSave = Double(records) / seconds
            } else {
                let seconds = try await measure {
                    for body in bodies {
                        _ = try await StratusBench.post(bench.http, "\(base)/records/modify\(bench.tokens)", body)
                    }
                }
                result.rawBatchedSave = Double(records) / seconds
            }
        }

        progress("round \(round): \(calls) single saves and fetches, SDK and raw alternating")
        var sdkSaves: [Double] = []
        var rawSaves: [Double] = []
        var sdkFetches: [Double] = []
        var rawFetches: [Double] = []
        let lookup = { (name: String) in
            Array(#"{"zoneID":{"zoneName":"Raw"},"records":[{"recordName":"\#(name)"}]}"#.utf8)
        }
        for index in 0..<calls {
            let sdkRecord = record(index: index, name: "s\(index)", zone: sdkZone)
            sdkSaves.append(try await measure { _ = try await database.save(sdkRecord) })
            let body = Workload.modifyBody(index..<index + 1, zone: "Raw", prefix: "s")
            rawSaves.append(try await measure {
                _ = try await StratusBench.post(bench.http, "\(base)/records/modify\(bench.tokens)", body)
            })
            let id = Record.ID(recordName: "b\(index % records)", zoneID: sdkZone)
            sdkFetches.append(try await measure { _ = try await database.record(for: id) })
            let request = lookup("b\(index % records)")
            rawFetches.append(try await measure {
                _ = try await StratusBench.post(bench.http, "\(base)/records/lookup\(bench.tokens)", request)
            })
        }
        result.sdkSaveP50 = percentile(sdkSaves, 0.5) * 1000
        result.rawSaveP50 = percentile(rawSaves, 0.5) * 1000
        result.sdkFetchP50 = percentile(sdkFetches, 0.5) * 1000
        result.rawFetchP50 = percentile(rawFetches, 0.5) * 1000
        return result
    }

    /// The SDK's form of the workload's record `index`: the same five fields.
    private func record(index: Int, name: String, zone: RecordZone.ID) -> Record {
        var record = Record(recordType: "Note", recordID: Record.ID(recordName: name, zoneID: zone))
        for (key, value) in Workload.fields(index) {
            switch value {
            case .string(let text): record[key] = text
            case .int64(let number): record[key] = number
            case .double(let number): record[key] = number
            case .timestamp(let milliseconds): record[key] = Date(timeIntervalSince1970: Double(milliseconds) / 1000)
            default: preconditionFailure("the workload's fields are strings, numbers and dates")
            }
        }
        return record
    }
}
