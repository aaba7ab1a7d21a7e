package import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Clients that hold a server's connections as a hostile client would: from each of several loopback
/// addresses (Linux answers all of 127.0.0.0/8), so many connections, each sending a request head
/// that announces a large body and then one byte of it every `interval`. A connection the server
/// closes is opened again at the next round, as an attacker would. Each address is one thread of
/// non-blocking sockets.
package final class SlowClients: Sendable {
    /// What the clients saw.
    package struct Tally: Sendable, CustomStringConvertible {
        /// Connections opened, reopenings included.
        package var opened = 0
        /// Connections that could not be opened (refused, or the client's own limit).
        package var failedToOpen = 0
        /// Answers `503` the server gave.
        package var refused = 0
        /// Other answers the server gave.
        package var answered = 0
        /// Connections the server closed.
        package var closedByServer = 0

        /// Nothing seen yet.
        package init() {}

        /// Adds what `other` clients saw.
        package static func + (lhs: Tally, rhs: Tally) -> Tally {
            Tally(
                opened: lhs.opened + rhs.opened, failedToOpen: lhs.failedToOpen + rhs.failedToOpen,
                refused: lhs.refused + rhs.refused, answered: lhs.answered + rhs.answered,
                closedByServer: lhs.closedByServer + rhs.closedByServer)
        }

        private init(opened: Int, failedToOpen: Int, refused: Int, answered: Int, closedByServer: Int) {
            (self.opened, self.failedToOpen, self.refused, self.answered, self.closedByServer) =
                (opened, failedToOpen, refused, answered, closedByServer)
        }

        package var description: String {
            "\(opened) opened (\(failedToOpen) failed), \(refused) answered 503, \(answered) answered otherwise, "
                + "\(closedByServer) closed by the server"
        }
    }

    private let port: Int
    private let addresses: [String]
    private let perAddress: Int
    private let head: [UInt8]
    private let interval: Duration
    private let stopped = Atomic<Bool>(false)
    private let tally = Mutex(Tally())
    private let finished = Mutex<[Thread]>([])
    private let running = Atomic<Int>(0)

    /// Clients of `perAddress` connections from each of `addresses` to the server at `port` on
    /// loopback, each sending `head` then one byte every `interval`.
    package init(port: Int, addresses: [String], perAddress: Int, head: String, interval: Duration) {
        self.port = port
        self.addresses = addresses
        self.perAddress = perAddress
        self.head = Array(head.utf8)
        self.interval = interval
    }

    /// Starts a thread per address.
    package func start() {
        for address in addresses {
            running.add(1, ordering: .relaxed)
            Thread.detachNewThread { [self] in
                run(from: address)
                running.subtract(1, ordering: .relaxed)
            }
        }
    }

    /// Stops every client, closes their connections, and answers what they saw.
    package func stop() async -> Tally {
        stopped.store(true, ordering: .relaxed)
        while running.load(ordering: .relaxed) > 0 { try? await Task.sleep(for: .milliseconds(20)) }
        return tally.withLock { $0 }
    }

    /// What the clients saw so far.
    package var seen: Tally { tally.withLock { $0 } }

    private func run(from address: String) {
        var sockets = [Int32](repeating: -1, count: perAddress)
        defer { for socket in sockets where socket >= 0 { close(socket) } }
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !stopped.load(ordering: .relaxed) {
            let round = ContinuousClock.now
            for index in sockets.indices where !stopped.load(ordering: .relaxed) {
                if sockets[index] < 0 {
                    let socket = Self.connect(port: port, from: address)
                    guard socket >= 0 else {
                        tally.withLock { $0.failedToOpen += 1 }
                        continue
                    }
                    sockets[index] = socket
                    tally.withLock { $0.opened += 1 }
                    _ = head.withUnsafeBytes { send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
                    continue
                }
                let socket = sockets[index]
                var byte = UInt8(ascii: " ")
                let sent = send(socket, &byte, 1, Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
                var closed = sent < 0 && errno != EAGAIN && errno != EWOULDBLOCK
                while !closed {
                    let count = recv(socket, &buffer, buffer.count, Int32(MSG_DONTWAIT))
                    if count > 0 {
                        let text = String(decoding: buffer[0..<min(count, 16)], as: UTF8.self)
                        if text.hasPrefix("HTTP/1.1 ") {
                            tally.withLock { text.hasPrefix("HTTP/1.1 503") ? ($0.refused += 1) : ($0.answered += 1) }
                        }
                        continue
                    }
                    if count == 0 || (errno != EAGAIN && errno != EWOULDBLOCK) { closed = true }
                    break
                }
                if closed {
                    close(socket)
                    sockets[index] = -1
                    tally.withLock { $0.closedByServer += 1 }
                }
            }
            let rest = interval - (ContinuousClock.now - round)
            if rest > .zero { Thread.sleep(forTimeInterval: Double(rest.components.attoseconds) / 1e18 + Double(rest.components.seconds)) }
        }
    }

    /// A socket connected to loopback `port` from `source`, waiting at most a second; -1 on failure.
    package static func connect(port: Int, from source: String) -> Int32 {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { return -1 }
        var timeout = timeval(tv_sec: 1, tv_usec: 0)
        setsockopt(socket, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var local = sockaddr_in()
        local.sin_family = sa_family_t(AF_INET)
        local.sin_addr.s_addr = inet_addr(source)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, connected == 0 else {
            close(socket)
            return -1
        }
        return socket
    }
}
