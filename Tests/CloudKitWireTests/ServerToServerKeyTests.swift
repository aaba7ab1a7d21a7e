import AsyncHTTPClient
import Crypto
import Foundation
import NIOCore
import NIOHTTP1
import StratusServer
import StratusTestSupport
import Testing

/// Server-to-server keys as Apple's reference ("Composing Web Service Requests") describes them:
/// written from that page, not from Stratus's docs.
@Suite("CloudKit wire: server-to-server keys")
struct ServerToServerKeyTests {
    /// A server whose clock stands still, so signed dates are judged against a known time.
    static func withKeyServer(_ body: (TestServer, ManualClock) async throws -> Void) async throws {
        let clock = ManualClock()
        try await withServer(ServerConfiguration(port: 0, passwordHashCost: 4, clock: clock.serverClock)) { server in
            try await body(server, clock)
        }
    }

    /// Registers `publicKeyPEM` through the admin API; returns the key ID and the key's user.
    static func register(_ publicKeyPEM: String, environment: String = "development", on server: TestServer)
        async throws -> (keyID: String, userRecordName: String)
    {
        try await server.registerServerKey(publicKeyPEM, environment: environment)
    }

    /// The ISO 8601 form Apple's clients send: seconds, UTC.
    static func isoDate(_ milliseconds: Int64) -> String {
        Date(timeIntervalSince1970: Double(milliseconds) / 1000).formatted(.iso8601)
    }

    /// The signature Apple's reference asks for, made with swift-crypto.
    static func sign(_ key: P256.Signing.PrivateKey, date: String, body: String, subpath: String) throws -> String {
        let bodyHash = Data(SHA256.hash(data: Data(body.utf8))).base64EncodedString()
        return try key.signature(for: Data("\(date):\(bodyHash):\(subpath)".utf8)).derRepresentation.base64EncodedString()
    }

    /// Sends exactly `body` to `subpath` (the request target, query string included) with the three
    /// signing headers.
    static func send(
        _ server: TestServer, _ subpath: String, body: String, keyID: String?, date: String?, signature: String?
    ) async throws -> (status: Int, json: [String: Any], text: String) {
        var request = HTTPClientRequest(url: server.baseURL + subpath)
        request.method = .POST
        if let keyID { request.headers.add(name: "X-Apple-CloudKit-Request-KeyID", value: keyID) }
        if let date { request.headers.add(name: "X-Apple-CloudKit-Request-ISO8601Date", value: date) }
        if let signature { request.headers.add(name: "X-Apple-CloudKit-Request-SignatureV1", value: signature) }
        request.body = .bytes(ByteBuffer(string: body))
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
        let bytes = try await response.body.collect(upTo: 1 << 20)
        let json = (try? JSONSerialization.jsonObject(with: Data(bytes.readableBytesView))) as? [String: Any] ?? [:]
        return (Int(response.status.code), json, String(buffer: bytes))
    }

    static func path(
        _ server: TestServer, _ operation: String, database: String = "public", environment: String = "development"
    ) -> String {
        "/database/1/\(server.container)/\(environment)/\(database)/\(operation)"
    }

    static let createNote = #"{"operations":[{"operationType":"create","record":{"recordType":"Note","recordName":"from-server","fields":{"title":{"value":"signed"}}}}]}"#

    @Test("a request signed with a registered key needs no API token and writes to the public database as the key's own user")
    func signedRequests() async throws {
        try await Self.withKeyServer { server, clock in
            let key = P256.Signing.PrivateKey()
            let (keyID, keyUser) = try await Self.register(key.publicKey.pemRepresentation, on: server)
            #expect(keyID.count == 64 && keyID.allSatisfy(\.isHexDigit), "key IDs have Apple's shape: \(keyID)")

            let date = Self.isoDate(clock.milliseconds)
            let subpath = Self.path(server, "records/modify")
            let saved = try await Self.send(
                server, subpath, body: Self.createNote, keyID: keyID, date: date,
                signature: try Self.sign(key, date: date, body: Self.createNote, subpath: subpath))
            #expect(saved.status == 200, "\(saved.text)")
            let record = try #require((saved.json["records"] as? [[String: Any]])?.first)
            #expect((record["created"] as? [String: Any])?["userRecordName"] as? String == keyUser)

            // Users of the app see it, created by the key's user.
            let (reader, _) = try await server.signUp("reader")
            let lookup = try await server.database("public", "records/lookup", ["records": [["recordName": "from-server"]]], user: reader)
            #expect(lookup.records.first?["recordType"] as? String == "Note", "\(lookup.text)")

            // With an API token beside the signature, both count: the token, and the signature over
            // the target with its query string.
            let withToken = subpath + "?ckAPIToken=\(server.apiToken)"
            let query = #"{"query":{"recordType":"Note"}}"#
            let queried = try await Self.send(
                server, Self.path(server, "records/query") + "?ckAPIToken=\(server.apiToken)", body: query, keyID: keyID,
                date: date,
                signature: try Self.sign(
                    key, date: date, body: query, subpath: Self.path(server, "records/query") + "?ckAPIToken=\(server.apiToken)"))
            #expect(queried.status == 200 && (queried.json["records"] as? [Any])?.count == 1, "\(queried.text)")
            let badSignature = try await Self.send(
                server, withToken, body: Self.createNote, keyID: keyID, date: date,
                signature: try Self.sign(P256.Signing.PrivateKey(), date: date, body: Self.createNote, subpath: withToken))
            #expect(badSignature.status == 401, "a bad signature is refused even with a valid API token: \(badSignature.text)")
        }
    }

