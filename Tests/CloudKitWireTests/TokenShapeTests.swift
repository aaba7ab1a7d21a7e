import Crypto
import Foundation
import NIOHTTP1
import StratusServer
import StratusStorage
import StratusTestSupport
import Testing

/// Tokens in the shapes Apple's clients expect and send.
@Suite("CloudKit wire: token shapes")
struct TokenShapeTests {
    @Test("new API tokens are 64 hexadecimal digits, as Apple's are; tokens made before keep working")
    func apiTokenShape() async throws {
        try await withServer { server in
            let created = try await server.request(
                .POST, "/admin/1/containers/\(server.container)/tokens", body: ["name": "web"],
                headers: ["Authorization": "Bearer \(server.credentials.adminToken)"])
            let token = try #require(created.body["apiToken"] as? String)
            #expect(token.count == 64 && token.allSatisfy { "0123456789abcdef".contains($0) }, "\(token)")
            let withNew = try await server.request(
                .GET, "/database/1/\(server.container)/development/public/zones/list", query: ["ckAPIToken": token])
            #expect(withNew.status == 200, "\(withNew.text)")
            // A token of the earlier shape (43 characters of URL-safe base64), stored as the server stores
            // every token, by its SHA-256 digest, still opens the container.
            let earlier = "Zm9yZXZlci1hbmQtZXZlci1hLXRva2VuLW9mLW9sZA"
            try await server.storage.createAPIToken(
                hash: SHA256.hash(data: Data(earlier.utf8)).map { String(format: "%02x", $0) }.joined(),
                container: server.container, name: "earlier", createdAt: 1)
            let withEarlier = try await server.request(
                .GET, "/database/1/\(server.container)/development/public/zones/list", query: ["ckAPIToken": earlier])
            #expect(withEarlier.status == 200, "\(withEarlier.text)")
        }
    }

    @Test("a ckWebAuthToken that is empty or the literal null counts as absent: public reads work, user calls get 421 with the sign-in link")
    func nullWebAuthToken() async throws {
        try await withServer { server in
            for value in ["null", ""] {
                let query = ["ckAPIToken": server.apiToken, "ckWebAuthToken": value]
                let publicRead = try await server.request(
                    .POST, "/database/1/\(server.container)/development/public/records/lookup",
                    body: ["records": [["recordName": "note-1"]]], query: query)
                #expect(publicRead.status == 200, "'\(value)': \(publicRead.text)")
                let privateRead = try await server.request(
                    .GET, "/database/1/\(server.container)/development/private/zones/list", query: query)
                #expect(privateRead.status == 421 && privateRead.code == "AUTHENTICATION_REQUIRED", "'\(value)': \(privateRead.text)")
                #expect(privateRead.body["redirectURL"] is String)
            }
            let forged = try await server.request(
                .GET, "/database/1/\(server.container)/development/public/zones/list",
                query: ["ckAPIToken": server.apiToken, "ckWebAuthToken": "undefined"])
            #expect(forged.status == 401, "any other unknown token is still refused: \(forged.text)")
        }
    }
}
