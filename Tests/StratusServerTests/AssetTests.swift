import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import StratusModel
@testable import StratusServer
import StratusTestSupport
import Testing

@Suite("assets")
struct AssetTests {
    /// Asks for an upload URL and posts `bytes` to it; returns the reply (its `singleFile` on success).
    static func upload(_ server: TestServer, _ bytes: [UInt8], user: String) async throws -> TestServer.Reply {
        let tokens = try await server.database(
            "private", "assets/upload", ["tokens": [["recordType": "Note", "fieldName": "text"]]], user: user)
        let url = try #require((tokens.body["tokens"] as? [[String: Any]])?.first?["url"] as? String, "\(tokens.text)")
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.body = .bytes(ByteBuffer(bytes: bytes))
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(60))
        let body = try await response.body.collect(upTo: 1 << 20)
        let json = (try? JSONSerialization.jsonObject(with: Data(body.readableBytesView))) as? [String: Any] ?? [:]
        return TestServer.Reply(status: Int(response.status.code), body: json, text: String(buffer: body), headers: response.headers)
    }

    /// Fetches a `downloadURL` with the caller's tokens.
    static func download(
        _ server: TestServer, _ url: String, user: String, range: String? = nil
    ) async throws -> (status: Int, bytes: [UInt8], headers: HTTPHeaders) {
        var components = try #require(URLComponents(string: url.replacingOccurrences(of: "${f}", with: "file")))
        components.queryItems = (components.queryItems ?? []) + [
            URLQueryItem(name: "ckAPIToken", value: server.apiToken), URLQueryItem(name: "ckWebAuthToken", value: user),
        ]
        var request = HTTPClientRequest(url: try #require(components.url).absoluteString)
        if let range { request.headers.add(name: "Range", value: range) }
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(60))
        let body = try await response.body.collect(upTo: 64 << 20)
        return (Int(response.status.code), Array(body.readableBytesView), response.headers)
    }

    static func randomBytes(_ count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
    }

    static func assetFiles(_ server: TestServer) -> [String] {
        let root = server.directory.appendingPathComponent("assets").path
        let enumerator = FileManager.default.enumerator(atPath: root)
        return (enumerator?.allObjects as? [String] ?? []).filter { $0.count > 60 && !$0.hasPrefix("tmp") }
    }

    @Test("a several-MB asset round-trips byte for byte, with ranges, and only to its owner")
    func roundTrip() async throws {
        try await withServer { server async throws in
            let (alice, _) = try await server.signUp("alice")
            let (bob, _) = try await server.signUp("bob")
            let bytes = Self.randomBytes(5 << 20 + 123)
            let uploaded = try await Self.upload(server, bytes, user: alice)
            let singleFile = try #require(uploaded.body["singleFile"] as? [String: Any], "\(uploaded.text)")
            #expect(singleFile["size"] as? Int == bytes.count && singleFile["receipt"] is String)

            let saved = try await server.modify(
                [operation("create", "doc", fields: ["text": ["value": singleFile, "type": "ASSETID"], "title": ["value": "t"]])],
                user: alice)
            #expect(saved.records.first?["serverErrorCode"] == nil, "\(saved.text)")
            let lookup = try await server.database("private", "records/lookup", ["records": [["recordName": "doc"]]], user: alice)
            let asset = try #require(
                ((lookup.records.first?["fields"] as? [String: Any])?["text"] as? [String: Any])?["value"] as? [String: Any])
            let url = try #require(asset["downloadURL"] as? String, "\(lookup.text)")
            #expect(asset["receipt"] == nil && asset["fileChecksum"] as? String == singleFile["fileChecksum"] as? String)

            let whole = try await Self.download(server, url, user: alice)
            #expect(whole.status == 200 && whole.bytes == bytes)
            let part = try await Self.download(server, url, user: alice, range: "bytes=1000-1999")
            #expect(part.status == 206 && part.bytes == Array(bytes[1000...1999]))
            #expect(part.headers["Content-Range"].first == "bytes 1000-1999/\(bytes.count)")
            let tail = try await Self.download(server, url, user: alice, range: "bytes=-10")
            #expect(tail.status == 206 && tail.bytes == Array(bytes.suffix(10)))
            let outside = try await Self.download(server, url, user: alice, range: "bytes=\(bytes.count)-")
            #expect(outside.status == 416)
            let figures = try await MetricsTests.scrape(server, token: server.credentials.adminToken)
            #expect(figures.value("stratus_asset_bytes_in_total") == Double(bytes.count))
            #expect(figures.value("stratus_asset_bytes_out_total") == Double(bytes.count + 1_000 + 10), "ranges count what they send")

            // The downloadURL is signed: it works as returned, without tokens, like Apple's. The
            // authenticated form still checks who asks: another user's private asset is not served.
            #expect(url.contains("/assets/1/download/") && url.contains("${f}"), "\(url)")
            let checksum = try #require(singleFile["fileChecksum"] as? String)
            let authenticated = server.baseURL
                + "/database/1/\(server.container)/development/private/assets/download/\(checksum)"
                + "?zoneName=_defaultZone&recordName=doc&fieldName=text"
            #expect(try await Self.download(server, authenticated, user: alice).bytes == bytes)
            let stolen = try await Self.download(server, authenticated, user: bob)
            #expect(stolen.status == 404, "another user's private asset is not served")

            // Query and change feed results carry the URL too.
            let query = try await server.database(
                "private", "records/query", ["query": ["recordType": "Note"]], user: alice)
            #expect(query.text.contains("downloadURL"))
            let tooBig = try await TestServer.start(configuration: ServerConfiguration(
                port: 0, limits: Limits(maxAssetSizeBytes: 1000), passwordHashCost: 4))
            defer { Task { try? await tooBig.stopAndRemove() } }
            let (carol, _) = try await tooBig.signUp("carol")
            let refused = try await Self.upload(tooBig, Self.randomBytes(5000), user: carol)
            #expect(refused.status == 413 && refused.code == "LIMIT_EXCEEDED", "\(refused.text)")
            #expect(Self.assetFiles(tooBig).isEmpty)
        }
    }

    @Test("assets in an ASSETID_LIST are answered with download URLs, kept through updates and collected like single ones")
    func assetList() async throws {
        try await withServer { server async throws in
            let (alice, _) = try await server.signUp("alice")
            let bytes = Self.randomBytes(5_000)
            let file = try #require(try await Self.upload(server, bytes, user: alice).body["singleFile"] as? [String: Any])
            let saved = try await server.modify(
                [operation("create", "doc", fields: ["pics": ["value": [file], "type": "ASSETID_LIST"]])], user: alice)
            #expect(saved.records.first?["serverErrorCode"] == nil, "\(saved.text)")
            let updated = try await server.modify([operation("forceUpdate", "doc", fields: ["title": ["value": "x"]])], user: alice)
            #expect(updated.status == 200 && updated.records.first?["serverErrorCode"] == nil, "\(updated.text)")
            let looked = try await server.database("private", "records/lookup", ["records": [["recordName": "doc"]]], user: alice)
            let fields = looked.records.first?["fields"] as? [String: Any]
            let pics = (fields?["pics"] as? [String: Any])?["value"] as? [[String: Any]]
            let url = try #require(pics?.first?["downloadURL"] as? String, "\(looked.text)")
            #expect(try await Self.download(server, url, user: alice).bytes == bytes)

            // Keeping an asset by its checksum keeps its size as stored: a client's claim is not
            // taken, nor sealed into a receipt by assets/rereference.
            let checksum = try #require(file["fileChecksum"] as? String)
            let kept = try await server.modify(
                [operation("forceUpdate", "doc", fields: [
                    "pics": ["value": [["fileChecksum": checksum, "size": 1]], "type": "ASSETID_LIST"],
                    "cover": ["value": ["fileChecksum": checksum, "size": 7], "type": "ASSETID"],
                ])], user: alice)
            #expect(kept.records.first?["serverErrorCode"] == nil, "\(kept.text)")
            let keptFields = kept.records.first?["fields"] as? [String: Any]
            #expect(((keptFields?["pics"] as? [String: Any])?["value"] as? [[String: Any]])?.first?["size"] as? Int == 5_000)
            #expect(((keptFields?["cover"] as? [String: Any])?["value"] as? [String: Any])?["size"] as? Int == 5_000)
            let renewed = try await server.database(
                "private", "assets/rereference", ["assets": [["recordName": "doc", "fieldName": "cover"]]], user: alice)
            let receipt = try #require((renewed.body["assets"] as? [[String: Any]])?.first, "\(renewed.text)")
            #expect(receipt["size"] as? Int == 5_000, "\(renewed.text)")

            _ = try await server.modify([operation("forceDelete", "doc")], user: alice)
            let store = AssetStore(
                blobs: DirectoryAssetBlobStore(directory: server.directory.appendingPathComponent("assets").path),
                storage: server.storage, tokens: SyncTokenCodec(secret: SyncTokenCodec.makeSecret()), graceSeconds: 60)
            #expect(try await store.collect(now: Int64(Date().timeIntervalSince1970 * 1000) + 3_600_000) == 1)
            #expect(Self.assetFiles(server).isEmpty)
        }
    }

    @Test("collection also deletes upload files a process left behind when it died, once they are as old as the grace period")
    func abandonedUploads() async throws {
        try await withServer { server async throws in
            let staging = server.directory.appendingPathComponent("assets/tmp")
            try FileManager.default.createDirectory(at: staging, withIntermediateDirectories: true)
            let (abandoned, current) = (staging.appendingPathComponent(UUID().uuidString), staging.appendingPathComponent(UUID().uuidString))
            let (notAnUpload, folder) = (staging.appendingPathComponent("notes.txt"), staging.appendingPathComponent(UUID().uuidString + "-dir"))
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            for file in [abandoned, current, notAnUpload] { try Data("partial".utf8).write(to: file) }
            for old in [abandoned, notAnUpload, folder] {
                try FileManager.default.setAttributes([.modificationDate: Date().addingTimeInterval(-2 * 24 * 3600)], ofItemAtPath: old.path)
            }
            let store = AssetStore(
                blobs: DirectoryAssetBlobStore(directory: server.directory.appendingPathComponent("assets").path),
                storage: server.storage, tokens: SyncTokenCodec(secret: SyncTokenCodec.makeSecret()), graceSeconds: 24 * 3600)
            _ = try await store.collect()
            #expect(!FileManager.default.fileExists(atPath: abandoned.path))
            #expect(FileManager.default.fileExists(atPath: current.path), "an upload under way keeps its file")
            #expect(FileManager.default.fileExists(atPath: notAnUpload.path) && FileManager.default.fileExists(atPath: folder.path),
                    "only files named as uploads are swept: the staging folder may be shared")
        }
    }

    @Test("equal content is stored once and deleted after its last record goes")
    func dedupAndCollection() async throws {
        try await withServer { server async throws in
            let (alice, _) = try await server.signUp("alice")
            let (bob, _) = try await server.signUp("bob")
            let bytes = Self.randomBytes(300_000)
            let first = try #require(try await Self.upload(server, bytes, user: alice).body["singleFile"] as? [String: Any])
            let second = try #require(try await Self.upload(server, bytes, user: bob).body["singleFile"] as? [String: Any])
            #expect(first["fileChecksum"] as? String == second["fileChecksum"] as? String)
            #expect(Self.assetFiles(server).count == 1)

            _ = try await server.modify([operation("create", "a1", fields: ["text": ["value": first, "type": "ASSETID"]])], user: alice)
            _ = try await server.modify([operation("create", "b1", fields: ["text": ["value": second, "type": "ASSETID"]])], user: bob)
            let orphan = try #require(try await Self.upload(server, Self.randomBytes(1000), user: alice).body["singleFile"]
                as? [String: Any])

            // Without the receipt, a record cannot claim an asset it does not hold.
            let claim = try await server.modify(
                [operation("create", "c1", fields: ["text": ["value": ["fileChecksum": first["fileChecksum"]!, "size": 300_000],
                                                            "type": "ASSETID"]])], user: bob)
            #expect(claim.records.first?["serverErrorCode"] as? String == "BAD_REQUEST", "\(claim.text)")

            // rereference gives a receipt for an asset a readable record holds.
            let renewed = try await server.database(
                "private", "assets/rereference", ["assets": [["recordName": "a1", "fieldName": "text"]]], user: alice)
            // Each item is an Asset Dictionary beside its recordName and fieldName, which Apple's web
            // library saves as it is: with or without the type tag, it is an ASSETID value.
            let item = try #require((renewed.body["assets"] as? [[String: Any]])?.first, "\(renewed.text)")
            #expect(item["recordName"] as? String == "a1" && item["fieldName"] as? String == "text")
            #expect(item["fileChecksum"] as? String == first["fileChecksum"] as? String && item["receipt"] is String, "\(renewed.text)")
            let copy = try await server.modify(
                [operation("create", "a2", fields: ["text": ["value": item]]),
                 operation("create", "a3", fields: ["text": ["value": item, "type": "ASSETID"]])], user: alice)
            #expect(copy.records.allSatisfy { $0["serverErrorCode"] == nil }, "\(copy.text)")

            let store = AssetStore(
                blobs: DirectoryAssetBlobStore(directory: server.directory.appendingPathComponent("assets").path),
                storage: server.storage, tokens: SyncTokenCodec(secret: SyncTokenCodec.makeSecret()), graceSeconds: 60)
            let later = Int64(Date().timeIntervalSince1970 * 1000) + 3_600_000
            #expect(try await store.collect(now: later) == 1, "only the asset nobody saved goes")
            #expect(!Self.assetFiles(server).contains { $0.hasSuffix(orphan["fileChecksum"] as! String) })
            for (name, user) in [("a1", alice), ("a2", alice), ("a3", alice)] {
                _ = try await server.modify([operation("forceDelete", name)], user: user)
            }
            #expect(try await store.collect(now: later) == 0, "bob's record still holds the content")
            _ = try await server.modify([operation("forceDelete", "b1")], user: bob)
            #expect(try await store.collect(now: later) == 1)
            #expect(Self.assetFiles(server).isEmpty)
        }
    }
}
