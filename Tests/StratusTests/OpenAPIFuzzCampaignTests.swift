import Foundation
import StratusProcess
import StratusTestSupport
import Testing

/// The fuzzing campaign of docs/reliability.md: schemathesis (PyPI) generates requests from the
/// served OpenAPI document, valid and invalid, with and without credentials, against a `stratus
/// serve` child process (`scripts/fuzz/run` says what it checks).
///
/// `scripts/test` gives each of the two runs 30 seconds and a fixed seed; `scripts/campaign fuzz` sets
/// `STRATUS_CAMPAIGN_FUZZ_SECONDS`.
@Suite("campaign: fuzzing from the OpenAPI document")
struct OpenAPIFuzzCampaignTests {
    @Test("no 5xx, every 4xx in CloudKit's error shape, answers as documented, invalid requests refused")
    func schemathesis() async throws {
        let campaign = ProcessInfo.processInfo.environment["STRATUS_CAMPAIGN_FUZZ_SECONDS"]
        // The bounded run takes a fixed seed, so that CI explores the same ground each time; the
        // campaign explores anew.
        let size = campaign.map { [$0] } ?? ["30", "20261124"]
        let server = try CampaignServer()
        defer { server.stopAndRemove() }
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("scripts/fuzz/run")
        let run = try await runChildProcess(
            URL(fileURLWithPath: "/usr/bin/env"),
            ["python3", script.path, server.url, server.data.appendingPathComponent("credentials.json").path] + size)
        print(run.output.split(separator: "\n").filter { $0.hasPrefix("fuzz ") }.joined(separator: "\n"))
        #expect(run.status == 0, "\(run.output.suffix(20_000))\n\(run.errors.suffix(5_000))")
    }
}
