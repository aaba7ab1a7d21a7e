import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import StratusServer
import StratusTestSupport
import Testing

/// A record's `downloadURL` works as returned, with no tokens, as Apple's does: signed, expiring,
/// with Apple's `${f}` file-name placeholder.
@Suite("CloudKit wire: signed asset download URLs")
struct AssetDownloadTests {
    static func get(_ url: String) async throws -> (status: Int, bytes: [UInt8]) {
        let response = try await HTTPClient.shared.execute(HTTPClientRequest(url: url), timeout: .seconds(30))
        return (Int(response.status.code), Array(try await response.body.collect(upTo: 1 << 20).readableBytesView))
    }

    @Test("the downloadURL serves the bytes with no tokens, whatever name replaces ${f}, until it expires or the record lets go of the asset")
    func signedURL() async throws {
        let clock = ManualClock()
        try await withServer(ServerConfiguration(port: 0, passwordHashCost: 4, clock: clock.serverClock)) { server in
            let (user, _) = try await server.signUp("ann")
            try await server.createZone("Z", user: user)
            let uploadURL = try await AssetUploadTests.uploadURL(server, user: user)
            let bytes = Array("the photo's bytes".utf8)
            let uploaded = try await AssetUploadTests.post(uploadURL, bytes, contentType: nil)
            let asset = try #require(uploaded.json["singleFile"] as? [String: Any])
            func save(_ fields: [String: Any]) async throws -> TestServer.Reply {
                try await server.database(
                    "private", "records/modify",
                    ["zoneID": ["zoneName": "Z"], "operations": [["operationType": "forceReplace", "record": [
                        "recordType": "Photo", "recordName": "p", "fields": fields]]]],
                    user: user)
            }
            let saved = try await save(["image": ["value": asset, "type": "ASSETID"]])
            let field = (saved.records.first?["fields"] as? [String: Any])?["image"] as? [String: Any]
            let url = try #require((field?["value"] as? [String: Any])?["downloadURL"] as? String, "\(saved.text)")
            #expect(url.contains("${f}"), "Apple's file-name placeholder: \(url)")

            let named = try await Self.get(url.replacingOccurrences(of: "${f}", with: "photo.jpg"))
            #expect(named.status == 200 && named.bytes == bytes, "no tokens needed")
            #expect(try await Self.get(url.replacingOccurrences(of: "${f}", with: "x")).bytes == bytes)
            let tampered = try await Self.get(url.replacingOccurrences(of: "${f}", with: "x").replacingOccurrences(of: "ticket=", with: "ticket=A"))
            #expect(tampered.status == 400 || tampered.status == 401, "a ticket that is not the server's is refused")

            clock.advance(bySeconds: 3601)
            let expired = try await Self.get(url.replacingOccurrences(of: "${f}", with: "x"))
            #expect(expired.status == 401, "a signed URL lasts an hour")

            // A fresh URL, then the record lets go of the asset: the URL stops serving it.
            let lookup = try await server.database("private", "records/lookup", ["zoneID": ["zoneName": "Z"], "records": [["recordName": "p"]]], user: user)
            let fresh = try #require(
                (((lookup.records.first?["fields"] as? [String: Any])?["image"] as? [String: Any])?["value"] as? [String: Any])?["downloadURL"] as? String)
            #expect(try await Self.get(fresh.replacingOccurrences(of: "${f}", with: "x")).status == 200)
            _ = try await save(["title": ["value": "no photo"]])
            #expect(try await Self.get(fresh.replacingOccurrences(of: "${f}", with: "x")).status == 404)
        }
    }
}
