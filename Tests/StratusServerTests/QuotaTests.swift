import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import StratusModel
import StratusServer
import StratusStorage
import StratusTestSupport
import Testing

/// Quotas as a client meets them: per item in `records/modify`, on uploads, set by the operator.
@Suite("quotas: records, assets and uploads per user and per container")
struct QuotaTests {
    static func configuration(_ quotas: Quotas, limits: Limits = Limits()) -> ServerConfiguration {
        ServerConfiguration(port: 0, limits: limits, passwordHashCost: 4, quotas: quotas)
    }

    static func codes(_ reply: TestServer.Reply) -> [String?] {
        reply.records.map { $0["serverErrorCode"] as? String }
    }

    static func admin(_ server: TestServer, _ method: HTTPMethod, _ path: String, body: Any? = nil) async throws -> TestServer.Reply {
        try await server.request(
            method, "/admin/1/containers/\(server.container)/\(path)", body: body,
            headers: ["Authorization": "Bearer \(server.credentials.adminToken)"])
    }

    @Test("past a user's quota of records a write fails alone with QUOTA_EXCEEDED, an atomic batch writes nothing, and deleting makes room")
    func recordQuota() async throws {
        try await withServer(Self.configuration(Quotas(perUser: StorageQuota(records: 3)))) { server in
            let (alice, aliceName) = try await server.signUp("alice")
            let (bob, _) = try await server.signUp("bob")
            #expect(Self.codes(try await server.modify([operation("create", "a"), operation("create", "b")], user: alice)) == [nil, nil])
            let over = try await server.modify([operation("create", "c"), operation("create", "d")], user: alice, atomic: false)
            #expect(over.status == 200 && Self.codes(over) == [nil, "QUOTA_EXCEEDED"], "\(over.text)")
            #expect((over.records[1]["reason"] as? String)?.contains("quota of 3 records") == true, "\(over.text)")
            // An atomic batch in a custom zone with a refused write commits nothing.
            try await server.createZone("Z", user: alice)
            let atomic = try await server.modify([operation("create", "e")], zone: "Z", user: alice)
            #expect(Self.codes(atomic) == ["QUOTA_EXCEEDED"], "\(atomic.text)")
            #expect(try await server.readFeed(zone: "Z", user: alice).records.isEmpty, "nothing was written")
            // Bob's records are his own; alice makes room by deleting.
            #expect(Self.codes(try await server.modify([operation("create", "a"), operation("create", "b")], user: bob)) == [nil, nil])
            #expect(Self.codes(try await server.modify([operation("forceDelete", "a")], user: alice)) == [nil])
            #expect(Self.codes(try await server.modify([operation("create", "e")], zone: "Z", user: alice)) == [nil])
            // The operator sees what each account holds.
            let usage = try await Self.admin(server, .GET, "usage")
            let accounts = try #require(usage.body["accounts"] as? [[String: Any]], "\(usage.text)")
            #expect(accounts.first { $0["userRecordName"] as? String == aliceName }?["records"] as? Int == 3, "\(usage.text)")
            #expect((usage.body["total"] as? [String: Any])?["records"] as? Int == 5, "\(usage.text)")
        }
    }

