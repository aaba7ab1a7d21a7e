import Foundation
import StratusModel

/// The rows every workload writes: a note-like record with five typed fields.
enum Workload {
    static let body = String(repeating: "Lorem ipsum dolor sit amet, consectetur adipiscing elit. ", count: 2)

    static func fields(_ index: Int) -> [String: FieldValue] {
        [
            "title": .string("Note number \(index)"),
            "body": .string(body),
            "count": .int64(Int64(index)),
            "score": .double(Double(index) / 7),
            "when": .timestamp(1_700_000_000_000 + Int64(index)),
        ]
    }

    /// The fields' canonical JSON, as Stratus stores it.
    static func fieldsJSON(_ index: Int) -> [UInt8] {
        var writer = JSONWriter()
        RecordDictionary.writeFields(fields(index), to: &writer)
        return writer.bytes
    }

    /// A `records/modify` body creating records `range` in `zone`.
    static func modifyBody(_ range: Range<Int>, zone: String, prefix: String) -> [UInt8] {
        var writer = JSONWriter(capacity: range.count * 400)
        writer.beginObject()
        writer.key("zoneID")
        ZoneID(zoneName: zone).write(to: &writer)
        writer.key("operations")
        writer.beginArray()
        for index in range {
            writer.beginObject()
            writer.field("operationType", "create")
            writer.key("record")
            RecordDictionary(recordName: "\(prefix)\(index)", recordType: "Note", fields: fields(index))
                .write(to: &writer)
            writer.endObject()
        }
        writer.endArray()
        writer.field("desiredKeys", array: [String]())
        writer.endObject()
        return writer.bytes
    }
}

/// Summary statistics of repeated measurements.
struct Statistics: Encodable {
    let min: Double
    let median: Double
    let max: Double

    init(_ values: [Double]) {
        let sorted = values.sorted()
        min = sorted.first ?? 0
        max = sorted.last ?? 0
        median = sorted.isEmpty ? 0 : sorted[sorted.count / 2]
    }
}

/// The value at quantile `q` (0…1) of `values`.
func percentile(_ values: [Double], _ q: Double) -> Double {
    let sorted = values.sorted()
    guard !sorted.isEmpty else { return 0 }
    return sorted[min(sorted.count - 1, Int((Double(sorted.count) * q).rounded(.up)) - 1)]
}

/// Runs `body` and returns the elapsed seconds.
func measure(_ body: () async throws -> Void) async rethrows -> Double {
    let start = ContinuousClock.now
    try await body()
    let elapsed = ContinuousClock.now - start
    return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
}

/// The CPU time (user and system) this process has used so far, in seconds: with the server in the
/// same process, what a workload costs the machine, which varies less than its rate on a busy host.
func processCPUSeconds() -> Double {
    var usage = rusage()
    #if os(Linux)
    getrusage(RUSAGE_SELF.rawValue, &usage)
    #else
    getrusage(RUSAGE_SELF, &usage)
    #endif
    func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
    return seconds(usage.ru_utime) + seconds(usage.ru_stime)
}
