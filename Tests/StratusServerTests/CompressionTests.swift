import AsyncHTTPClient
import CompressNIO
import Foundation
import NIOCore
import NIOHTTP1
import StratusModel
import StratusServer
import StratusTestSupport
import Testing

/// gzip both ways: answers for clients that accept it, request bodies that say they are.
@Suite("compression")
struct CompressionTests {
    /// Sends a raw request and returns status, headers and the body bytes as they came.
    static func send(
        _ server: TestServer, _ path: String, user: String, body: ByteBuffer, headers: [String: String]
    ) async throws -> (status: Int, headers: HTTPHeaders, body: ByteBuffer) {
        var request = HTTPClientRequest(
            url: server.baseURL + "/database/1/\(server.container)/development/private/\(path)?ckAPIToken=\(server.apiToken)"
                + "&ckWebAuthToken=\(user.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)")
        request.method = .POST
        request.body = .bytes(body)
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        // A client that leaves bodies as they came (the shared one inflates them).
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: HTTPClient.Configuration())
        do {
            let response = try await client.execute(request, timeout: .seconds(60))
            let body = try await response.body.collect(upTo: 64 << 20)
            try await client.shutdown()
            return (Int(response.status.code), response.headers, body)
        } catch {
            try await client.shutdown()
            throw error
        }
    }

    static func json(_ object: Any) throws -> ByteBuffer {
        ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: object))
    }

    static func gzip(_ buffer: ByteBuffer) throws -> ByteBuffer {
        var buffer = buffer
        return try buffer.compress(with: .gzip())
    }

    @Test("feeds, queries and lookups go gzip-compressed to clients that accept it, and gzip request bodies are read")
    func gzipBothWays() async throws {
        try await withServer { server in
            let user = try await server.signUp("ada").token
            try await server.createZone("Z", user: user)
            let operations = (0..<100).map { index in
                operation("create", "note-\(index)", fields: ["title": ["value": "a note about the weather, number \(index)"]])
            }
            // The request body itself compressed.
            let created = try await Self.send(
                server, "records/modify", user: user,
                body: try Self.gzip(try Self.json(["zoneID": ["zoneName": "Z"], "operations": operations])),
                headers: ["Content-Type": "application/json", "Content-Encoding": "gzip"])
            #expect(created.status == 200, "\(String(buffer: created.body))")

            let feedRequest = try Self.json(["zoneID": ["zoneName": "Z"]])
            let plain = try await Self.send(server, "records/changes", user: user, body: feedRequest, headers: [:])
            #expect(plain.headers.first(name: "Content-Encoding") == nil)
            #expect(plain.headers.first(name: "Vary") == "Accept-Encoding")
            let compressed = try await Self.send(
                server, "records/changes", user: user, body: feedRequest, headers: ["Accept-Encoding": "br;q=1, gzip;q=0.8"])
            #expect(compressed.headers.first(name: "Content-Encoding") == "gzip")
            #expect(compressed.body.readableBytes * 4 < plain.body.readableBytes, "a feed page shrinks several times")
            var body = compressed.body
            let inflated = try body.decompress(with: .gzip())
            #expect(inflated == plain.body, "the same answer, byte for byte, once inflated")
            let page = try JSONSerialization.jsonObject(with: Data(inflated.readableBytesView)) as? [String: Any]
            #expect((page?["records"] as? [Any])?.count == 100)

            // Every large answer of a reading endpoint is the same, byte for byte, once inflated.
            let reads: [(String, Any)] = [
                ("records/query", ["zoneID": ["zoneName": "Z"], "query": ["recordType": "Note"]]),
                ("records/lookup", ["zoneID": ["zoneName": "Z"], "records": (0..<100).map { ["recordName": "note-\($0)"] }]),
                ("changes/zone", ["zones": [["zoneID": ["zoneName": "Z"]]]]),
                ("changes/database", [String: Any]()),
            ]
            for (path, request) in reads {
                let body = try Self.json(request)
                let plain = try await Self.send(server, path, user: user, body: body, headers: [:])
                var gzipped = try await Self.send(server, path, user: user, body: body, headers: ["Accept-Encoding": "gzip"])
                #expect(plain.status == 200 && gzipped.status == 200, "\(path): \(String(buffer: plain.body))")
                guard plain.body.readableBytes >= 1_024 else { continue }
                #expect(gzipped.headers.first(name: "Content-Encoding") == "gzip", "\(path)")
                #expect(try gzipped.body.decompress(with: .gzip()) == plain.body, "\(path): the same answer once inflated")
            }

            // Small answers, and clients that refuse gzip, get plain bodies.
            let small = try await Self.send(
                server, "records/lookup", user: user,
                body: try Self.json(["zoneID": ["zoneName": "Z"], "records": [["recordName": "note-1"]]]),
                headers: ["Accept-Encoding": "gzip"])
            #expect(small.status == 200 && small.headers.first(name: "Content-Encoding") == nil)
            let refused = try await Self.send(
                server, "records/changes", user: user, body: feedRequest, headers: ["Accept-Encoding": "gzip;q=0"])
            #expect(refused.headers.first(name: "Content-Encoding") == nil)

            // Bodies that are not what they claim, or inflate past the limit, are refused.
            let corrupt = try await Self.send(
                server, "records/changes", user: user, body: feedRequest, headers: ["Content-Encoding": "gzip"])
            #expect(corrupt.status == 400 && String(buffer: corrupt.body).contains("not valid gzip"))
            let brotli = try await Self.send(
                server, "records/changes", user: user, body: feedRequest, headers: ["Content-Encoding": "br"])
            #expect(brotli.status == 400 && String(buffer: brotli.body).contains("'br' is not supported"))
            let bomb = try Self.gzip(ByteBuffer(repeating: UInt8(ascii: " "), count: server.configuration.limits.maxSmallRequestBodyBytes + 1))
            #expect(bomb.readableBytes < 1 << 20)
            let exploded = try await Self.send(
                server, "records/changes", user: user, body: bomb, headers: ["Content-Encoding": "gzip"])
            #expect(exploded.status == 413 && String(buffer: exploded.body).contains("inflates"), "\(String(buffer: exploded.body))")
        }
    }
}
