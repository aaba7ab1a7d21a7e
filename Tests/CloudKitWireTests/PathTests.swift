import Foundation
import NIOHTTP1
import StratusTestSupport
import Testing

/// Paths as Apple's reference gives them: an unknown path is a `404` naming it, and a known path
/// asked with a method it does not take is a `405` saying which it takes.
@Suite("CloudKit wire: paths and methods")
struct PathTests {
    @Test("an unknown path answers 404 with a serverErrorCode and a reason naming the path")
    func unknownPath() async throws {
        try await withServer { server in
            let reply = try await server.database("public", "records/nonexistent", ["x": 1])
            #expect(reply.status == 404 && reply.code == "NOT_FOUND", "\(reply.text)")
            #expect(reply.reason.contains("/public/records/nonexistent"), "\(reply.text)")
        }
    }

    @Test("a known path asked with another method answers 405 with Allow")
    func wrongMethod() async throws {
        try await withServer { server in
            let put = try await server.database("public", "records/modify", ["operations": []], method: .PUT)
            #expect(put.status == 405, "\(put.text)")
            #expect(put.headers["Allow"].first == "POST")
            #expect(put.code == "BAD_REQUEST" && put.reason.contains("POST"), "\(put.text)")
            let postToList = try await server.database("private", "zones/list", ["x": 1], method: .POST)
            #expect(postToList.status == 405 && postToList.headers["Allow"].first == "GET, HEAD", "\(postToList.text)")
            let deleteDiscover = try await server.database("public", "users/discover", method: .DELETE)
            #expect(deleteDiscover.status == 405 && deleteDiscover.headers["Allow"].first == "GET, HEAD, POST", "\(deleteDiscover.text)")
            // Paths outside CloudKit's table too: the admin API, health, uploads.
            for (method, path, allowed) in [
                (HTTPMethod.PUT, "/admin/1/containers", "GET, HEAD, POST"), (.DELETE, "/health", "GET, HEAD"),
                (.RAW(value: "TRACE"), "/assets/1/upload", "POST"),
            ] {
                let reply = try await server.request(method, path)
                #expect(reply.status == 405 && reply.headers["Allow"].first == allowed, "\(method) \(path): \(reply.text)")
            }
            // Every GET route answers HEAD.
            let head = try await server.request(.HEAD, "/health")
            #expect(head.status == 200 && head.text.isEmpty)
        }
    }

    @Test("tokens/create and tokens/register answer at every path Apple's pages and clients use")
    func tokenPaths() async throws {
        try await withServer { server in
            let (user, _) = try await server.signUp("ann")
            for prefix in [
                "/database/1/\(server.container)/development", "/database/1/\(server.container)/development/public",
                "/device/1/\(server.container)/development",
            ] {
                let created = try await server.request(
                    .POST, prefix + "/tokens/create", body: ["apnsEnvironment": "development"], query: ["ckAPIToken": server.apiToken])
                #expect(created.status == 200, "\(prefix): \(created.text)")
                let token = try #require(created.body["apnsToken"] as? String)
                // A client may push through the production service while developing: the token is still the path's.
                let registered = try await server.request(
                    .POST, prefix + "/tokens/register", body: ["apnsEnvironment": "production", "apnsToken": token],
                    query: ["ckAPIToken": server.apiToken, "ckWebAuthToken": user])
                #expect(registered.status == 200, "\(prefix): \(registered.text)")
            }
        }
    }

    @Test("subscriptions/lookup answers with and without the database segment; without it, in any of the caller's databases")
    func subscriptionLookupPaths() async throws {
        try await withServer { server in
            let (user, _) = try await server.signUp("ann")
            try await server.createZone("Notes", user: user)
            for (database, subscription) in [
                ("private", ["subscriptionID": "notes", "subscriptionType": "zone", "zoneID": ["zoneName": "Notes"]] as [String: Any]),
                ("public", ["subscriptionID": "news", "subscriptionType": "query", "query": ["recordType": "News"]]),
            ] {
                let saved = try await server.database(
                    database, "subscriptions/modify", ["operations": [["operationType": "create", "subscription": subscription]]],
                    user: user)
                #expect(saved.status == 200, "\(saved.text)")
            }
            let body = ["subscriptions": [["subscriptionID": "notes"], ["subscriptionID": "news"], ["subscriptionID": "none"]]]
            let withSegment = try await server.database("private", "subscriptions/lookup", body, user: user)
            let inPrivate = (withSegment.body["subscriptions"] as? [[String: Any]]) ?? []
            #expect(inPrivate.map { $0["serverErrorCode"] as? String } == [nil, "NOT_FOUND", "NOT_FOUND"], "\(withSegment.text)")
            let withoutSegment = try await server.request(
                .POST, "/database/1/\(server.container)/development/subscriptions/lookup", body: body,
                query: ["ckAPIToken": server.apiToken, "ckWebAuthToken": user])
            let anywhere = (withoutSegment.body["subscriptions"] as? [[String: Any]]) ?? []
            #expect(anywhere.map { $0["subscriptionID"] as? String } == ["notes", "news", "none"], "\(withoutSegment.text)")
            #expect(anywhere.map { $0["serverErrorCode"] as? String } == [nil, nil, "NOT_FOUND"])
            let anonymous = try await server.request(
                .POST, "/database/1/\(server.container)/development/subscriptions/lookup", body: body,
                query: ["ckAPIToken": server.apiToken])
            #expect(anonymous.status == 421, "\(anonymous.text)")
        }
    }
}
