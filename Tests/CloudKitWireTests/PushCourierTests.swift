import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import StratusServer
import StratusTestSupport
import Testing

/// Push the way Apple's web library listens: a token made at `/device/1/…/tokens/create` with a
/// session, then bare polls of its `webcourierURL`, each answering one notification in Apple's
/// payload shape.
@Suite("CloudKit wire: push through the web courier URL")
struct PushCourierTests {
    /// A bare poll: the URL as handed out, nothing added.
    static func poll(_ url: String, method: HTTPMethod = .GET) async throws -> (status: Int, text: String, headers: HTTPHeaders) {
        var request = HTTPClientRequest(url: url)
        request.method = method
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(60))
        let body = try await response.body.collect(upTo: 1 << 20)
        return (Int(response.status.code), String(buffer: body), response.headers)
    }

    static func json(_ text: String) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any] ?? [:]
    }

    @Test("a token created at /device/1/ with a session needs no registration; bare polls answer one Apple-shaped notification each")
    func courier() async throws {
        try await withServer { server in
            let (alice, aliceName) = try await server.signUp("alice")
            try await server.createZone("Notes", user: alice)
            for subscription: [String: Any] in [
                ["subscriptionID": "notes", "subscriptionType": "zone", "zoneID": ["zoneName": "Notes"]],
                ["subscriptionID": "milk", "subscriptionType": "query", "zoneID": ["zoneName": "Notes"],
                 "query": ["recordType": "Note"], "firesOn": ["create", "update", "delete"],
                 "notificationInfo": ["alertBody": "A note changed", "desiredKeys": ["title"], "soundName": "default"]],
            ] {
                let reply = try await server.database(
                    "private", "subscriptions/modify",
                    ["operations": [["operationType": "create", "subscription": subscription]]], user: alice)
                #expect(reply.status == 200, "\(reply.text)")
            }
            let created = try await server.request(
                .POST, "/device/1/\(server.container)/development/tokens/create", body: ["apnsEnvironment": "development"],
                query: ["ckAPIToken": server.apiToken, "ckWebAuthToken": alice], headers: ["X-Stratus-Device-ID": "browser"])
            #expect(created.status == 200, "\(created.text)")
            let courierURL = try #require(created.body["webcourierURL"] as? String)

            // A new process cannot vouch for what it missed, so the first poll answers at once, empty.
            let first = try await Self.poll(courierURL)
            #expect(first.status == 200 && first.text.isEmpty, "\(first.text)")

            // Whether the next poll is already waiting or comes after the save, the device's queue
            // holds the notifications between polls.
            async let waiting = Self.poll(courierURL)
            let saved = try await server.database(
                "private", "records/modify",
                ["zoneID": ["zoneName": "Notes"], "operations": [["operationType": "create", "record": [
                    "recordType": "Note", "recordName": "n1", "fields": ["title": ["value": "Buy milk"]]]]]],
                user: alice, headers: ["X-Stratus-Device-ID": "phone"])
            #expect(saved.status == 200, "\(saved.text)")
            let one = try await waiting
            let two = try await Self.poll(courierURL, method: .POST)
            let payloads = [Self.json(one.text), Self.json(two.text)]
            #expect(payloads.allSatisfy { ($0["ck"] as? [String: Any])?["cid"] as? String == server.container }, "\(one.text) \(two.text)")
            #expect(payloads.allSatisfy { ($0["ck"] as? [String: Any])?["ckuserid"] as? String == aliceName })

            let queries = payloads.compactMap { ($0["ck"] as? [String: Any])?["qry"] as? [String: Any] }
            let query = try #require(queries.first)
            #expect(query["sid"] as? String == "milk" && query["rid"] as? String == "n1")
            #expect(query["zid"] as? String == "Notes" && query["zoid"] as? String == aliceName)
            #expect(query["dbs"] as? Int == 1 && query["fo"] as? Int == 1, "private database, record created")
            #expect((query["af"] as? [String: Any])?["title"] as? String == "Buy milk")
            let queryPayload = payloads.first { ($0["ck"] as? [String: Any])?["qry"] != nil }
            let alert = try #require(queryPayload?["aps"] as? [String: Any])
            #expect((alert["alert"] as? [String: Any])?["body"] as? String == "A note changed" && alert["sound"] as? String == "default")

            let zones = payloads.compactMap { ($0["ck"] as? [String: Any])?["fet"] as? [String: Any] }
            let zone = try #require(zones.first)
            #expect(zone["sid"] as? String == "notes" && zone["zid"] as? String == "Notes" && zone["dbs"] as? Int == 1)
            let zonePayload = payloads.first { ($0["ck"] as? [String: Any])?["fet"] != nil }
            let silent = try #require(zonePayload?["aps"] as? [String: Any])
            #expect(silent["content-available"] as? Int == 1)
        }
    }

    @Test("a new password or a disabled account ends the web courier URLs of the user's devices")
    func courierEndsWithTheAccount() async throws {
        try await withServer { server in
            let (alice, aliceName) = try await server.signUp("alice")
            func courierURL(_ session: String) async throws -> String {
                let created = try await server.request(
                    .POST, "/device/1/\(server.container)/development/tokens/create", body: ["apnsEnvironment": "development"],
                    query: ["ckAPIToken": server.apiToken, "ckWebAuthToken": session])
                let url = try #require(created.body["webcourierURL"] as? String, "\(created.text)")
                #expect(try await Self.poll(url).status == 200)
                return url
            }
            func patch(_ body: [String: Any]) async throws {
                let reply = try await server.request(
                    .PATCH, "/admin/1/containers/\(server.container)/users/\(aliceName)", body: body,
                    headers: ["Authorization": "Bearer \(server.credentials.adminToken)"])
                #expect(reply.status == 200, "\(reply.text)")
            }
            let first = try await courierURL(alice)
            try await patch(["password": "battery staple horse"])
            #expect(try await Self.poll(first).status == 401, "the stolen session's token died with the old password")

            let again = try await server.request(
                .POST, "/auth/1/\(server.container)/signin", body: ["username": "alice", "password": "battery staple horse"],
                query: ["ckAPIToken": server.apiToken])
            let second = try await courierURL(try #require(again.body["ckWebAuthToken"] as? String))
            try await patch(["disabled": true])
            #expect(try await Self.poll(second).status == 401)
        }
    }

    @Test("a refused poll says when to retry, and an address whose polls keep being refused is throttled")
    func refusedPolls() async throws {
        let clock = ManualClock()
        try await withServer(ServerConfiguration(port: 0, passwordHashCost: 4, clock: clock.serverClock)) { server in
            var statuses: [Int] = []
            for _ in 0..<22 {
                let reply = try await Self.poll(server.baseURL + "/push/1/not-a-token")
                statuses.append(reply.status)
                #expect(reply.headers["Retry-After"].first.flatMap(Int.init) ?? 0 >= 1, "every refusal says when to retry")
            }
            #expect(statuses.prefix(21).allSatisfy { $0 == 401 }, "\(statuses)")
            #expect(statuses.last == 429, "\(statuses)")
            clock.advance(bySeconds: 2)
            #expect(try await Self.poll(server.baseURL + "/push/1/not-a-token").status == 401, "the lock ends")
        }
    }
}
