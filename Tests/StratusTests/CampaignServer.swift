import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import StratusProcess
import StratusServer
import StratusTestSupport
import Synchronization
import Testing

/// A `stratus serve` child process over a data folder of its own, as the campaigns run it: started,
/// killed and started again over the same data, with the credentials its first start made, and
/// plain JSON calls to it.
final class CampaignServer: Sendable {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("stratus-campaign-\(UUID().uuidString)")
    /// Arguments after `serve --data … --port 0`.
    let arguments: [String]
    private let running: Mutex<ServerProcess>
    let credentials: ServerCredentials

    /// The running process (another one after ``crashAndRestart()``).
    var process: ServerProcess { running.withLock { $0 } }

    var data: URL { root.appendingPathComponent("data") }
    var url: String { process.url }
    /// `ckAPIToken=…`, the app's part of every query.
    var app: String { "ckAPIToken=\(credentials.apiToken)" }

    /// The limit on open files the process runs under, when one was set.
    let openFileLimit: Int?
    /// Where the process's log goes.
    var log: URL { root.appendingPathComponent("server.log") }

    /// Starts `stratus serve` with `arguments`, under an open-file limit of `openFileLimit` (soft and
    /// hard, as `ulimit -n` sets them) when given.
    init(_ arguments: [String] = [], openFileLimit: Int? = nil) throws {
        self.arguments = arguments
        self.openFileLimit = openFileLimit
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        running = Mutex(
            try Self.start(
                data: root.appendingPathComponent("data"), arguments: arguments, openFileLimit: openFileLimit,
                log: root.appendingPathComponent("server.log")))
        credentials = try JSONDecoder().decode(
            ServerCredentials.self, from: Data(contentsOf: root.appendingPathComponent("data/credentials.json")))
    }

    private static func start(data: URL, arguments: [String], openFileLimit: Int?, log: URL) throws -> ServerProcess {
        let stratus = productsDirectory.appendingPathComponent("stratus")
        let serve = ["serve", "--data", data.path, "--port", "0", "--log-level", "notice"] + arguments
        guard let openFileLimit else {
            return try ServerProcess(executable: stratus, arguments: serve, log: log)
        }
        // The shell sets the limit, then becomes the server (exec keeps its process).
        return try ServerProcess(
            executable: URL(fileURLWithPath: "/bin/sh"),
            arguments: ["-c", "ulimit -n \(openFileLimit) && exec \"$0\" \"$@\"", stratus.path] + serve, log: log)
    }

    /// Kills the process at once (SIGKILL) and starts it again over the same data.
    func crashAndRestart() throws {
        process.kill()
        let restarted = try Self.start(data: data, arguments: arguments, openFileLimit: openFileLimit, log: log)
        running.withLock { $0 = restarted }
    }

    /// Stops the process and removes its data.
    func stopAndRemove() {
        process.stop()
        try? FileManager.default.removeItem(at: root)
    }

    /// A database's URL, `…/database/1/{container}/development/{database}`.
    func database(_ database: String = "private") -> String {
        "\(url)/database/1/\(credentials.container)/development/\(database)"
    }

    /// Signs `username` up (or in, when `signIn`) and returns the query of their requests:
    /// `ckAPIToken=…&ckWebAuthToken=…`.
    func session(_ username: String, signIn: Bool = false) async throws -> String {
        let answer = try await Self.call(
            "\(url)/auth/1/\(credentials.container)/\(signIn ? "signin" : "signup")?\(app)",
            ["username": username, "password": "correct horse battery"])
        let token = try #require(answer["ckWebAuthToken"] as? String, "\(answer)")
        return "\(app)&ckWebAuthToken=\(token.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)"
    }

    /// An answer that came back, but not with 200.
    struct CallError: Error, CustomStringConvertible {
        var description: String
    }

    /// Sends `body` as JSON; the answer's JSON object. A transport error is thrown as it is; an answer
    /// other than 200 as ``CallError``.
    static func call(_ url: String, _ body: [String: Any]) async throws -> [String: Any] {
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        // Plain answers: the shared client refuses to inflate past 25 times, which repetitive records pass.
        request.headers.add(name: "Accept-Encoding", value: "identity")
        request.body = .bytes(ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: body)))
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
        let bytes = try await response.body.collect(upTo: 16 << 20)
        guard response.status == .ok else {
            throw CallError(description: "\(response.status.code): \(String(buffer: bytes))")
        }
        return (try JSONSerialization.jsonObject(with: Data(bytes.readableBytesView))) as? [String: Any] ?? [:]
    }
}
