import AsyncHTTPClient
import Crypto
import Foundation
import NIOCore
import NIOHTTP1
import StratusProcess
import StratusServer
import StratusTestSupport
import Testing

/// What a `stratus serve` process leaves on disk and in its log: nothing another local account can
/// read, and no secret at any log level.
@Suite("data protection of a stratus serve process")
struct DataProtectionTests {
    /// A `stratus serve` child process on a free port with its data in `data`.
    static func serve(data: URL, log: URL? = nil, _ extra: [String] = []) throws -> ServerProcess {
        try ServerProcess(
            executable: productsDirectory.appendingPathComponent("stratus"),
            arguments: ["serve", "--data", data.path, "--port", "0"] + extra, log: log)
    }

    /// The server's first-start credentials.
    static func credentials(in data: URL) throws -> ServerCredentials {
        try JSONDecoder().decode(ServerCredentials.self, from: Data(contentsOf: data.appendingPathComponent("credentials.json")))
    }

    /// Sends `body` as JSON and returns the answer's JSON object.
    static func call(
        _ url: String, _ body: Any? = nil, method: HTTPMethod = .POST, raw: [UInt8]? = nil, headers: [String: String] = [:]
    ) async throws -> [String: Any] {
        var request = HTTPClientRequest(url: url)
        request.method = method
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if let raw { request.body = .bytes(ByteBuffer(bytes: raw)) }
        if let body { request.body = .bytes(ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: body))) }
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
        let bytes = try await response.body.collect(upTo: 1 << 20)
        return (try? JSONSerialization.jsonObject(with: Data(bytes.readableBytesView))) as? [String: Any] ?? [:]
    }

    /// Signs up (with a wrong sign-in first), uploads an asset and saves a record holding it; returns
    /// every secret the exchange carried: passwords, the web auth token, the upload ticket, the receipt.
    static func exercise(_ server: ServerProcess, credentials: ServerCredentials) async throws -> [String] {
        let password = "a password of \(UUID().uuidString)"
        let wrongPassword = "not the password \(UUID().uuidString)"
        let auth = "\(server.url)/auth/1/\(credentials.container)"
        let app = "ckAPIToken=\(credentials.apiToken)"
        _ = try await call("\(auth)/signup?\(app)", ["username": "mei", "password": password])
        _ = try await call("\(auth)/signin?\(app)", ["username": "mei", "password": wrongPassword])
        let session = try await call("\(auth)/signin?\(app)", ["username": "mei", "password": password])
        let token = try #require(session["ckWebAuthToken"] as? String, "\(session)")
        let database = "\(server.url)/database/1/\(credentials.container)/development/private"
        let user = "\(app)&ckWebAuthToken=\(token)"
        let tokens = try await call(
            "\(database)/assets/upload?\(user)", ["tokens": [["recordType": "Note", "fieldName": "text"]]])
        let uploadURL = try #require((tokens["tokens"] as? [[String: Any]])?.first?["url"] as? String, "\(tokens)")
        let ticket = try #require(URLComponents(string: uploadURL)?.queryItems?.first { $0.name == "ticket" }?.value)
        let uploaded = try await call(uploadURL, raw: Array("the asset's bytes \(UUID().uuidString)".utf8))
        let singleFile = try #require(uploaded["singleFile"] as? [String: Any], "\(uploaded)")
        let receipt = try #require(singleFile["receipt"] as? String)
        let saved = try await call(
            "\(database)/records/modify?\(user)",
            ["operations": [["operationType": "create", "record": [
                "recordName": "doc", "recordType": "Note", "fields": ["text": ["value": singleFile, "type": "ASSETID"]],
            ]]]])
        #expect((saved["records"] as? [[String: Any]])?.first?["serverErrorCode"] == nil, "\(saved)")
        let forged = "forged-\(UUID().uuidString)"
        _ = try await call("\(database)/zones/list?\(app)&ckWebAuthToken=\(forged)", method: .GET)
        // An APNs key set through the admin API: its PEM's body is the secret.
        let apnsKey = P256.Signing.PrivateKey().pemRepresentation
        let set = try await call(
            "\(server.url)/admin/1/containers/\(credentials.container)/push/apns/production",
            ["teamID": "TEAM123456", "keyID": "KEY1234567", "privateKey": apnsKey, "topic": "com.example.notes"],
            method: .PUT, headers: ["Authorization": "Bearer \(credentials.adminToken)"])
        #expect(set["apns-production"] is [String: Any], "\(set)")
        let keyBody = apnsKey.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
        return [password, wrongPassword, token, ticket, receipt, forged, String(keyBody.prefix(40))]
    }

    static func mode(_ url: URL) throws -> Int {
        try #require((try FileManager.default.attributesOfItem(atPath: url.path)[.posixPermissions] as? NSNumber)?.intValue)
    }

    @Test("the database, its WAL, assets and uploads are the server's account's only; tokens are printed once")
    func fileModes() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("stratus-modes-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        let data = root.appendingPathComponent("data")
        let first = try Self.serve(data: data)
        defer { first.kill() }
        let credentials = try Self.credentials(in: data)
        #expect(first.banner.contains(credentials.adminToken), "the first start prints the tokens it made")
        _ = try await Self.exercise(first, credentials: credentials)

        let assets = data.appendingPathComponent("assets")
        let blobs = try FileManager.default.contentsOfDirectory(atPath: assets.path).filter { $0 != "tmp" }
        #expect(blobs.count == 1)
        let shard = assets.appendingPathComponent(try #require(blobs.first))
        let blob = shard.appendingPathComponent(try #require(try FileManager.default.contentsOfDirectory(atPath: shard.path).first))
        for directory in [data, assets, assets.appendingPathComponent("tmp"), shard] {
            #expect(try Self.mode(directory) == 0o700, "\(directory.path)")
        }
        for file in ["stratus.sqlite", "stratus.sqlite-wal", "stratus.sqlite-shm", "credentials.json"] {
            #expect(try Self.mode(data.appendingPathComponent(file)) == 0o600, "\(file)")
        }
        #expect(try Self.mode(blob) == 0o600)
        first.stop()

        // A later start keeps the tokens to the file and says where it is.
        let second = try Self.serve(data: data)
        defer { second.kill() }
        #expect(second.banner.contains("credentials: \(data.appendingPathComponent("credentials.json").path)"), "\(second.banner)")
        #expect(!second.banner.contains(credentials.adminToken) && !second.banner.contains(credentials.apiToken))
    }

    @Test("a trace-level log of a start with an S3 bucket, sign-ins, an upload and a forged token holds no secret")
    func noSecretsInLogs() async throws {
        let endpoint = try #require(
            ProcessInfo.processInfo.environment["STRATUS_TEST_S3_ENDPOINT"],
            "STRATUS_TEST_S3_ENDPOINT is not set: run scripts/test, which starts an S3-compatible server")
        let bucket = "stratus-\(UUID().uuidString.lowercased())"
        _ = try await Self.call("\(endpoint)/\(bucket)", method: .PUT)
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("stratus-logs-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        let log = root.appendingPathComponent("stratus.log")
        let accessKey = "AKID\(UUID().uuidString.prefix(8))"
        let secretKey = "secret-\(UUID().uuidString)"
        let server = try Self.serve(
            data: root.appendingPathComponent("data"), log: log,
            [
                "--log-level", "trace", "--assets", "s3://\(bucket)/assets", "--s3-endpoint", endpoint,
                "--s3-access-key", accessKey, "--s3-secret-key", secretKey,
            ])
        defer { server.kill() }
        let credentials = try Self.credentials(in: root.appendingPathComponent("data"))
        let secrets = try await Self.exercise(server, credentials: credentials)
        server.stop()

        let text = try String(contentsOf: log, encoding: .utf8)
        #expect(text.contains("Housekeeping"), "the log is on at trace level: \(text.prefix(500))")
        let named = [
            ("S3 secret key", secretKey), ("S3 access key", accessKey), ("API token", credentials.apiToken),
            ("admin token", credentials.adminToken),
        ] + zip(
            ["password", "wrong password", "web auth token", "upload ticket", "receipt", "forged token", "APNs key"], secrets
        ).map { ($0, $1) }
        for (name, secret) in named {
            #expect(!text.contains(secret), "the log holds the \(name)")
        }
    }
}
