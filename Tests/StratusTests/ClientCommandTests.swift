import Crypto
import Foundation
import StratusProcess
import StratusTestSupport
import Testing

@Suite("stratus records, zones and changes: cktool's client commands against a running server")
struct ClientCommandTests {
    @Test("a backend signed with a server-to-server key creates, updates and deletes public records; an API token alone reads them; changes --follow prints each change as it lands")
    func recordsThroughTheCommandLine() async throws {
        try await withServer { server in
            let key = P256.Signing.PrivateKey()
            let (keyID, _) = try await server.registerServerKey(key.publicKey.pemRepresentation)
            let keyFile = server.directory.appendingPathComponent("backend-key.pem")
            try key.pemRepresentation.write(to: keyFile, atomically: true, encoding: .utf8)
            let stratus = productsDirectory.appendingPathComponent("stratus")
            let reach = ["--server", server.baseURL, "--container", server.container, "--api-token", server.apiToken]
            let signed = reach + ["--key-id", keyID, "--private-key", keyFile.path]
            func run(_ arguments: [String]) async throws -> ChildProcessResult {
                try await runChildProcess(stratus, arguments)
            }

            let created = try await run(["records", "create", "Notice", "--name", "maintenance", "--field", "text=down at noon", "--field", "level=2"] + signed)
            #expect(created.status == 0, "\(created.errors)")
            #expect(created.output.hasPrefix("maintenance  Notice  ") && created.output.contains("level=2"), "\(created.output)")
            let unsigned = try await run(["records", "create", "Notice", "--field", "text=x"] + reach)
            #expect(unsigned.status != 0, "an API token alone does not write: \(unsigned.output)")

            let queried = try await run(["records", "query", "Notice", "--where", "level=2"] + reach)
            #expect(queried.status == 0 && queried.output.contains("text=down at noon"), "\(queried.output)\(queried.errors)")
            #expect(try await run(["records", "query", "Notice", "--where", "level=3"] + reach).output.isEmpty)

            let follower = try SpawnedProcess(
                executable: stratus, arguments: ["changes", "Notice", "--follow", "--interval", "0.1"] + reach, standardOutput: .pipe)
            defer { follower.send(SIGTERM) }
            #expect(String(decoding: await firstLine(of: follower), as: UTF8.self).contains("text=down at noon"))

            let updated = try await run(["records", "update", "maintenance", "--field", "text=back up", "--remove", "level"] + signed)
            #expect(updated.status == 0 && updated.output.contains("text=back up") && !updated.output.contains("level="), "\(updated.output)\(updated.errors)")
            #expect(String(decoding: await firstLine(of: follower), as: UTF8.self).contains("text=back up"), "the follower saw the update")

            let fetched = try await run(["records", "get", "maintenance"] + reach)
            #expect(fetched.output.contains("text=back up"))
            #expect(try await run(["zones"] + reach).output == "_defaultZone\n")
            #expect(try await run(["records", "delete", "maintenance"] + signed).output == "deleted maintenance\n")
            let gone = try await run(["records", "get", "maintenance"] + reach)
            #expect(gone.status != 0, "\(gone.output)")
        }
    }
}
