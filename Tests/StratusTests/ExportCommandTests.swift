import Foundation
import StratusProcess
import StratusSQLite
import StratusStorage
import StratusTestSupport
import Testing

@Suite("stratus admin export")
struct ExportCommandTests {
    @Test("the export file is its owner's alone and appears only when whole: a failed export leaves an earlier file as it was; the commands are audited")
    func ownerOnlyAndWhole() async throws {
        let data = FileManager.default.temporaryDirectory.appendingPathComponent("stratus-export-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: data) }
        _ = try await ServerKeyCommandTests.admin(["create-container", "iCloud.com.example.app"], data: data)
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("stratus-export-\(UUID().uuidString).ndjson")
        defer { try? FileManager.default.removeItem(at: output) }
        func export(_ container: String) async throws -> (status: Int32, errors: String) {
            let run = try await runChildProcess(
                productsDirectory.appendingPathComponent("stratus"),
                ["admin", "export", container, "--output", output.path, "--data", data.path])
            return (run.status, run.errors)
        }

        let exported = try await export("iCloud.com.example.app")
        #expect(exported.status == 0, "\(exported.errors)")
        let attributes = try FileManager.default.attributesOfItem(atPath: output.path)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600, "it holds password and token hashes")
        let whole = try Data(contentsOf: output)
        #expect(String(decoding: whole, as: UTF8.self).contains("iCloud.com.example.app"))

        let failed = try await export("iCloud.com.example.missing")
        #expect(failed.status != 0)
        #expect(try Data(contentsOf: output) == whole, "the earlier export is intact")
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: output.deletingLastPathComponent().path)
            .filter { $0.hasPrefix(output.lastPathComponent + ".partial-") }
        #expect(leftovers.isEmpty)

        // The commands are in the audit log beside the admin API's requests.
        let storage = try SQLiteStorage(path: data.appendingPathComponent("stratus.sqlite").path)
        let entries = try await storage.whileRunning { try await storage.auditEntries(limit: 10) }
        #expect(entries.map(\.action) == [
            "stratus admin export iCloud.com.example.missing", "stratus admin export iCloud.com.example.app",
            "stratus admin create-container iCloud.com.example.app",
        ])
        #expect(entries.map(\.status) == [404, 200, 200])
        #expect(entries.allSatisfy { $0.actor.hasPrefix("command line (uid ") })
    }
}
