import NIOHTTP1
import Foundation
import Hummingbird
import Logging
import StratusModel
import StratusServer
import StratusSQLite
import StratusTestSupport
import Testing

@Suite("server lifecycle and documents")
struct LifecycleTests {
    @Test("a restart keeps every acknowledged write, the tokens, and sessions")
    func restart() async throws {
        try await withServer { first in
            let alice = try await first.signUp("alice").token
            try await first.createZone("Z", user: alice)
            var acknowledged: [String] = []
            for batch in 0..<10 {
                let reply = try await first.modify(
                    (0..<50).map { operation("create", "r\(batch)-\($0)") }, zone: "Z", user: alice)
                if reply.status == 200 { acknowledged += reply.records.compactMap { $0["recordName"] as? String } }
            }
            let tokenBefore = try await first.readFeed(zone: "Z", user: alice).token
            try await first.stop()

            let second = try await first.restart()
            #expect(second.credentials == first.credentials, "credentials.json survives a restart")
            let feed = try await second.readFeed(zone: "Z", user: alice)
            #expect(Set(feed.records.compactMap { $0["recordName"] as? String }) == Set(acknowledged))
            #expect(acknowledged.count == 500)
            let delta = try await second.readFeed(zone: "Z", user: alice, token: tokenBefore)
            #expect(delta.records.isEmpty, "a token issued before the restart still works")
        }
    }

    @Test("first start writes credentials.json, readable by its owner only, with working tokens")
    func credentialsFile() async throws {
        try await withServer { server async throws in
            let file = server.directory.appendingPathComponent("credentials.json")
            let attributes = try FileManager.default.attributesOfItem(atPath: file.path)
            #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
            let json = try JSONSerialization.jsonObject(with: Data(contentsOf: file)) as? [String: String]
            #expect(Set(json?.keys.map { $0 } ?? []) == ["url", "container", "apiToken", "adminToken"])
            #expect(json?["container"] == ServerBootstrap.defaultContainer)
            let admin = try await server.request(.GET, "/admin/1/containers", headers: ["Authorization": "Bearer \(json?["adminToken"] ?? "")"])
            #expect(admin.status == 200)
        }
    }

    @Test("every route is in the OpenAPI document and every documented path is routed")
    func openAPICoversRoutes() async throws {
        let router = StratusApplication.makeRouter(
            storage: try SQLiteStorage(path: FileManager.default.temporaryDirectory
                .appendingPathComponent("openapi-\(UUID().uuidString).sqlite").path),
            configuration: ServerConfiguration(), tokens: SyncTokenCodec(secret: SyncTokenCodec.makeSecret()))
        let routed = Set(router.routes.map { route in
            let path = route.path.description.split(separator: "/").map { segment in
                segment.hasPrefix(":") ? "{\(segment.dropFirst())}" : String(segment)
            }.joined(separator: "/")
            return "\(route.method.rawValue) /\(path)"
        })
        try await withServer { server async throws in
            let document = try await server.request(.GET, "/openapi.json")
            #expect(document.status == 200)
            #expect((document.body["openapi"] as? String)?.hasPrefix("3.") == true)
            let paths = try #require(document.body["paths"] as? [String: [String: Any]])
            let documented = Set(paths.flatMap { path, operations in
                operations.keys.filter { ["get", "post", "put", "delete", "patch"].contains($0) }.map { "\($0.uppercased()) \(path)" }
            })
            #expect(routed.subtracting(documented).isEmpty, "routes missing from openapi.json: \(routed.subtracting(documented).sorted())")
            #expect(documented.subtracting(routed).isEmpty, "documented but not routed: \(documented.subtracting(routed).sorted())")
            #expect(routed.count >= 20)
            // The table of endpoints is the one source of CloudKit's paths: all of it is routed and
            // documented, and every route of a container's apps comes from it.
            let table = Set(Endpoints.all.map { "\($0.method.rawValue) \($0.template)" })
            #expect(table.subtracting(routed).isEmpty, "table entries not routed: \(table.subtracting(routed).sorted())")
            #expect(table.subtracting(documented).isEmpty, "table entries not documented: \(table.subtracting(documented).sorted())")
            let appRoutes = routed.filter { $0.contains(" /database/1/") || $0.contains(" /auth/1/") }
            #expect(appRoutes.subtracting(table).isEmpty, "routes outside the table: \(appRoutes.subtracting(table).sorted())")
        }
    }

    @Test("capabilities advertise the limits; health answers")
    func capabilities() async throws {
        try await withServer { server async throws in
            let reply = try await server.request(
                .GET, "/database/1/\(server.container)/development/capabilities", query: ["ckAPIToken": server.apiToken])
            #expect(reply.status == 200)
            let limits = try #require(reply.body["limits"] as? [String: Any])
            #expect(limits["maxOperationsPerRequest"] as? Int == 200)
            #expect(limits["maxRecordSizeBytes"] as? Int == 1_048_576)
            #expect(limits["maxNameLength"] as? Int == 255)
            #expect(limits["maxFieldsPerRecord"] as? Int == 256)
            #expect(try await server.request(.GET, "/database/1/\(server.container)/development/capabilities").status == 401)
            #expect(try await server.request(.GET, "/health").body["status"] as? String == "ok")
        }
    }
}
