import Foundation
import NIOHTTP1
import StratusModel
import StratusServer
import StratusTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Connections that send nothing, send slowly, send what is not HTTP, or linger between requests
/// are closed, so that they cannot hold the server's file descriptors.
@Suite("connections: timeouts and malformed HTTP")
struct ConnectionHygieneTests {
    /// What a raw TCP client saw: the bytes the server sent, and whether it closed the connection
    /// before `limit`.
    struct Exchange {
        var received: [UInt8]
        var closedByServer: Bool
        var text: String { String(decoding: received, as: UTF8.self) }
    }

    /// Connects to the server, sends `bytes`, and reads until the server closes the connection or
    /// `limit` passes; on a thread of its own, since the reads block. Every caller expects an answer
    /// or a close, so the limit only guards against a hang and is long enough for a busy machine.
    static func exchange(
        port: Int, sending bytes: [UInt8], limit: Duration = .seconds(60), from source: String = "127.0.0.1"
    ) async -> Exchange {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                let socket = SlowClients.connect(port: port, from: source)
                defer { close(socket) }
                guard socket >= 0 else {
                    continuation.resume(returning: Exchange(received: [], closedByServer: false))
                    return
                }
                var timeout = timeval(tv_sec: Int(limit.components.seconds), tv_usec: 0)
                setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
                if !bytes.isEmpty { _ = bytes.withUnsafeBytes { send(socket, $0.baseAddress, $0.count, 0) } }
                var received: [UInt8] = []
                var buffer = [UInt8](repeating: 0, count: 4096)
                while true {
                    let count = recv(socket, &buffer, buffer.count, 0)
                    if count > 0 { received += buffer[0..<count]; continue }
                    // 0: the server closed the connection; -1: the time limit passed (or a reset).
                    continuation.resume(returning: Exchange(received: received, closedByServer: count == 0 || errno == ECONNRESET))
                    return
                }
            }
        }
    }

    /// A server with these timeouts (short by default, so the tests wait little for them).
    static func withTimeouts(
        head: Duration = .milliseconds(300), idle: Duration = .milliseconds(500), maxConnections: Int = 10_000,
        perClient: Int = 500, limits: Limits = Limits(), bufferedBytes: Int = 256 << 20,
        pace: RequestBodyPace = RequestBodyPace(), _ body: (TestServer, Int) async throws -> Void
    ) async throws {
        let configuration = ServerConfiguration(
            port: 0, limits: limits, passwordHashCost: 4, requestHeadTimeout: head, idleTimeout: idle,
            maxConnections: maxConnections, maxConnectionsPerClient: perClient, bodyPace: pace,
            maxBufferedRequestBytes: bufferedBytes)
        let server = try await TestServer.start(configuration: configuration)
        do {
            try await body(server, try #require(URL(string: server.baseURL)?.port))
        } catch {
            try await server.stopAndRemove()
            throw error
        }
        try await server.stopAndRemove()
    }

    @Test("a connection that sends nothing, or a head too slowly, is closed after the request-head timeout")
    func silentAndSlow() async throws {
        try await Self.withTimeouts { _, port in
            let silent = await Self.exchange(port: port, sending: [])
            #expect(silent.closedByServer && silent.received.isEmpty)
            let slow = await Self.exchange(port: port, sending: Array("GET /health HTTP/1.1\r\nHost: x\r\n".utf8))
            #expect(slow.closedByServer && slow.received.isEmpty, "\(slow.text)")
        }
    }

    @Test("what is not HTTP gets 400 and the connection is closed at once")
    func malformed() async throws {
        // Timeouts far longer than the client waits: a close it sees comes from the 400, not from them.
        try await Self.withTimeouts(head: .seconds(120), idle: .seconds(120)) { _, port in
            for garbage in [
                "HELLO THERE\r\n\r\n", "GET /health HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
                "POST /health HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
                "\u{1}\u{2}\u{3}\u{4}\r\n\r\n",
            ] {
                let reply = await Self.exchange(port: port, sending: Array(garbage.utf8), limit: .seconds(30))
                #expect(reply.text.hasPrefix("HTTP/1.1 400"), "\(garbage.debugDescription): \(reply.text)")
                #expect(reply.closedByServer, "closed after the 400, not left open")
            }
        }
    }

    @Test("a body whose Content-Length is over the limit is refused with 413 before it is sent")
    func oversizedBodyRefusedFromItsHead() async throws {
        // A pace that never closes the body within the test: on a loaded machine the handler may
        // take longer than the grace period to answer, and the answer is what is tested.
        let pace = RequestBodyPace(timeout: .seconds(600), gracePeriod: .seconds(600))
        try await Self.withTimeouts(head: .seconds(120), idle: .seconds(120), pace: pace) { server, port in
            let user = try await server.signUp("ada").token
            let path = "/database/1/\(server.container)/development/private/records/modify?ckAPIToken=\(server.apiToken)"
                + "&ckWebAuthToken=\(user.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)"
            // The head alone: the client never sends the gigabyte it announces.
            let head = "POST \(path) HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000000000\r\n\r\n"
            let reply = await Self.exchange(port: port, sending: Array(head.utf8), limit: .seconds(30))
            #expect(reply.text.hasPrefix("HTTP/1.1 413"), "\(reply.text)")
            #expect(reply.text.contains("LIMIT_EXCEEDED") && reply.text.contains("1000000000 bytes"))
            #expect(reply.closedByServer, "closed at once, not left waiting for the body")
            // Endpoints other than records/modify need far less: 3 MB of query is refused.
            let query = path.replacingOccurrences(of: "records/modify", with: "records/query")
            let queryHead = "POST \(query) HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 3000000\r\n\r\n"
            let queryReply = await Self.exchange(port: port, sending: Array(queryHead.utf8), limit: .seconds(30))
            #expect(queryReply.text.hasPrefix("HTTP/1.1 413") && queryReply.text.contains("over 2097152"), "\(queryReply.text)")
        }
    }

    @Test("bodies being read share one budget, charged as they arrive: past it a request gets 503 with Retry-After, and is served once room is back")
    func bufferedBodiesShareABudget() async throws {
        let limits = Limits(maxRequestBodyBytes: 1 << 20)
        try await Self.withTimeouts(head: .seconds(120), idle: .seconds(120), limits: limits, bufferedBytes: 3 << 19) {
            server, port in
            let user = try await server.signUp("ada").token
            let path = "/database/1/\(server.container)/development/private/records/modify?ckAPIToken=\(server.apiToken)"
                + "&ckWebAuthToken=\(user.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)"
            func head(_ length: Int) -> String {
                "POST \(path) HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: \(length)\r\n"
                    + "Connection: close\r\n\r\n"
            }
            // One client sends 900,000 bytes of a 1,000,000-byte body, and holds on: the server holds
            // what has arrived.
            let holder = Self.openIdle(port: port)
            let held = Array((head(1_000_000) + String(repeating: " ", count: 900_000)).utf8)
            _ = held.withUnsafeBytes { send(holder, $0.baseAddress, $0.count, 0) }
            // The server has charged them once its metrics say so.
            let admin = server.credentials.adminToken
            var buffered = 0.0
            for _ in 0..<600 where buffered < 900_000 {
                let reply = try await server.request(.GET, "/metrics", headers: ["Authorization": "Bearer \(admin)"])
                buffered = try await MetricsScrape(parsing: reply.text).value("stratus_request_body_buffered_bytes")
                if buffered < 900_000 { try await Task.sleep(for: .milliseconds(50)) }
            }
            try #require(buffered >= 900_000, "the held body was never charged: \(buffered) bytes buffered")
            // Another one's 1,000,000 bytes do not fit beside them (the budget is 1.5 MiB): refused
            // once its bytes pass the budget, while it is still sending.
            let whole = Array((head(1_000_000) + String(repeating: " ", count: 1_000_000)).utf8)
            let refused = await Self.exchange(port: port, sending: whole, limit: .seconds(30))
            #expect(refused.text.hasPrefix("HTTP/1.1 503"), "\(refused.text)")
            #expect(refused.text.contains("TRY_AGAIN_LATER") && refused.text.contains("Retry-After: 1"))
            // A small body still fits.
            let small = "{}"
            let fits = await Self.exchange(port: port, sending: Array((head(small.utf8.count) + small).utf8))
            #expect(fits.text.hasPrefix("HTTP/1.1 400") && fits.text.contains("operations"), "\(fits.text)")
            // Once the holder goes, a large body is read whole again.
            close(holder)
            let large = String(repeating: " ", count: 999_000) + small
            var served = Exchange(received: [], closedByServer: false)
            for _ in 0..<100 {
                served = await Self.exchange(port: port, sending: Array((head(large.utf8.count) + large).utf8))
                if !served.text.hasPrefix("HTTP/1.1 503") { break }
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(served.text.hasPrefix("HTTP/1.1 400") && served.text.contains("operations"), "\(served.text)")
        }
    }

    @Test("a kept-alive connection is answered, then closed after the idle timeout")
    func idleBetweenRequests() async throws {
        // A long head deadline, so that only the idle timeout can close the connection.
        try await Self.withTimeouts(head: .seconds(120), idle: .milliseconds(500)) { _, port in
            let reply = await Self.exchange(port: port, sending: Array("GET /health HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
            #expect(reply.text.hasPrefix("HTTP/1.1 200"), "\(reply.text)")
            #expect(reply.closedByServer, "the idle connection was closed")
        }
    }

    /// Opens a connection and has one request answered on it (so the server has counted it), then
    /// leaves it open, idle; the caller closes it. On a thread of its own, since the calls block.
    static func openAnswered(port: Int) async -> Int32 {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                let socket = openIdle(port: port)
                let request = Array("GET /health HTTP/1.1\r\nHost: x\r\n\r\n".utf8)
                _ = request.withUnsafeBytes { send(socket, $0.baseAddress, $0.count, 0) }
                var buffer = [UInt8](repeating: 0, count: 1024)
                _ = recv(socket, &buffer, buffer.count, 0)
                continuation.resume(returning: socket)
            }
        }
    }

    /// Opens a connection that sends nothing; the caller closes it.
    static func openIdle(port: Int, from source: String = "127.0.0.1") -> Int32 {
        SlowClients.connect(port: port, from: source)
    }

    /// `GET /health` on a new connection, until it is answered 200 (the server counts a closed
    /// connection out when it sees the close, a moment after the client).
    static func healthAfterRelease(port: Int) async throws -> Exchange {
        var reply = Exchange(received: [], closedByServer: false)
        for _ in 0..<100 {
            reply = await exchange(port: port, sending: Array("GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8))
            if reply.text.hasPrefix("HTTP/1.1 200") { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        return reply
    }

    @Test("past the per-client or the total cap, a connection is answered 503 and closed at once; others are served again once some close")
    func connectionCaps() async throws {
        for (total, perClient) in [(100, 2), (2, 100)] {
            try await Self.withTimeouts(head: .seconds(120), idle: .seconds(120), maxConnections: total, perClient: perClient) { _, port in
                // Each held connection is answered once, so it is counted before the next one comes.
                var held: [Int32] = []
                for _ in 0..<2 { held.append(await Self.openAnswered(port: port)) }
                var refused = Exchange(received: [], closedByServer: false)
                // The two held connections are counted once the server has accepted them.
                for _ in 0..<50 {
                    // Sending nothing: the refusal comes on accepting, and no unread request turns the
                    // server's close into a reset that could discard it.
                    refused = await Self.exchange(port: port, sending: [], limit: .seconds(1))
                    if refused.text.hasPrefix("HTTP/1.1 503") { break }
                    try await Task.sleep(for: .milliseconds(20))
                }
                #expect(refused.text.hasPrefix("HTTP/1.1 503") && refused.text.contains("Retry-After: 1"), "\(total)/\(perClient): \(refused.text)")
                #expect(refused.closedByServer)
                for socket in held { close(socket) }
                let served = try await Self.healthAfterRelease(port: port)
                #expect(served.text.hasPrefix("HTTP/1.1 200"), "\(served.text)")
            }
        }
    }

    /// What a client saw that sent `head` and then one byte of its body every `interval`: the
    /// server's answer, and how long after the head the server closed the connection (`nil` when it
    /// did not within `limit`). On a thread of its own, since the calls block.
    static func trickle(
        port: Int, head: String, interval: Duration = .milliseconds(100), limit: Duration = .seconds(30),
        from source: String = "127.0.0.1"
    ) async -> (exchange: Exchange, closedAfter: Duration?) {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                let socket = SlowClients.connect(port: port, from: source)
                defer { close(socket) }
                let start = ContinuousClock.now
                _ = Array(head.utf8).withUnsafeBytes { send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                var received: [UInt8] = []
                var buffer = [UInt8](repeating: 0, count: 4096)
                while ContinuousClock.now - start < limit {
                    var byte = UInt8(ascii: " ")
                    let sent = send(socket, &byte, 1, Int32(MSG_NOSIGNAL))
                    while true {
                        let count = recv(socket, &buffer, buffer.count, Int32(MSG_DONTWAIT))
                        if count > 0 { received += buffer[0..<count]; continue }
                        if count == 0 || (count < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
                            continuation.resume(
                                returning: (Exchange(received: received, closedByServer: true), ContinuousClock.now - start))
                            return
                        }
                        break
                    }
                    if sent < 0 {
                        continuation.resume(
                            returning: (Exchange(received: received, closedByServer: true), ContinuousClock.now - start))
                        return
                    }
                    Thread.sleep(forTimeInterval: Double(interval.components.seconds) + Double(interval.components.attoseconds) / 1e18)
                }
                continuation.resume(returning: (Exchange(received: received, closedByServer: false), nil))
            }
        }
    }

    /// The head of a sign-in whose body of `length` bytes the client then sends (the endpoint reads
    /// its body before anything else).
    static func signInHead(_ server: TestServer, length: Int) -> String {
        "POST /auth/1/\(server.container)/signin?ckAPIToken=\(server.apiToken) HTTP/1.1\r\nHost: x\r\n"
            + "Content-Type: application/json\r\nContent-Length: \(length)\r\nConnection: close\r\n\r\n"
    }

    @Test("a body that trickles in more slowly than the minimum pace is closed after the grace period")
    func tricklingBodyIsClosed() async throws {
        let pace = RequestBodyPace(gracePeriod: .milliseconds(500), minimumBytesPerSecond: 1024)
        try await Self.withTimeouts(head: .seconds(120), idle: .seconds(120), pace: pace) { server, port in
            // One byte every 100 ms: the idle timeout alone would never fire.
            let slow = await Self.trickle(port: port, head: Self.signInHead(server, length: 60_000))
            let closedAfter = try #require(slow.closedAfter, "the trickling body was never closed")
            #expect(closedAfter < .seconds(15), "closed only after \(closedAfter)")
            // A body that comes at once is served as before.
            let body = #"{"username":"nobody","password":"not the password"}"#
            let whole = await Self.exchange(
                port: port, sending: Array((Self.signInHead(server, length: body.utf8.count) + body).utf8))
            #expect(whole.text.hasPrefix("HTTP/1.1 401"), "\(whole.text)")
            let metrics = try await server.request(
                .GET, "/metrics", headers: ["Authorization": "Bearer \(server.credentials.adminToken)"])
            #expect(metrics.text.contains(#"stratus_connections_shed_total{reason="slow_body"} 1"#), "\(metrics.text)")
        }
    }

    @Test("a request answered before its body arrived is closed soon after the answer, not drained for as long as the client likes")
    func answeredEarlyIsClosed() async throws {
        // A pace that never closes the body within the test: only the early answer can.
        let pace = RequestBodyPace(timeout: .seconds(600), gracePeriod: .seconds(600))
        try await Self.withTimeouts(head: .seconds(120), idle: .seconds(120), pace: pace) { _, port in
            // POST /health is answered 405 at once; the client goes on sending its megabyte slowly.
            let early = await Self.trickle(
                port: port, head: "POST /health HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n")
            #expect(early.exchange.text.hasPrefix("HTTP/1.1 405"), "\(early.exchange.text)")
            let closedAfter = try #require(early.closedAfter, "the connection was drained instead of closed")
            #expect(closedAfter < .seconds(20), "closed only after \(closedAfter)")
        }
    }

    @Test("one client address may have only so many bodies arriving at once; others are not held to its share")
    func bodiesPerClientAddress() async throws {
        let pace = RequestBodyPace(timeout: .seconds(600), gracePeriod: .seconds(600), maxBodiesPerClient: 2)
        try await Self.withTimeouts(head: .seconds(120), idle: .seconds(120), pace: pace) { server, port in
            let head = Array(Self.signInHead(server, length: 60_000).utf8)
            var held: [Int32] = []
            for _ in 0..<2 {
                let socket = Self.openIdle(port: port, from: "127.0.0.2")
                _ = head.withUnsafeBytes { send(socket, $0.baseAddress, $0.count, 0) }
                held.append(socket)
            }
            defer { for socket in held { close(socket) } }
            // Once both heads are read, a third is refused, without a byte of its body read.
            var arriving = 0.0
            for _ in 0..<600 where arriving < 2 {
                let reply = try await server.request(
                    .GET, "/metrics", headers: ["Authorization": "Bearer \(server.credentials.adminToken)"])
                arriving = try await MetricsScrape(parsing: reply.text).value("stratus_request_bodies_arriving")
                if arriving < 2 { try await Task.sleep(for: .milliseconds(20)) }
            }
            try #require(arriving == 2, "the held bodies never began: \(arriving)")
            let refused = await Self.exchange(port: port, sending: head, from: "127.0.0.2")
            #expect(refused.text.hasPrefix("HTTP/1.1 503") && refused.text.contains("TRY_AGAIN_LATER"), "\(refused.text)")
            #expect(refused.text.contains("Retry-After: 1") && refused.closedByServer)
            // Another address sends its body as usual.
            let body = #"{"username":"nobody","password":"not the password"}"#
            let other = await Self.exchange(
                port: port, sending: Array((Self.signInHead(server, length: body.utf8.count) + body).utf8),
                from: "127.0.0.3")
            #expect(other.text.hasPrefix("HTTP/1.1 401"), "\(other.text)")
        }
    }

    @Test("when every connection is taken, the address holding the most gives one up to a newcomer")
    func fullServerMakesRoom() async throws {
        try await Self.withTimeouts(head: .seconds(120), idle: .seconds(120), maxConnections: 6, perClient: 6) { server, port in
            // One address holds every connection the server may hold.
            var held: [Int32] = []
            for _ in 0..<6 {
                let socket = Self.openIdle(port: port, from: "127.0.0.2")
                let request = Array("GET /health HTTP/1.1\r\nHost: x\r\n\r\n".utf8)
                _ = request.withUnsafeBytes { send(socket, $0.baseAddress, $0.count, 0) }
                var buffer = [UInt8](repeating: 0, count: 1024)
                _ = recv(socket, &buffer, buffer.count, 0)
                held.append(socket)
            }
            defer { for socket in held { close(socket) } }
            // That address cannot open a seventh…
            let same = await Self.exchange(port: port, sending: [], limit: .seconds(5), from: "127.0.0.2")
            #expect(same.text.hasPrefix("HTTP/1.1 503"), "\(same.text)")
            // …but another address is served: the holder's oldest connection made room.
            let other = await Self.exchange(
                port: port, sending: Array("GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8),
                from: "127.0.0.3")
            #expect(other.text.hasPrefix("HTTP/1.1 200"), "\(other.text)")
            var buffer = [UInt8](repeating: 0, count: 16)
            #expect(recv(held[0], &buffer, buffer.count, 0) == 0, "the oldest held connection was closed")
            _ = server
        }
    }
}
