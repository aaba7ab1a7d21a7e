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

    /// How the write workloads name their records.
    enum RecordNaming: String, CaseIterable, Sendable {
        /// The prefix and the record's number (`r0`, `r1`, …): a batch's names are neighbours in a
        /// name-keyed B-tree.
        case counted
        /// A UUID drawn from the prefix and the number (the same for the same record in every run),
        /// as apps and sync engines name records: a batch's names land all over every name-keyed B-tree.
        case uuid
    }

    /// The name of record `index` of the records named with `prefix`.
    static func recordName(_ index: Int, prefix: String, naming: RecordNaming) -> String {
        switch naming {
        case .counted:
            return "\(prefix)\(index)"
        case .uuid:
            // SplitMix64 over the prefix's bytes and the number: stable across runs, unlike `hashValue`.
            func mix(_ value: UInt64) -> UInt64 {
                var z = value &+ 0x9E37_79B9_7F4A_7C15
                z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
                z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
                return z ^ (z >> 31)
            }
            let seed = prefix.utf8.reduce(UInt64(0)) { mix($0 ^ UInt64($1)) }
            let high = mix(seed ^ UInt64(index)), low = mix(high)
            let hex = String(high, radix: 16).leftPadded(to: 16) + String(low, radix: 16).leftPadded(to: 16)
            let digits = Array(hex)
            return [0..<8, 8..<12, 12..<16, 16..<20, 20..<32].map { String(digits[$0]) }.joined(separator: "-").uppercased()
        }
    }

    /// A `records/modify` body creating records `range` in `zone`.
    static func modifyBody(_ range: Range<Int>, zone: String, prefix: String, naming: RecordNaming = .counted) -> [UInt8] {
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
            RecordDictionary(recordName: recordName(index, prefix: prefix, naming: naming), recordType: "Note", fields: fields(index))
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

extension String {
    /// The string with zeros before it up to `length` characters.
    fileprivate func leftPadded(to length: Int) -> String {
        String(repeating: "0", count: max(0, length - count)) + self
    }
}
