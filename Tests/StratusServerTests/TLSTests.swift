import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOSSL
import StratusModel
import StratusServer
import StratusTestSupport
import Testing

/// `--tls-cert` and `--tls-key`: the server answers HTTPS only, to a real TLS client that trusts its
/// certificate, and hands out `https://` URLs.
@Suite("TLS")
struct TLSTests {
    /// A self-signed certificate for 127.0.0.1 and its key, made by `openssl` in `directory`.
    static func makeCertificate(in directory: URL) async throws -> TLSIdentity {
        let certificate = directory.appendingPathComponent("cert.pem").path
        let key = directory.appendingPathComponent("key.pem").path
        let made = try await runChildProcess(
            URL(fileURLWithPath: "/usr/bin/env"),
            [
                "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                "-keyout", key, "-out", certificate, "-days", "2", "-subj", "/CN=127.0.0.1",
                "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
            ])
        try #require(made.status == 0, "openssl: \(made.errors)")
        return TLSIdentity(certificateChainPath: certificate, privateKeyPath: key)
    }

    @Test("a client trusting the certificate signs up, saves and reads over HTTPS, in HTTP/2 or HTTP/1.1; others are refused; plain HTTP gets nothing")
    func https() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("stratus-tls-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let identity = try await Self.makeCertificate(in: directory)
        let configuration = ServerConfiguration(
            port: 0, passwordHashCost: 4, requestHeadTimeout: .milliseconds(500), tls: identity)
        let server = try await TestServer.start(configuration: configuration)
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(identity.certificateChainPath))
        let client = HTTPClient(configuration: HTTPClient.Configuration(tlsConfiguration: tls))
        do {
            #expect(server.baseURL.hasPrefix("https://127.0.0.1:"))
            func call(
                _ path: String, _ body: [String: Any]? = nil, using client: HTTPClient, timeout: TimeAmount = .seconds(30)
            ) async throws -> (Int, [String: Any]) {
                var request = HTTPClientRequest(url: server.baseURL + path)
                if let body {
                    request.method = .POST
                    request.body = .bytes(ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: body)))
                }
                let response = try await client.execute(request, timeout: timeout)
                let bytes = try await response.body.collect(upTo: 1 << 20)
                return (Int(response.status.code), (try? JSONSerialization.jsonObject(with: Data(bytes.readableBytesView))) as? [String: Any] ?? [:])
            }
            let app = "ckAPIToken=\(server.apiToken)"
            let (signUpStatus, session) = try await call(
                "/auth/1/\(server.container)/signup?\(app)", ["username": "ada", "password": "correct horse"], using: client)
            #expect(signUpStatus == 200)
            let token = try #require(session["ckWebAuthToken"] as? String).addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
            let database = "/database/1/\(server.container)/development/private"
            let (saved, _) = try await call(
                "\(database)/records/modify?\(app)&ckWebAuthToken=\(token)",
                ["operations": [["operationType": "create", "record": [
                    "recordName": "n1", "recordType": "Note", "fields": ["title": ["value": "over TLS"]],
                ]]]], using: client)
            #expect(saved == 200)
            let (_, found) = try await call(
                "\(database)/records/lookup?\(app)&ckWebAuthToken=\(token)", ["records": [["recordName": "n1"]]], using: client)
            let fields = (found["records"] as? [[String: Any]])?.first?["fields"] as? [String: [String: Any]]
            #expect(fields?["title"]?["value"] as? String == "over TLS")
            // URLs the server hands out are https.
            let (_, push) = try await call(
                "/database/1/\(server.container)/development/tokens/create?\(app)&ckWebAuthToken=\(token)",
                ["apnsEnvironment": "development"], using: client)
            #expect((push["webcourierURL"] as? String)?.hasPrefix(server.baseURL + "/push/1/") == true, "\(push)")

            // A client that offers HTTP/2 (AsyncHTTPClient does, over TLS) speaks it; one that does not
            // speaks HTTP/1.1, and so does the WebSocket-capable channel behind it.
            let overHTTP2 = try await client.execute(HTTPClientRequest(url: server.baseURL + "/health"), timeout: .seconds(10))
            #expect(overHTTP2.version == .http2 && overHTTP2.status == .ok)
            var http1Only = HTTPClient.Configuration(tlsConfiguration: tls)
            http1Only.httpVersion = .http1Only
            let http1Client = HTTPClient(configuration: http1Only)
            let overHTTP1 = try await http1Client.execute(HTTPClientRequest(url: server.baseURL + "/health"), timeout: .seconds(10))
            try await http1Client.shutdown()
            #expect(overHTTP1.version == .http1_1 && overHTTP1.status == .ok)
            // An answer that closes an HTTP/1.1 connection (a body over its limit) reaches an HTTP/2
            // client whole, without the Connection header HTTP/2 forbids.
            var oversized = HTTPClientRequest(url: server.baseURL + "\(database)/records/query?\(app)&ckWebAuthToken=\(token)")
            oversized.method = .POST
            oversized.body = .bytes(ByteBuffer(repeating: UInt8(ascii: " "), count: 3 << 20))
            let refused = try await client.execute(oversized, timeout: .seconds(10))
            #expect(refused.version == .http2 && refused.status.code == 413 && refused.headers["Connection"].isEmpty)

            // A client that does not trust the certificate gets no answer (it retries the handshake until
            // its deadline).
            await #expect(throws: (any Error).self) {
                _ = try await call("/health", using: HTTPClient.shared, timeout: .seconds(1))
            }
            // Plain HTTP on the TLS port is not answered as HTTP, and neither is silence, which the
            // request-head deadline closes.
            let port = try #require(URL(string: server.baseURL)?.port)
            let plain = await ConnectionHygieneTests.exchange(
                port: port, sending: Array("GET /health HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
            #expect(!plain.text.contains("HTTP/1.1 200") && plain.closedByServer, "\(plain.text)")
            let silent = await ConnectionHygieneTests.exchange(port: port, sending: [])
            #expect(silent.closedByServer && silent.received.isEmpty)
        } catch {
            try? await client.shutdown()
            try await server.stopAndRemove()
            throw error
        }
        try await client.shutdown()
        try await server.stopAndRemove()
    }

    @Test("over HTTP/2, a request whose body never comes is held to the pace, and one network's bodies under way to their cap")
    func http2Bodies() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("stratus-tls-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let identity = try await Self.makeCertificate(in: directory)
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(identity.certificateChainPath))
        let client = HTTPClient(configuration: HTTPClient.Configuration(tlsConfiguration: tls))
        /// A sign-in whose body (of no announced length: HEADERS without END_STREAM, then nothing) never comes.
        func stalled(_ server: TestServer, by client: HTTPClient) async -> (error: (any Error)?, after: Duration) {
            var request = HTTPClientRequest(url: server.baseURL + "/auth/1/\(server.container)/signin?ckAPIToken=\(server.apiToken)")
            request.method = .POST
            let (never, _) = AsyncStream<ByteBuffer>.makeStream()
            request.body = .stream(never, length: .unknown)
            let start = ContinuousClock.now
            do {
                _ = try await client.execute(request, timeout: .seconds(60))
                return (nil, ContinuousClock.now - start)
            } catch {
                return (error, ContinuousClock.now - start)
            }
        }
        do {
        for (pace, check) in [
            // Held to the pace: closed after the grace period, long before the client's own minute.
            (RequestBodyPace(gracePeriod: .milliseconds(500)), "pace"),
            // One body per network: a second one is refused at once.
            (RequestBodyPace(timeout: .seconds(600), gracePeriod: .seconds(600), maxBodiesPerClient: 1), "cap"),
        ] {
            let server = try await TestServer.start(
                configuration: ServerConfiguration(port: 0, passwordHashCost: 4, bodyPace: pace, tls: identity))
            let health = try await client.execute(HTTPClientRequest(url: server.baseURL + "/health"), timeout: .seconds(10))
            #expect(health.version == .http2)
            if check == "pace" {
                let outcome = await stalled(server, by: client)
                #expect(outcome.error != nil && outcome.after < .seconds(30), "\(String(describing: outcome.error)) after \(outcome.after)")
            } else {
                // Each stalled request on a client of its own, shut down before the server stops:
                // AsyncHTTPClient keeps a connection whose request body never ended open past the
                // stop's GOAWAY, which then waits out the server's graceful-close timeout.
                let holder = HTTPClient(configuration: HTTPClient.Configuration(tlsConfiguration: tls))
                let first = Task { await stalled(server, by: holder) }
                // The first holds the network's one slot once its headers are read.
                var arriving = 0.0
                for _ in 0..<600 where arriving < 1 {
                    var metrics = HTTPClientRequest(url: server.baseURL + "/metrics")
                    metrics.headers.add(name: "Authorization", value: "Bearer \(server.credentials.adminToken)")
                    let reply = try await client.execute(metrics, timeout: .seconds(10))
                    let text = String(buffer: try await reply.body.collect(upTo: 16 << 20))
                    arriving = try await MetricsScrape(parsing: text).value("stratus_request_bodies_arriving")
                    if arriving < 1 { try await Task.sleep(for: .milliseconds(20)) }
                }
                try #require(arriving == 1)
                let refusedClient = HTTPClient(configuration: HTTPClient.Configuration(tlsConfiguration: tls))
                let second = await stalled(server, by: refusedClient)
                try await refusedClient.shutdown()
                #expect(second.error != nil && second.after < .seconds(30), "\(String(describing: second.error)) after \(second.after)")
                first.cancel()
                _ = await first.value
                try await holder.shutdown()
            }
            try await server.stopAndRemove()
        }
        } catch {
            try? await client.shutdown()
            throw error
        }
        try await client.shutdown()
    }

    @Test("a certificate or key that cannot be read stops the start with a message naming the flag and file")
    func unreadableFiles() async throws {
        let missing = TLSIdentity(certificateChainPath: "/nonexistent/cert.pem", privateKeyPath: "/nonexistent/key.pem")
        let configuration = ServerConfiguration(port: 0, passwordHashCost: 4, tls: missing)
        await #expect {
            _ = try await TestServer.start(configuration: configuration)
        } throws: { error in
            "\(error)".contains("--tls-cert /nonexistent/cert.pem")
        }
    }
}
