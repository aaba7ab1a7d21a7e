package import Foundation

/// One sample of a Prometheus exposition: a series' name, its labels and its value.
package struct MetricSample: Sendable, Equatable {
    package var name: String
    package var labels: [String: String]
    package var value: Double
}

/// A `GET /metrics` answer parsed by the Prometheus project's own parser (Python's
/// `prometheus_client`, which scripts/test installs): a document it refuses fails the parse.
package struct MetricsScrape: Sendable {
    /// Every sample, histogram buckets and sums included.
    package let samples: [MetricSample]

    /// Parses `text`; throws with the parser's complaint when it is not valid exposition.
    package init(parsing text: String) async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("metrics-\(UUID().uuidString).txt")
        try text.write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        let run = try await runChildProcess(
            URL(fileURLWithPath: "/usr/bin/env"), ["python3", "-c", Self.parser, file.path])
        guard run.status == 0 else { throw ParseFailure(reason: run.errors) }
        samples = try run.output.split(separator: "\n").map { line in
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] ?? [:]
            return MetricSample(
                name: object["name"] as? String ?? "", labels: object["labels"] as? [String: String] ?? [:],
                value: object["value"] as? Double ?? .nan)
        }
    }

    /// Why a document is not valid exposition.
    package struct ParseFailure: Error, CustomStringConvertible {
        package let reason: String
        package var description: String { "not valid Prometheus exposition: \(reason)" }
    }

    /// The value of the series `name` whose labels include `labels`, summed over the rest; 0 when none.
    package func value(_ name: String, _ labels: [String: String] = [:]) -> Double {
        samples.filter { sample in
            sample.name == name && labels.allSatisfy { sample.labels[$0.key] == $0.value }
        }.reduce(0) { $0 + $1.value }
    }

    /// Whether a series `name` appears at all.
    package func has(_ name: String) -> Bool {
        samples.contains { $0.name == name }
    }

    private static let parser = """
        import json, sys
        from prometheus_client.parser import text_string_to_metric_families
        text = open(sys.argv[1]).read()
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                print(json.dumps({"name": sample.name, "labels": sample.labels, "value": float(sample.value)}))
        """
}