    @Test("a signature made by an independent implementation (Python's cryptography package) verifies")
    func independentSigner() async throws {
        try await Self.withKeyServer { server, clock in
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("s2s-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let script = directory.appendingPathComponent("sign.py")
            try """
                import base64, hashlib, sys
                from cryptography.hazmat.primitives import hashes, serialization
                from cryptography.hazmat.primitives.asymmetric import ec
                key_file = sys.argv[1]
                if sys.argv[2] == "new":
                    key = ec.generate_private_key(ec.SECP256R1())
                    open(key_file, "wb").write(key.private_bytes(
                        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
                    sys.stdout.write(key.public_key().public_bytes(
                        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode())
                else:
                    key = serialization.load_pem_private_key(open(key_file, "rb").read(), password=None)
                    date, body, subpath = sys.argv[2], sys.argv[3], sys.argv[4]
                    message = ":".join([date, base64.b64encode(hashlib.sha256(body.encode()).digest()).decode(), subpath])
                    sys.stdout.write(base64.b64encode(key.sign(message.encode(), ec.ECDSA(hashes.SHA256()))).decode())
                """.write(to: script, atomically: true, encoding: .utf8)
            let keyFile = directory.appendingPathComponent("key.pem").path
            let publicPEM = try await Self.python(script.path, keyFile, "new")
            let (keyID, _) = try await Self.register(publicPEM, on: server)
            let date = Self.isoDate(clock.milliseconds)
            let subpath = Self.path(server, "records/modify")
            let signature = try await Self.python(script.path, keyFile, date, Self.createNote, subpath)
            let saved = try await Self.send(server, subpath, body: Self.createNote, keyID: keyID, date: date, signature: signature)
            #expect(saved.status == 200, "\(saved.text)")
        }
    }

    static func python(_ arguments: String...) async throws -> String {
        let run = try await runChildProcess(URL(fileURLWithPath: "/usr/bin/env"), ["python3"] + arguments)
        #expect(run.status == 0, "python3 \(arguments) failed (is the cryptography package installed?): \(run.errors)")
        return run.output
    }

    @Test("refused: a date outside five minutes, a tampered body, a revoked or unknown key, a key of another environment, the private database, a missing header")
    func refusals() async throws {
        try await Self.withKeyServer { server, clock in
            let key = P256.Signing.PrivateKey()
            let (keyID, _) = try await Self.register(key.publicKey.pemRepresentation, on: server)
            let subpath = Self.path(server, "records/modify")
            func attempt(
                _ subpath: String, body: String = Self.createNote, signedBody: String? = nil, at milliseconds: Int64? = nil,
                keyID: String? = nil
            ) async throws -> (status: Int, json: [String: Any], text: String) {
                let date = Self.isoDate(milliseconds ?? clock.milliseconds)
                return try await Self.send(
                    server, subpath, body: body, keyID: keyID ?? keyIDForAttempts, date: date,
                    signature: try Self.sign(key, date: date, body: signedBody ?? body, subpath: subpath))
            }
            let keyIDForAttempts = keyID

            let early = try await attempt(subpath, at: clock.milliseconds - 301_000)
            #expect(early.status == 401 && (early.json["reason"] as? String ?? "").contains("5 minutes"), "\(early.text)")
            let late = try await attempt(subpath, at: clock.milliseconds + 301_000)
            #expect(late.status == 401, "\(late.text)")
            #expect(try await attempt(subpath, at: clock.milliseconds - 299_000).status == 200, "within the window")

            let tampered = try await attempt(subpath, body: Self.createNote.replacingOccurrences(of: "signed", with: "forged"), signedBody: Self.createNote)
            #expect(tampered.status == 401 && (tampered.json["reason"] as? String ?? "").contains("does not verify"), "\(tampered.text)")

            let privateDatabase = try await attempt(Self.path(server, "records/modify", database: "private"))
            #expect(privateDatabase.status == 403 && privateDatabase.json["serverErrorCode"] as? String == "ACCESS_DENIED", "\(privateDatabase.text)")
            let otherEnvironment = try await attempt(Self.path(server, "records/modify", environment: "production"))
            #expect(otherEnvironment.status == 401 && (otherEnvironment.json["reason"] as? String ?? "").contains("development"), "\(otherEnvironment.text)")
            let unknown = try await attempt(subpath, keyID: String(repeating: "0", count: 64))
            #expect(unknown.status == 401, "\(unknown.text)")
            let missing = try await Self.send(server, subpath, body: Self.createNote, keyID: keyID, date: nil, signature: "x")
            #expect(missing.status == 401 && (missing.json["reason"] as? String ?? "").contains("X-Apple-CloudKit-Request-ISO8601Date"), "\(missing.text)")

            let revoked = try await server.request(
                .DELETE, "/admin/1/containers/\(server.container)/keys/\(keyID)",
                headers: ["Authorization": "Bearer \(server.credentials.adminToken)"])
            #expect(revoked.status == 200 && revoked.body["revoked"] != nil, "\(revoked.text)")
            let afterRevocation = try await attempt(subpath)
            #expect(afterRevocation.status == 401 && (afterRevocation.json["reason"] as? String ?? "").contains("revoked"), "\(afterRevocation.text)")

            let notAKey = try await server.request(
                .POST, "/admin/1/containers/\(server.container)/keys", body: ["environment": "development", "publicKey": "nonsense"],
                headers: ["Authorization": "Bearer \(server.credentials.adminToken)"])
            #expect(notAKey.status == 400 && notAKey.reason.contains("publicKey"), "\(notAKey.text)")
        }
    }
}
