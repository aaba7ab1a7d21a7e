import Foundation
import NIOHTTP1
import StratusServer
import StratusStorage
import StratusTestSupport
import Testing

/// `GET /metrics`: who may read it, that it is valid Prometheus exposition, and that it moves with
/// what the server does. Every answer carries its request's ID, the `uuid` of its error.
@Suite("Metrics and request IDs")
struct MetricsTests {
    static func scrape(_ server: TestServer, token: String) async throws -> MetricsScrape {
        let reply = try await server.request(.GET, "/metrics", headers: ["Authorization": "Bearer \(token)"])
        #expect(reply.status == 200, "\(reply.text)")
        #expect(reply.headers.first(name: "Content-Type")?.hasPrefix("text/plain; version=0.0.4") == true)
        return try await MetricsScrape(parsing: reply.text)
    }

    @Test("/metrics answers the admin token and the metrics token only")
    func access() async throws {
        try await withServer(ServerConfiguration(port: 0, passwordHashCost: 4, metricsToken: "scrape-me")) { server in
            for headers in [[:], ["Authorization": "Bearer wrong"], ["Authorization": "Basic c2NyYXBlLW1l"]] {
                let refused = try await server.request(.GET, "/metrics", headers: headers)
                #expect(refused.status == 401 && refused.code == "AUTHENTICATION_FAILED", "\(headers): \(refused.text)")
            }
            _ = try await Self.scrape(server, token: "scrape-me")
            _ = try await Self.scrape(server, token: server.credentials.adminToken)
            // The API token of an app is not a metrics token.
            let app = try await server.request(.GET, "/metrics", headers: ["Authorization": "Bearer \(server.apiToken)"])
            #expect(app.status == 401)
        }
    }

    @Test("the figures move with requests, records written and read, feed pages, errors and conflicts")
    func figuresMove() async throws {
        try await withServer { server in
            let admin = server.credentials.adminToken
            let before = try await Self.scrape(server, token: admin)
            let user = try await server.signUp("ada").token
            try await server.createZone("Notes", user: user)
            let saved = try await server.modify(
                (0..<3).map { ["operationType": "create", "record": ["recordName": "n\($0)", "recordType": "Note", "fields": ["title": ["value": "t"]]]] },
                zone: "Notes", user: user)
            #expect(saved.status == 200)
            // A stale change tag: a conflict, answered in the item.
            let conflict = try await server.modify(
                [["operationType": "update", "record": ["recordName": "n0", "recordType": "Note", "recordChangeTag": "stale", "fields": [:]]]],
                zone: "Notes", user: user)
            #expect(conflict.records.first?["serverErrorCode"] as? String == "CONFLICT", "\(conflict.text)")
            let feed = try await server.readFeed(zone: "Notes", user: user)
            let looked = try await server.database(
                "private", "records/lookup", ["zoneID": ["zoneName": "Notes"], "records": [["recordName": "n1"]]], user: user)
            #expect(looked.records.count == 1)
            let refused = try await server.database("private", "records/lookup", ["records": []], user: user)
            #expect(refused.status == 400)

            let after = try await Self.scrape(server, token: admin)
            let modify = "/database/1/{container}/{environment}/{database}/records/modify"
            #expect(
                after.value("stratus_http_requests_total", ["endpoint": modify, "method": "POST", "status": "200"])
                    - before.value("stratus_http_requests_total", ["endpoint": modify, "method": "POST", "status": "200"]) == 2)
            #expect(after.value("stratus_http_request_duration_seconds_count", ["endpoint": modify]) == 2)
            #expect(after.value("stratus_records_written_total") == 3)
            #expect(after.value("stratus_item_errors_total", ["code": "CONFLICT"]) == 1)
            #expect(after.value("stratus_conflicts_total") == 1)
            #expect(after.value("stratus_records_read_total", ["source": "changes"]) == 3)
            #expect(after.value("stratus_records_read_total", ["source": "lookup"]) == 1)
            #expect(after.value("stratus_change_feed_pages_total", ["feed": "zone"]) == Double(feed.pages))
            #expect(after.value("stratus_errors_total", ["code": "BAD_REQUEST"]) == 1)
            #expect(after.value("stratus_storage_write_seconds_count") == 2)
            #expect(after.value("stratus_storage_read_seconds_count", ["source": "lookup"]) == 1)
            #expect(after.value("stratus_storage_read_seconds_count", ["source": "changes"]) == Double(feed.pages))
            #expect(after.has("stratus_push_devices_connected") && after.has("stratus_request_body_buffered_bytes"))
        }
    }

    @Test("throttles and sync-token expiries have series of their own")
    func throttlesAndExpiries() async throws {
        let configuration = ServerConfiguration(
            port: 0, passwordHashCost: 4, rateLimit: RateLimit(requestsPerSecond: 0.01, burst: 8))
        try await withServer(configuration) { server in
            let alice = try await server.signUp("alice").token
            try await server.createZone("Z", user: alice)
            _ = try await server.modify([operation("create", "a")], zone: "Z", user: alice)
            let first = try await server.database("private", "records/changes", ["zoneID": ["zoneName": "Z"]], user: alice)
            let token = try #require(first.body["syncToken"] as? String)
            _ = try await server.modify([operation("forceDelete", "a", recordType: nil)], zone: "Z", user: alice)
            #expect(try await server.storage.purgeTombstones(before: Int64(Date().timeIntervalSince1970 * 1000) + 60_000) == 1)
            let expired = try await server.database(
                "private", "records/changes", ["zoneID": ["zoneName": "Z"], "syncToken": token], user: alice)
            #expect(expired.status == 410 && expired.code == "CHANGE_TOKEN_EXPIRED", "\(expired.text)")
            var throttled = 0
            for _ in 0..<8 where try await server.database("private", "zones/list", user: alice).status == 429 {
                throttled += 1
            }
            #expect(throttled > 0)

            let figures = try await Self.scrape(server, token: server.credentials.adminToken)
            #expect(figures.value("stratus_sync_token_expiries_total") == 1)
            #expect(figures.value("stratus_throttles_total") == Double(throttled))
            #expect(figures.value("stratus_conflicts_total") == 0)
        }
    }

    @Test("every answer carries X-Stratus-Request-ID, which is its error's uuid")
    func requestIDs() async throws {
        try await withServer { server in
            let ok = try await server.request(.GET, "/health")
            let first = try #require(ok.headers.first(name: "X-Stratus-Request-ID"))
            #expect(UUID(uuidString: first) != nil)
            let again = try await server.request(.GET, "/health")
            #expect(again.headers.first(name: "X-Stratus-Request-ID") != first)
            let failed = try await server.database("private", "records/lookup", ["records": []], user: nil)
            #expect(failed.status >= 400)
            #expect(failed.headers.first(name: "X-Stratus-Request-ID") == failed.body["uuid"] as? String)
        }
    }
}
