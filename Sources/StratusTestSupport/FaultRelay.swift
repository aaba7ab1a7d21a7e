package import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A loopback TCP relay between clients and a server that misbehaves the way mobile networks and
/// overloaded proxies do: it loses requests, cuts answers off after the server has acted on them,
/// truncates them, delays them, and answers `429` or `503` itself. Faults are drawn per chunk
/// from a seeded generator (the threads draw in the order their chunks come, so runs from one seed
/// are alike rather than identical). Each connection is served by two threads of its own (blocking
/// sockets), never by Swift's cooperative pool; connections end when either side closes.
package final class FaultRelay: Sendable {
    /// How often each fault happens, as a probability per chunk relayed (per request for the
    /// injected answers).
    package struct Faults: Sendable {
        /// A request is lost: the connection closes before it reaches the server.
        package var loseRequest = 0.0
        /// An answer is lost: the server acted, then the connection closes before its answer arrives.
        package var loseAnswer = 0.0
        /// Half of an answer arrives, then the connection closes.
        package var truncateAnswer = 0.0
        /// An answer waits up to `maxDelay` before it goes on.
        package var delay = 0.0
        package var maxDelay: Duration = .milliseconds(100)
        /// The relay answers `429 THROTTLED` with `Retry-After: 1` instead of passing the request on.
        package var throttle = 0.0
        /// The relay answers `503 TRY_AGAIN_LATER` with `Retry-After: 1` instead of passing it on.
        package var unavailable = 0.0

        package init() {}

        /// No faults: a plain relay.
        package static let none = Faults()
    }

    /// How many of each fault the relay caused.
    package struct Counts: Sendable, CustomStringConvertible {
        package var connections = 0
        package var lostRequests = 0
        package var lostAnswers = 0
        package var truncated = 0
        package var delayed = 0
        package var throttled = 0
        package var unavailable = 0

        package var description: String {
            "\(connections) connections, \(lostRequests) requests lost, \(lostAnswers) answers lost, \(truncated) truncated, "
                + "\(delayed) delayed, \(throttled) × 429, \(unavailable) × 503"
        }
    }

    private struct State {
        var faults: Faults
        var random: UInt64
        var counts = Counts()
        var stopped = false
    }

    /// What the two threads of one connection share.
    private final class Connection: Sendable {
        let closed = Atomic(false)
        let finished = Atomic(0)
    }

    /// The port clients connect to.
    package let port: Int
    private let upstreamPort: Int
    private let listener: Int32
    private let state: Mutex<State>

    /// Starts relaying connections on a free loopback port to `upstreamPort`.
    package init(upstreamPort: Int, faults: Faults, seed: UInt64) throws {
        self.upstreamPort = upstreamPort
        state = Mutex(State(faults: faults, random: seed))
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var reuse: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &reuse, socklen_t(MemoryLayout<Int32>.size))
        var address = Self.loopback(port: 0)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(listener, 128) == 0 else {
            close(listener)
            throw RelayError(description: "the relay cannot listen: errno \(errno)")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        self.listener = listener
        port = Int(UInt16(bigEndian: address.sin_port))
        Thread.detachNewThread { [self] in
            while true {
                let client = accept(listener, nil, nil)
                if client < 0, errno == EINTR { continue }
                guard client >= 0 else {
                    // Stopped: the descriptor is closed here, after the last accept, so that no other
                    // socket can take its number while this thread still uses it.
                    close(listener)
                    return
                }
                self.serve(client)
            }
        }
    }

    struct RelayError: Error, CustomStringConvertible {
        let description: String
    }

    /// Changes the faults from now on (already open connections included).
    package func setFaults(_ faults: Faults) {
        state.withLock { $0.faults = faults }
    }

    /// What the relay has done so far.
    package var counts: Counts { state.withLock { $0.counts } }

    /// Stops accepting connections (once; later calls do nothing).
    package func stop() {
        let first = state.withLock { state in
            defer { state.stopped = true }
            return !state.stopped
        }
        if first { shutdown(listener, Int32(SHUT_RDWR)) }
    }

    private static func loopback(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return address
    }

    /// A fault drawn for one chunk: whether `probability` came up.
    private func draw(_ probability: KeyPath<Faults, Double>, count: WritableKeyPath<Counts, Int>) -> Bool {
        state.withLock { state in
            guard Self.roll(&state.random) < state.faults[keyPath: probability] else { return false }
            state.counts[keyPath: count] += 1
            return true
        }
    }

    /// The next number in [0, 1) from the seeded generator (SplitMix64).
    private static func roll(_ random: inout UInt64) -> Double {
        random &+= 0x9E37_79B9_7F4A_7C15
        var z = random
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return Double((z ^ (z >> 31)) >> 11) / Double(1 << 53)
    }

    private func serve(_ client: Int32) {
        let upstream = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = Self.loopback(port: upstreamPort)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(upstream, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            close(client)
            close(upstream)
            return
        }
        state.withLock { $0.counts.connections += 1 }
        let connection = Connection()
        let closeBoth: @Sendable () -> Void = {
            guard connection.closed.compareExchange(expected: false, desired: true, ordering: .relaxed).exchanged else { return }
            shutdown(client, Int32(SHUT_RDWR))
            shutdown(upstream, Int32(SHUT_RDWR))
        }
        let release: @Sendable () -> Void = {
            // The second side to finish closes both descriptors.
            if connection.finished.add(1, ordering: .relaxed).newValue == 2 {
                close(client)
                close(upstream)
            }
        }
        // Requests: lost, answered by the relay, or passed on.
        Thread.detachNewThread { [self] in
            defer { release() }
            var buffer = [UInt8](repeating: 0, count: 64 << 10)
            while true {
                let count = recv(client, &buffer, buffer.count, 0)
                guard count > 0 else { return closeBoth() }
                let chunk = buffer[0..<count]
                if Self.startsRequest(chunk) {
                    if draw(\.loseRequest, count: \.lostRequests) { return closeBoth() }
                    if draw(\.throttle, count: \.throttled) {
                        Self.answer(client, status: "429 Too Many Requests", code: "THROTTLED")
                        return closeBoth()
                    }
                    if draw(\.unavailable, count: \.unavailable) {
                        Self.answer(client, status: "503 Service Unavailable", code: "TRY_AGAIN_LATER")
                        return closeBoth()
                    }
                }
                guard Self.sendAll(upstream, chunk) else { return closeBoth() }
            }
        }
        // Answers: lost, cut in half, delayed, or passed on.
        Thread.detachNewThread { [self] in
            defer { release() }
            var buffer = [UInt8](repeating: 0, count: 64 << 10)
            while true {
                let count = recv(upstream, &buffer, buffer.count, 0)
                guard count > 0 else { return closeBoth() }
                var chunk = buffer[0..<count]
                if draw(\.loseAnswer, count: \.lostAnswers) { return closeBoth() }
                if draw(\.truncateAnswer, count: \.truncated) {
                    chunk = chunk.prefix(max(1, count / 2))
                    _ = Self.sendAll(client, chunk)
                    return closeBoth()
                }
                if draw(\.delay, count: \.delayed) {
                    let (limit, fraction) = state.withLock { ($0.faults.maxDelay.components, Self.roll(&$0.random)) }
                    Thread.sleep(forTimeInterval: (Double(limit.seconds) + Double(limit.attoseconds) / 1e18) * fraction)
                }
                guard Self.sendAll(client, chunk) else { return closeBoth() }
            }
        }
    }

    /// Whether a chunk from the client begins a request (its method and a path).
    private static func startsRequest(_ chunk: ArraySlice<UInt8>) -> Bool {
        for method in ["GET /", "POST /", "PUT /", "PATCH /", "DELETE /"] where chunk.starts(with: method.utf8) {
            return true
        }
        return false
    }

    /// Writes an error answer of the relay's own, in CloudKit's shape, closing the connection.
    private static func answer(_ socket: Int32, status: String, code: String) {
        let body = #"{"serverErrorCode":"\#(code)","reason":"injected by the fault relay","retryAfter":1}"#
        let text = "HTTP/1.1 \(status)\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
            + "Content-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)"
        _ = sendAll(socket, Array(text.utf8)[...])
    }

    private static func sendAll(_ socket: Int32, _ bytes: ArraySlice<UInt8>) -> Bool {
        var sent = 0
        while sent < bytes.count {
            let count = bytes.withUnsafeBytes { send(socket, $0.baseAddress! + sent, $0.count - sent, Int32(MSG_NOSIGNAL)) }
            guard count > 0 else { return false }
            sent += count
        }
        return true
    }
}
