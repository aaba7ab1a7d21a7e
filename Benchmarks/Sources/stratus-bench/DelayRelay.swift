import ArgumentParser
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The relay of the shaped-network workload, run as a child process inside its network namespace:
/// every chunk read from one side is written to the other `delay` later (a delay line, so the link
/// keeps its throughput), and a share of connections is reset part-way, as a phone's connection is
/// when it changes cells.
struct DelayRelayCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delay-relay", abstract: "Relay TCP connections with a fixed delay each way (the shaped-network workload's).",
        shouldDisplay: false)

    @Option(help: "The IPv4 address and port to listen on (a.b.c.d:port).")
    var listen: String

    @Option(help: "The IPv4 address and port to relay to.")
    var upstream: String

    @Option(help: "The delay added in each direction, in milliseconds.")
    var delayMilliseconds = 20

    @Option(help: "The percentage of connections reset part-way.")
    var resetPercent = 0.0

    @Option(help: "The seed of the resets' draws.")
    var seed: UInt64 = 1

    func run() throws {
        let relay = try DelayRelay(
            listen: try Self.address(listen), upstream: try Self.address(upstream),
            delay: .milliseconds(delayMilliseconds), resetProbability: resetPercent / 100, seed: seed)
        // The line the bench waits for (as for a server it starts).
        FileHandle.standardOutput.write(Data("relaying on http://\(listen) to \(upstream)\n".utf8))
        relay.serve()
    }

    static func address(_ text: String) throws -> sockaddr_in {
        let parts = text.split(separator: ":")
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        guard parts.count == 2, let port = UInt16(parts[1]), inet_pton(AF_INET, String(parts[0]), &address.sin_addr) == 1 else {
            throw ValidationError("'\(text)' is not an IPv4 address and port (a.b.c.d:port)")
        }
        address.sin_port = port.bigEndian
        return address
    }
}

/// A TCP relay that delays every chunk by a fixed time in each direction. Each connection has four
/// threads of its own (a reader and a writer per direction) over blocking sockets.
final class DelayRelay: @unchecked Sendable {
    private let listener: Int32
    private let upstream: sockaddr_in
    private let delay: Duration
    private let resetProbability: Double
    private let random: Mutex<UInt64>

    init(listen: sockaddr_in, upstream: sockaddr_in, delay: Duration, resetProbability: Double, seed: UInt64) throws {
        self.upstream = upstream
        self.delay = delay
        self.resetProbability = resetProbability
        random = Mutex(seed | 1)
        listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var reuse: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &reuse, socklen_t(MemoryLayout<Int32>.size))
        var address = listen
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, Glibc.listen(listener, 256) == 0 else {
            throw BenchError("the relay cannot listen: errno \(errno)")
        }
    }

    /// Accepts and relays connections until the process ends.
    func serve() -> Never {
        while true {
            let client = accept(listener, nil, nil)
            guard client >= 0 else { continue }
            Thread.detachNewThread { [self] in relay(client) }
        }
    }

    /// A number in 0..<1 from the seeded generator (xorshift).
    private func draw() -> Double {
        random.withLock { state in
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            return Double(state >> 11) / Double(1 << 53)
        }
    }

    private func relay(_ client: Int32) {
        let server = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = upstream
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(server, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            close(client)
            close(server)
            return
        }
        for descriptor in [client, server] {
            var noDelay: Int32 = 1
            setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &noDelay, socklen_t(MemoryLayout<Int32>.size))
        }
        // A reset connection is cut after a random part of its answers, up to 256 KiB.
        let resetAfter = draw() < resetProbability ? Int(draw() * 256 * 1024) : nil
        let done = DispatchGroup()
        let toServer = DelayLine(from: client, to: server, delay: delay, cutAfter: nil)
        let toClient = DelayLine(from: server, to: client, delay: delay, cutAfter: resetAfter)
        for line in [toServer, toClient] {
            done.enter()
            Thread.detachNewThread {
                line.read()
            }
            Thread.detachNewThread {
                line.write()
                done.leave()
            }
        }
        done.wait()
        close(client)
        close(server)
    }
}

/// One direction of a relayed connection: chunks wait `delay` between the reader and the writer.
private final class DelayLine: @unchecked Sendable {
    private let source: Int32
    private let destination: Int32
    private let delay: Duration
    private let cutAfter: Int?
    private let condition = NSCondition()
    private var chunks: [(bytes: [UInt8], due: ContinuousClock.Instant)] = []
    private var ended = false
    private var cut = false

    init(from source: Int32, to destination: Int32, delay: Duration, cutAfter: Int?) {
        self.source = source
        self.destination = destination
        self.delay = delay
        self.cutAfter = cutAfter
    }

    func read() {
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = recv(source, &buffer, buffer.count, 0)
            condition.lock()
            defer { condition.unlock() }
            guard count > 0, !cut else {
                ended = true
                condition.broadcast()
                return
            }
            chunks.append((Array(buffer[..<count]), .now + delay))
            condition.broadcast()
        }
    }

    func write() {
        var written = 0
        while true {
            condition.lock()
            while chunks.isEmpty && !ended { condition.wait() }
            guard !chunks.isEmpty else {
                condition.unlock()
                // The source ended: so does this direction.
                shutdown(destination, Int32(SHUT_WR))
                return
            }
            let chunk = chunks.removeFirst()
            condition.unlock()
            let wait = chunk.due - .now
            if wait > .zero { Thread.sleep(forTimeInterval: Double(wait.components.attoseconds) / 1e18 + Double(wait.components.seconds)) }
            var offset = 0
            while offset < chunk.bytes.count {
                let sent = chunk.bytes[offset...].withUnsafeBytes { send(destination, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                guard sent > 0 else { return end() }
                offset += sent
            }
            written += chunk.bytes.count
            if let cutAfter, written >= cutAfter {
                // A reset: the destination sees RST instead of the rest.
                var linger = linger(l_onoff: 1, l_linger: 0)
                setsockopt(destination, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<linger>.size))
                shutdown(source, Int32(SHUT_RDWR))
                // The other direction's reader stops too, so the connection is closed (and reset) now.
                shutdown(destination, Int32(SHUT_RD))
                return end()
            }
        }
    }

    private func end() {
        condition.lock()
        cut = true
        chunks.removeAll()
        condition.unlock()
        shutdown(source, Int32(SHUT_RD))
    }
}
