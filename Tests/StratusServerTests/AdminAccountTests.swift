import Foundation
import NIOHTTP1
import StratusServer
import StratusTestSupport
import Testing

/// The admin API's account management: listing users and API tokens, disabling a user and
/// resetting a password, each ending the user's sessions at once.
@Suite("Admin: users and API tokens")
struct AdminAccountTests {
    static func bearer(_ server: TestServer) -> [String: String] {
        ["Authorization": "Bearer \(server.credentials.adminToken)"]
    }

    static func admin(
        _ server: TestServer, _ method: HTTPMethod, _ path: String, _ body: Any? = nil
    ) async throws -> TestServer.Reply {
        try await server.request(
            method, "/admin/1/containers/\(server.container)/\(path)", body: body,
            headers: bearer(server))
    }

    static func signIn(_ server: TestServer, password: String) async throws -> TestServer.Reply {
        try await server.request(
            .POST, "/auth/1/\(server.container)/signin", body: ["username": "ada", "password": password],
            query: ["ckAPIToken": server.apiToken])
    }

    @Test("a disabled user cannot sign in and their sessions end at once; a new password ends them too")
    func disableAndReset() async throws {
        try await withServer { server in
            let (token, recordName) = try await server.signUp("ada")
            #expect(try await server.database("private", "users/caller", user: token).status == 200)

            let disabled = try await Self.admin(server, .PATCH, "users/\(recordName)", ["disabled": true])
            #expect(disabled.status == 200 && disabled.body["disabled"] is Int, "\(disabled.text)")
            #expect(try await server.database("private", "users/caller", user: token).status == 401)
            let refused = try await Self.signIn(server, password: "correct horse")
            #expect(refused.status == 403 && refused.reason.contains("disabled"), "\(refused.text)")
            let listed = try await Self.admin(server, .GET, "users")
            let users = listed.body["users"] as? [[String: Any]] ?? []
            #expect(users.first { $0["username"] as? String == "ada" }?["disabled"] is Int)
            #expect(!listed.text.contains("passwordHash") && !listed.text.contains("$2"))

            _ = try await Self.admin(server, .PATCH, "users/\(recordName)", ["disabled": false])
            let again = try await Self.signIn(server, password: "correct horse")
            #expect(again.status == 200)
            let session = try #require(again.body["ckWebAuthToken"] as? String)

            let weak = try await Self.admin(server, .PATCH, "users/\(recordName)", ["password": "x"])
            #expect(weak.status == 400, "the sign-up password policy applies: \(weak.text)")
            let reset = try await Self.admin(server, .PATCH, "users/\(recordName)", ["password": "battery staple"])
            #expect(reset.status == 200)
            #expect(try await server.database("private", "users/caller", user: session).status == 401)
            #expect(try await Self.signIn(server, password: "correct horse").status == 401)
            #expect(try await Self.signIn(server, password: "battery staple").status == 200)

            let missing = try await Self.admin(server, .PATCH, "users/_nobody", ["disabled": true])
            #expect(missing.status == 404)
            // A misspelt member is refused by name, not taken for a body naming nothing (which clears the address).
            let misspelt = try await Self.admin(server, .PATCH, "users/\(recordName)", ["disable": true])
            #expect(misspelt.status == 400 && misspelt.text.contains("disable is not a member"), "\(misspelt.text)")
        }
    }

    @Test("API tokens are listed by name and date, never the tokens")
    func tokens() async throws {
        try await withServer { server in
            _ = try await Self.admin(server, .POST, "tokens", ["name": "web"])
            let listed = try await Self.admin(server, .GET, "tokens")
            let names = (listed.body["tokens"] as? [[String: Any]] ?? []).compactMap { $0["name"] as? String }
            #expect(names.sorted() == ["default", "web"], "\(listed.text)")
            #expect(!listed.text.contains(server.apiToken))
            let anonymous = try await server.request(.GET, "/admin/1/containers/\(server.container)/tokens")
            #expect(anonymous.status == 401)
        }
    }

    @Test("a revoked API token is refused at once; revoking needs the admin token and a token of that container")
    func revokeToken() async throws {
        try await withServer { server in
            let created = try await Self.admin(server, .POST, "tokens", ["name": "leaked"])
            let leaked = try #require(created.body["apiToken"] as? String)
            func signUp(_ token: String, _ name: String) async throws -> Int {
                try await server.request(
                    .POST, "/auth/1/\(server.container)/signup", body: ["username": name, "password": "correct horse"],
                    query: ["ckAPIToken": token]).status
            }
            #expect(try await signUp(leaked, "ann") == 200)
            let listed = try await Self.admin(server, .GET, "tokens")
            let entry = try #require((listed.body["tokens"] as? [[String: Any]])?.first { $0["name"] as? String == "leaked" })
            let id = try #require(entry["id"] as? String)
            #expect(id.count == 64 && !id.contains(leaked), "the ID is the token's hash, not the token")

            let path = "/admin/1/containers/\(server.container)/tokens/\(id)"
            #expect(try await server.request(.DELETE, path).status == 401)
            #expect(try await server.request(.DELETE, "/admin/1/containers/iCloud.none/tokens/\(id)", headers: Self.bearer(server)).status == 404)
            #expect(try await server.request(.DELETE, path, headers: Self.bearer(server)).status == 204)
            #expect(try await server.request(.DELETE, path, headers: Self.bearer(server)).status == 404)
            #expect(try await signUp(leaked, "bob") == 401, "the revoked token opens nothing")
            #expect(try await signUp(server.apiToken, "bob") == 200, "the container's other token still works")
            let remaining = try await Self.admin(server, .GET, "tokens")
            #expect(!remaining.text.contains("leaked"))
        }
    }
}
