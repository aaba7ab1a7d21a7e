import Foundation
import NIOHTTP1
import StratusServer
import StratusTestSupport
import Testing

/// The examples without a password: `--identity-token` signs a device in with an ID token that a
/// real OpenID Connect provider on loopback issued, and a second device of the same person (a new
/// token, a new nonce) reaches the same account.
@Suite("examples: sign-in with an identity token")
struct IdentitySignInTests {
    @Test("photos and notes sign in with --identity-token, two devices one account, and nobody made a password")
    func identityToken() async throws {
        let provider = try await OIDCProviderStandIn.start()
        defer { provider.stop() }
        try await withServer { server in
            let redirect = "http://127.0.0.1:1/native-callback"
            let client = try await provider.configure(on: server, redirectURIs: [redirect])
            let passwordsOff = try await server.request(
                .PUT, "/admin/1/containers/\(server.container)/signin/passwords", body: ["enabled": false],
                headers: ["Authorization": "Bearer \(server.credentials.adminToken)"])
            #expect(passwordsOff.status == 200)

            func signIn(_ app: String, device: String, nonce: String) async throws -> (output: String, state: URL) {
                let token = try await provider.identityToken(
                    clientID: client.id, clientSecret: client.secret, subject: "ren", nonce: nonce, redirectURI: redirect)
                let state = server.directory.appendingPathComponent("\(app)-\(device)")
                let run = try await runChildProcess(
                    productsDirectory.appendingPathComponent(app), [
                        "signin", "--identity-token", token, "--provider", "corp", "--nonce", nonce, "--server",
                        server.baseURL, "--container", server.container, "--api-token", server.apiToken, "--state", state.path,
                    ])
                #expect(run.status == 0, "\(app) \(device): \(run.errors)")
                return (run.output, state)
            }
            let phone = try await signIn("photos", device: "phone", nonce: "n-phone")
            #expect(phone.output.contains("Signed in as your corp identity"), "\(phone.output)")
            let laptop = try await signIn("photos", device: "laptop", nonce: "n-laptop")
            func whoami(_ state: URL) async throws -> String {
                try await runChildProcess(productsDirectory.appendingPathComponent("photos"), ["whoami", "--state", state.path])
                    .output.trimmingCharacters(in: .whitespacesAndNewlines)
            }
            let phoneUser = try await whoami(phone.state)
            let laptopUser = try await whoami(laptop.state)
            #expect(phoneUser.hasPrefix("_") && phoneUser == laptopUser, "\(phoneUser) \(laptopUser)")

            let notes = try await signIn("notes", device: "tablet", nonce: "n-tablet")
            #expect(notes.output.contains("Signed in as your corp identity"), "\(notes.output)")
            let users = try await server.request(
                .GET, "/admin/1/containers/\(server.container)/users",
                headers: ["Authorization": "Bearer \(server.credentials.adminToken)"])
            #expect((users.body["users"] as? [Any])?.count == 1, "one account for the three devices: \(users.text)")
        }
    }
}
