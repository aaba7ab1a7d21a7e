import AsyncHTTPClient
import Crypto
import Foundation
import NIOCore
import NIOHTTP1
import StratusProcess
import StratusServer
import StratusTestSupport
import Testing

@Suite("stratus admin create-key, list-keys and revoke-key")
struct ServerKeyCommandTests {
    /// Runs `stratus admin …` on `data`; returns its standard output, or throws with its error.
    static func admin(_ arguments: [String], data: URL) async throws -> String {
        let run = try await runChildProcess(
            productsDirectory.appendingPathComponent("stratus"), ["admin"] + arguments + ["--data", data.path])
        #expect(run.status == 0, "stratus admin \(arguments) failed: \(run.errors)")
        return run.output
    }

    @Test("a key registered with create-key signs requests to stratus serve until revoke-key")
    func commandLine() async throws {
        let data = FileManager.default.temporaryDirectory.appendingPathComponent("stratus-keys-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: data) }
        _ = try await Self.admin(["create-container", "iCloud.com.example.backend"], data: data)
        let key = P256.Signing.PrivateKey()
        let publicFile = data.appendingPathComponent("public.pem")
        try key.publicKey.pemRepresentation.write(to: publicFile, atomically: true, encoding: .utf8)
        let created = try await Self.admin(
            ["create-key", "iCloud.com.example.backend", "--environment", "development", "--public-key", publicFile.path],
            data: data)
        let keyID = try #require(
            created.split(separator: "\n").first { $0.hasPrefix("key ID: ") }.map { String($0.dropFirst("key ID: ".count)) })
        #expect(try await Self.admin(["list-keys", "iCloud.com.example.backend"], data: data).contains("\(keyID)\tdevelopment\tactive"))

        let server = try ServerProcess(
            executable: productsDirectory.appendingPathComponent("stratus"),
            arguments: ["serve", "--data", data.path, "--port", "0"])
        defer { server.kill() }
        func query() async throws -> Int {
            let subpath = "/database/1/iCloud.com.example.backend/development/public/records/lookup"
            let body = #"{"records":[{"recordName":"note-1"}]}"#
            let date = Date().formatted(.iso8601)
            let bodyHash = Data(SHA256.hash(data: Data(body.utf8))).base64EncodedString()
            let signature = try key.signature(for: Data("\(date):\(bodyHash):\(subpath)".utf8))
            var request = HTTPClientRequest(url: server.url + subpath)
            request.method = .POST
            request.headers.add(name: "X-Apple-CloudKit-Request-KeyID", value: keyID)
            request.headers.add(name: "X-Apple-CloudKit-Request-ISO8601Date", value: date)
            request.headers.add(name: "X-Apple-CloudKit-Request-SignatureV1", value: signature.derRepresentation.base64EncodedString())
            request.body = .bytes(ByteBuffer(string: body))
            return Int(try await HTTPClient.shared.execute(request, timeout: .seconds(30)).status.code)
        }
        #expect(try await query() == 200)
        #expect(try await Self.admin(["revoke-key", "iCloud.com.example.backend", keyID], data: data).contains("revoked"))
        // The running server reads keys on every signed request, so the revocation holds at once.
        #expect(try await query() == 401)
    }

    @Test("an admin command given a --data folder that does not exist refuses, names it, and creates nothing")
    func missingDataFolder() async throws {
        let data = FileManager.default.temporaryDirectory.appendingPathComponent("stratus-misspelt-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: data) }
        for arguments in [["create-container", "iCloud.com.example.app"], ["list-keys", "iCloud.com.example.app"], ["migrate"]] {
            let run = try await runChildProcess(
                productsDirectory.appendingPathComponent("stratus"), ["admin"] + arguments + ["--data", data.path])
            #expect(run.status != 0, "stratus admin \(arguments) worked on a folder that does not exist")
            #expect(run.errors.contains("--data \(data.path): there is no such folder"), "\(run.errors)")
            #expect(!FileManager.default.fileExists(atPath: data.path), "stratus admin \(arguments) made the folder")
        }
    }

    @Test("list-users, disable-user, enable-user and reset-password manage a container's users from the command line")
    func users() async throws {
        let data = FileManager.default.temporaryDirectory.appendingPathComponent("stratus-users-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: data) }
        let container = "iCloud.com.example.users"
        _ = try await Self.admin(["create-container", container], data: data)
        let created = try await Self.admin(["create-user", container, "ada", "--password", "first long passphrase"], data: data)
        let recordName = try #require(
            created.split(separator: "\n").first { $0.hasPrefix("userRecordName: ") }.map { String($0.dropFirst(16)) })

        let server = try ServerProcess(
            executable: productsDirectory.appendingPathComponent("stratus"), arguments: ["serve", "--data", data.path, "--port", "0"])
        defer { server.kill() }
        let containerToken = try await Self.admin(["create-token", container], data: data)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        func signIn(_ password: String) async throws -> Int {
            var request = HTTPClientRequest(url: server.url + "/auth/1/\(container)/signin?ckAPIToken=\(containerToken)")
            request.method = .POST
            request.body = .bytes(ByteBuffer(string: #"{"username":"ada","password":"\#(password)"}"#))
            return Int(try await HTTPClient.shared.execute(request, timeout: .seconds(30)).status.code)
        }
        #expect(try await signIn("first long passphrase") == 200)

        let listed = try await Self.admin(["list-users", container], data: data)
        #expect(listed.hasPrefix("ada\t\(recordName)\t-\t") && listed.contains("\tactive"), "\(listed)")
        #expect(try await Self.admin(["disable-user", container, "ada"], data: data).contains("disabled ada"))
        #expect(try await Self.admin(["list-users", container], data: data).contains("\tdisabled "))
        #expect(try await signIn("first long passphrase") != 200, "a disabled user cannot sign in")
        #expect(try await Self.admin(["enable-user", container, recordName], data: data).contains("enabled"))
        let reset = try await runChildProcess(
            productsDirectory.appendingPathComponent("stratus"),
            ["admin", "reset-password", container, "ada", "--password", "second long passphrase", "--data", data.path])
        #expect(reset.status == 0, "\(reset.errors)")
        #expect(try await signIn("first long passphrase") != 200)
        #expect(try await signIn("second long passphrase") == 200)
        let unknown = try await runChildProcess(
            productsDirectory.appendingPathComponent("stratus"), ["admin", "disable-user", container, "bob", "--data", data.path])
        #expect(unknown.status != 0 && unknown.errors.contains("has no user 'bob'"), "\(unknown.errors)")
    }
}
