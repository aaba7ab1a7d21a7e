import AsyncHTTPClient
import Crypto
import Foundation
import NIOCore
import NIOHTTP1
import StratusTestSupport
import Testing

/// Upload URLs take the bytes raw, or as the one file of a `multipart/form-data` form, the way
/// Apple's web library posts them; either way the asset is exactly the file.
@Suite("CloudKit wire: asset uploads")
struct AssetUploadTests {
    /// A fresh upload URL for a `Photo.image` in zone `Z`.
    static func uploadURL(_ server: TestServer, user: String) async throws -> String {
        let reply = try await server.database(
            "private", "assets/upload",
            ["zoneID": ["zoneName": "Z"], "tokens": [["recordType": "Photo", "fieldName": "image"]]], user: user)
        return try #require((reply.body["tokens"] as? [[String: Any]])?.first?["url"] as? String, "\(reply.text)")
    }

    static func post(_ url: String, _ bytes: [UInt8], contentType: String?) async throws -> (status: Int, json: [String: Any]) {
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        if let contentType { request.headers.add(name: "Content-Type", value: contentType) }
        request.body = .bytes(ByteBuffer(bytes: bytes))
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
        let body = try await response.body.collect(upTo: 1 << 20)
        return (Int(response.status.code), (try? JSONSerialization.jsonObject(with: Data(body.readableBytesView))) as? [String: Any] ?? [:])
    }

    /// A form with one file part holding `file`, as browsers write `FormData`.
    static func form(_ file: [UInt8], boundary: String, extraPart: Bool = false) -> [UInt8] {
        var body = Array("--\(boundary)\r\nContent-Disposition: form-data; name=\"files\"; filename=\"photo.jpg\"\r\nContent-Type: image/jpeg\r\n\r\n".utf8)
        body += file
        if extraPart { body += Array("\r\n--\(boundary)\r\nContent-Disposition: form-data; name=\"other\"\r\n\r\nx".utf8) }
        body += Array("\r\n--\(boundary)--\r\n".utf8)
        return body
    }

    static func checksum(_ bytes: [UInt8]) -> String {
        SHA256.hash(data: bytes).map { String(format: "%02x", $0) }.joined()
    }

    @Test("a multipart/form-data upload stores exactly the file, byte for byte, like a raw upload of it")
    func multipart() async throws {
        try await withServer { server in
            let (user, _) = try await server.signUp("ann")
            try await server.createZone("Z", user: user)
            var generator = SystemRandomNumberGenerator()
            // Large enough to arrive in several pieces, and holding what looks like a boundary's start.
            var file = (0..<300_000).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let boundary = "----WebKitFormBoundary7MA4YWxkTrZu0gW"
            file.replaceSubrange(1000..<1000, with: Array("\r\n--\(boundary.prefix(20))".utf8))
            file.replaceSubrange(150_000..<150_000, with: Array("\r\n--".utf8))

            let raw = try await Self.post(try await Self.uploadURL(server, user: user), file, contentType: "application/octet-stream")
            let rawFile = try #require(raw.json["singleFile"] as? [String: Any])
            #expect(rawFile["fileChecksum"] as? String == Self.checksum(file))

            let viaForm = try await Self.post(
                try await Self.uploadURL(server, user: user), Self.form(file, boundary: boundary),
                contentType: "multipart/form-data; boundary=\(boundary)")
            let formFile = try #require(viaForm.json["singleFile"] as? [String: Any], "\(viaForm.json)")
            #expect(formFile["fileChecksum"] as? String == Self.checksum(file), "the stored asset is the file, not the form")
            #expect(formFile["size"] as? Int == file.count)

            // A quoted boundary and an empty file.
            let empty = try await Self.post(
                try await Self.uploadURL(server, user: user), Self.form([], boundary: "b"),
                contentType: "multipart/form-data; boundary=\"b\"")
            #expect((empty.json["singleFile"] as? [String: Any])?["size"] as? Int == 0, "\(empty.json)")
        }
    }

    @Test("a malformed form is refused and nothing is stored: no boundary, two parts, no closing boundary")
    func malformedForms() async throws {
        try await withServer { server in
            let (user, _) = try await server.signUp("ann")
            try await server.createZone("Z", user: user)
            let file = Array("hello".utf8)
            let noBoundary = try await Self.post(try await Self.uploadURL(server, user: user), file, contentType: "multipart/form-data")
            #expect(noBoundary.status == 400 && (noBoundary.json["reason"] as? String ?? "").contains("boundary"))
            let twoParts = try await Self.post(
                try await Self.uploadURL(server, user: user), Self.form(file, boundary: "b", extraPart: true),
                contentType: "multipart/form-data; boundary=b")
            #expect(twoParts.status == 400 && (twoParts.json["reason"] as? String ?? "").contains("one file part"))
            var unclosed = Self.form(file, boundary: "b")
            unclosed.removeLast(8)
            let truncated = try await Self.post(
                try await Self.uploadURL(server, user: user), unclosed, contentType: "multipart/form-data; boundary=b")
            #expect(truncated.status == 400 && (truncated.json["reason"] as? String ?? "").contains("malformed"), "\(truncated.json)")
        }
    }
}