    @Test("a user's public records count against their quota, and bytes of records and of assets have quotas of their own")
    func bytesAndPublicRecords() async throws {
        let quotas = Quotas(perUser: StorageQuota(records: 10, recordBytes: 2_000, assetBytes: 1_500))
        try await withServer(Self.configuration(quotas)) { server in
            let (alice, _) = try await server.signUp("alice")
            #expect(Self.codes(try await server.modify([operation("create", "p")], user: alice, database: "public")) == [nil])
            let big = try await server.modify(
                [operation("create", "big", fields: ["title": ["value": String(repeating: "x", count: 3_000)]])], user: alice)
            #expect(Self.codes(big) == ["QUOTA_EXCEEDED"] && big.text.contains("bytes of records"), "\(big.text)")
            // An asset of 1,000 bytes fits once; a second record holding it would hold 2,000.
            let uploaded = try await AssetTests.upload(server, AssetTests.randomBytes(1_000), user: alice)
            let file = try #require(uploaded.body["singleFile"] as? [String: Any], "\(uploaded.text)")
            #expect(Self.codes(try await server.modify(
                [operation("create", "f", fields: ["file": ["value": file, "type": "ASSETID"]])], user: alice)) == [nil])
            let second = try await server.modify(
                [operation("create", "g", fields: ["file": ["value": file, "type": "ASSETID"]])], user: alice, database: "public")
            #expect(Self.codes(second) == ["QUOTA_EXCEEDED"] && second.text.contains("bytes of assets held"), "\(second.text)")
        }
    }

    @Test("uploads: a URL brings one asset per token asked for, and a user's uploads no record holds yet are bounded; nothing refused is kept")
    func uploadQuota() async throws {
        let quotas = Quotas(perUserPendingUploadBytes: 3_000)
        try await withServer(Self.configuration(quotas, limits: Limits(maxAssetSizeBytes: 2_000))) { server in
            let (alice, _) = try await server.signUp("alice")
            func uploadURL() async throws -> String {
                let tokens = try await server.database(
                    "private", "assets/upload", ["tokens": [["recordType": "Note", "fieldName": "file"]]], user: alice)
                return try #require((tokens.body["tokens"] as? [[String: Any]])?.first?["url"] as? String, "\(tokens.text)")
            }
            func post(_ url: String, _ count: Int) async throws -> TestServer.Reply {
                var request = HTTPClientRequest(url: url)
                request.method = .POST
                request.body = .bytes(ByteBuffer(bytes: AssetTests.randomBytes(count)))
                let response = try await HTTPClient.shared.execute(request, timeout: .seconds(60))
                let body = try await response.body.collect(upTo: 1 << 20)
                let json = (try? JSONSerialization.jsonObject(with: Data(body.readableBytesView))) as? [String: Any] ?? [:]
                return TestServer.Reply(status: Int(response.status.code), body: json, text: String(buffer: body), headers: response.headers)
            }
            let url = try await uploadURL()
            let first = try await post(url, 1_500)
            #expect(first.status == 200, "\(first.text)")
            let again = try await post(url, 1_500)
            #expect(again.status == 413 && again.body["serverErrorCode"] as? String == "QUOTA_EXCEEDED", "\(again.text)")
            #expect(again.text.contains("upload URL allows 2000 bytes"), "\(again.text)")
            #expect(try await post(try await uploadURL(), 1_500).status == 200)
            let stored = AssetTests.assetFiles(server).count
            // 3,000 bytes uploaded and not yet held: the next is refused from its Content-Length.
            let refused = try await post(try await uploadURL(), 100)
            #expect(refused.status == 413 && refused.body["serverErrorCode"] as? String == "QUOTA_EXCEEDED", "\(refused.text)")
            #expect(refused.text.contains("no record holds yet"), "\(refused.text)")
            #expect(AssetTests.assetFiles(server).count == stored, "nothing refused is kept")
            let staging = server.directory.appendingPathComponent("assets/tmp").path
            #expect((try? FileManager.default.contentsOfDirectory(atPath: staging))?.isEmpty ?? true)
            // A record holding the first upload makes room again.
            let file = try #require(first.body["singleFile"] as? [String: Any])
            #expect(Self.codes(try await server.modify(
                [operation("create", "f", fields: ["file": ["value": file, "type": "ASSETID"]])], user: alice)) == [nil])
            #expect(try await post(try await uploadURL(), 100).status == 200)
        }
    }

    @Test("the operator sets a container's quotas through the admin API, and returns it to the server's defaults")
    func containerQuotaByAdmin() async throws {
        try await withServer(Self.configuration(Quotas())) { server in
            let (alice, _) = try await server.signUp("alice")
            let (bob, _) = try await server.signUp("bob")
            let initial = try await Self.admin(server, .GET, "quotas")
            #expect(initial.status == 200 && initial.body["serverDefaults"] as? Bool == true, "\(initial.text)")
            let set = try await Self.admin(server, .PUT, "quotas", body: ["container": ["records": 2]])
            let container = (set.body["quotas"] as? [String: Any])?["container"] as? [String: Any]
            #expect(set.status == 200 && container?["records"] as? Int == 2, "\(set.text)")
            #expect(container?["recordBytes"] is NSNull && set.body["serverDefaults"] as? Bool == false, "\(set.text)")
            #expect(Self.codes(try await server.modify([operation("create", "a")], user: alice)) == [nil])
            let over = try await server.modify([operation("create", "b"), operation("create", "c")], user: bob, atomic: false)
            #expect(Self.codes(over) == [nil, "QUOTA_EXCEEDED"], "\(over.text)")
            let wrong = try await Self.admin(server, .PUT, "quotas", body: ["container": ["rows": 2]])
            #expect(wrong.status == 400 && wrong.text.contains("container.rows"), "\(wrong.text)")
            let negative = try await Self.admin(server, .PUT, "quotas", body: ["user": ["records": -1]])
            #expect(negative.status == 400 && negative.text.contains("user.records"), "\(negative.text)")
            let reset = try await Self.admin(server, .DELETE, "quotas")
            #expect(reset.body["serverDefaults"] as? Bool == true, "\(reset.text)")
            #expect(Self.codes(try await server.modify([operation("create", "c")], user: bob)) == [nil])
            let unauthenticated = try await server.request(.GET, "/admin/1/containers/\(server.container)/quotas")
            #expect(unauthenticated.status == 401)
        }
    }
}
