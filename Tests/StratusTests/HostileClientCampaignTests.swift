import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import StratusProcess
import StratusServer
import StratusTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The hostile-client cases of docs/reliability.md, against a `stratus serve` child process: clients
/// from many addresses that hold connections by trickling their bodies, and a server whose open-file
/// limit is far below what they ask for. Meanwhile another client must keep being served.
///
/// `scripts/test` runs them at a bounded size; `scripts/campaign hostile` at the probe's size
/// (`STRATUS_CAMPAIGN_HOSTILE_SECONDS=150`: 20 addresses × 500 connections for 150 s).
@Suite("campaign: hostile clients")
struct HostileClientCampaignTests {
    /// A served client's requests while an attack runs: each one's time to its answer, and those
    /// that failed (an answer other than expected, or none).
    struct Served {
        var latencies: [Duration] = []
        var failures: [String] = []

        var median: Duration { latencies.sorted()[latencies.count / 2] }
        var worst: Duration { latencies.max() ?? .zero }
    }

    /// Sends `GET /health` and a signed-in `records/lookup` from 127.0.0.1 every 200 ms until `done`.
    static func serve(_ server: CampaignServer, query: String, until done: @escaping @Sendable () -> Bool) async -> Served {
        var served = Served()
        let lookup = "\(server.database())/records/lookup?\(query)"
        while !done() {
            for (url, body) in [("\(server.url)/health", nil), (lookup, #"{"records":[{"recordName":"missing"}]}"#)] {
                var request = HTTPClientRequest(url: url)
                if let body {
                    request.method = .POST
                    request.body = .bytes(ByteBuffer(string: body))
                }
                let start = ContinuousClock.now
                do {
                    let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
                    _ = try await response.body.collect(upTo: 1 << 20)
                    served.latencies.append(ContinuousClock.now - start)
                    if response.status != .ok { served.failures.append("\(url): \(response.status.code)") }
                } catch {
                    served.failures.append("\(url): \(error)")
                }
            }
            try? await Task.sleep(for: .milliseconds(200))
        }
        return served
    }

    /// What the server's `/metrics` says of shed connections, by reason.
    static func shed(_ server: CampaignServer) async throws -> String {
        var request = HTTPClientRequest(url: "\(server.url)/metrics")
        request.headers.add(name: "Authorization", value: "Bearer \(server.credentials.adminToken)")
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
        let text = String(buffer: try await response.body.collect(upTo: 16 << 20))
        return text.split(separator: "\n").filter { $0.hasPrefix("stratus_connections_shed_total") }.joined(separator: "; ")
    }

    @Test("bodies trickling in over many connections from many addresses: others keep being served, the trickles are closed")
    func tricklingBodies() async throws {
        let environment = ProcessInfo.processInfo.environment
        let seconds = environment["STRATUS_CAMPAIGN_HOSTILE_SECONDS"].flatMap(Int.init) ?? 25
        let full = environment["STRATUS_CAMPAIGN_HOSTILE_SECONDS"] != nil
        let (addresses, perAddress) = full ? (20, 500) : (4, 150)
        // Bounded, the server holds fewer connections than the attack opens, as the probe's 10,000 did.
        let server = try CampaignServer(full ? [] : ["--max-connections", "400"])
        defer { server.stopAndRemove() }
        let port = try #require(URL(string: server.url)?.port)
        let query = try await server.session("served")
        // Half post to an endpoint that answers at once, half sign in with a body the endpoint reads:
        // one byte every five seconds each, as the probe sent.
        let attacks = [
            "POST /health HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n",
            "POST /auth/1/\(server.credentials.container)/signin?\(server.app) HTTP/1.1\r\nHost: x\r\n"
                + "Content-Type: application/json\r\nContent-Length: 60000\r\n\r\n",
        ].enumerated().map { kind, head in
            SlowClients(
                port: port,
                addresses: (0..<addresses / 2).map { "127.0.1.\($0 * 2 + kind + 10)" }, perAddress: perAddress,
                head: head, interval: .seconds(5))
        }
        for attack in attacks { attack.start() }
        let deadline = ContinuousClock.now + .seconds(seconds)
        let served = await Self.serve(server, query: query) { ContinuousClock.now > deadline }
        var tally = SlowClients.Tally()
        for attack in attacks { tally = tally + (await attack.stop()) }
        let shed = try await Self.shed(server)
        print(
            "hostile clients: \(addresses) addresses × \(perAddress) trickling connections for \(seconds) s: \(tally); "
                + "served \(served.latencies.count) requests, median \(served.median), worst \(served.worst), "
                + "\(served.failures.count) failed; \(shed)")
        #expect(served.failures.isEmpty, "\(served.failures.prefix(5))")
        #expect(served.median < .seconds(1), "median \(served.median)")
        #expect(tally.closedByServer > 0 && shed.contains("slow_body"), "the trickling bodies were closed: \(shed)")
        #expect(server.process.process.isRunning)
    }

    @Test("an open-file limit of 1,024 and 1,100 slow connections: the server caps its connections to fit, answers the excess 503, and keeps serving")
    func openFileLimit() async throws {
        // Bodies per address are not the bound here: the open-file limit is.
        let server = try CampaignServer(["--max-bodies-per-client", "10000"], openFileLimit: 1024)
        defer { server.stopAndRemove() }
        let port = try #require(URL(string: server.url)?.port)
        let query = try await server.session("served")
        let attacker = try await server.session("attacker")
        let log = (try? String(contentsOf: server.log, encoding: .utf8)) ?? ""
        #expect(log.contains("holds at most"), "the start says how many connections fit: \(log)")
        let attack = SlowClients(
            port: port, addresses: ["127.0.2.1", "127.0.2.2", "127.0.2.3"], perAddress: 367,
            head: "POST \(server.database().replacingOccurrences(of: server.url, with: ""))/records/modify?\(attacker) "
                + "HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n",
            interval: .seconds(2))
        attack.start()
        let deadline = ContinuousClock.now + .seconds(20)
        // A client of an attacker's address that sends nothing (so no unread request turns the
        // server's close into a reset) reads the refusal. The attackers' bodies are closed for
        // their pace and come back, so a probe may find room: it gives up on one after 2 s.
        let probe = Task.detached { () -> String in
            var answer = ""
            while ContinuousClock.now < deadline, !answer.hasPrefix("HTTP/1.1 503") {
                let socket = SlowClients.connect(port: port, from: "127.0.2.1")
                if socket >= 0 {
                    var timeout = timeval(tv_sec: 2, tv_usec: 0)
                    setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
                    var buffer = [UInt8](repeating: 0, count: 256)
                    let count = recv(socket, &buffer, buffer.count, 0)
                    answer = count > 0 ? String(decoding: buffer[0..<count], as: UTF8.self) : ""
                    close(socket)
                }
                try? await Task.sleep(for: .milliseconds(100))
            }
            return answer
        }
        let served = await Self.serve(server, query: query) { ContinuousClock.now > deadline }
        let tally = await attack.stop()
        let refusal = await probe.value
        let shed = try await Self.shed(server)
        print(
            "open-file limit 1,024: 1,101 slow connections: \(tally); served \(served.latencies.count) requests, "
                + "median \(served.median), worst \(served.worst), \(served.failures.count) failed; \(shed)")
        #expect(server.process.process.isRunning, "the server is still running")
        #expect(refusal.hasPrefix("HTTP/1.1 503") && refusal.contains("Retry-After"), "the excess is answered 503: \(refusal)")
        #expect(shed.contains("connection_cap") && tally.closedByServer > 0)
        #expect(served.failures.isEmpty, "\(served.failures.prefix(5))")
        // Once the attack is gone the server serves as before.
        let after = await Self.serve(server, query: query) { true }
        #expect(after.failures.isEmpty)
        _ = try await CampaignServer.call("\(server.database())/records/lookup?\(query)", ["records": [["recordName": "x"]]])
    }
}
