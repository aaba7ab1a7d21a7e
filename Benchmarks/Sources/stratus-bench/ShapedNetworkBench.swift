import ArgumentParser
import Foundation
import Stratus
import StratusProcess
import StratusServer
import StratusSQLite
import StratusSync

#if canImport(Glibc)
import Glibc
#endif

/// What a phone on a mobile network sees: the first sync of a zone and the propagation of one edit
/// over a link of 50 Mbit/s and 40 ms round trip (and the same link resetting 1 % of connections),
/// beside the same workloads over loopback, in one run.
///
/// The link is a network namespace joined to this one by a veth pair whose two ends `tc … tbf`
/// limits to the rate; `netem` is not in every kernel, so the delay comes from the bench's own
/// relay (``DelayRelay``), run inside the namespace. The server listens on every address of this
/// namespace; the client reaches it through the relay, so each byte crosses the shaped pair. The
/// bench makes the namespace and removes it, and says why it skips where it cannot (it needs root,
/// `ip` and `tc`).
struct ShapedNetworkCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "shaped",
        abstract: "First sync and propagation over a shaped link (50 Mbit/s, 40 ms round trip, and 1 % of connections reset) beside loopback.")

    @Option(help: "Records in the zone the first sync fetches.")
    var records = 100_000

    @Option(help: "Edits timed from one device to another over each link.")
    var trials = 20

    @Option(help: "The link's rate in Mbit/s, each way.")
    var rateMbit = 50

    @Option(help: "The link's round trip in milliseconds.")
    var roundTripMilliseconds = 40

    @Option(help: "The percentage of connections the lossy variant resets.")
    var resetPercent = 1.0

    /// One link's figures.
    struct Figures {
        var name: String
        var firstSyncSeconds = 0.0
        var failedFetches = 0
        var propagation: [Double] = []
    }

    func run() async throws {
        let link: ShapedLink
        do {
            link = try ShapedLink(rateMbit: rateMbit)
        } catch let unavailable as ShapedLink.Unavailable {
            print("shaped network: skipped: \(unavailable.description)")
            return
        }
        defer { link.remove() }
        let bench = try await BenchServer.start(durability: .full, host: "0.0.0.0")
        do {
            try await measure(on: bench, link: link)
            try await bench.stop()
        } catch {
            try? await bench.stop()
            throw error
        }
    }

    private func progress(_ text: String) {
        FileHandle.standardError.write(Data("[stratus-bench] \(text)\n".utf8))
    }

    private func measure(on bench: BenchServer, link: ShapedLink) async throws {
        progress("shaped network: seeding \(records) records")
        try await SyncBench.seed(bench, zone: "Sync", records: records)
        let port = bench.server.port
        let delay = roundTripMilliseconds / 2
        let plain = try link.relay(upstreamPort: port, delayMilliseconds: delay, resetPercent: 0)
        defer { plain.stop() }
        let lossy = try link.relay(upstreamPort: port, delayMilliseconds: delay, resetPercent: resetPercent)
        defer { lossy.stop() }
        let links = [
            ("loopback", "http://127.0.0.1:\(port)"),
            ("\(rateMbit) Mbit/s, \(roundTripMilliseconds) ms", plain.url),
            ("\(rateMbit) Mbit/s, \(roundTripMilliseconds) ms, \(resetPercent.formatted()) % of connections reset", lossy.url),
        ]
        var results: [Figures] = []
        for (index, (name, url)) in links.enumerated() {
            results.append(try await measure(name, url: url, link: index, on: bench))
        }
        print("""

            Shaped network: a fresh device's first sync of \(records) records (a SyncEngine fetching the zone, gzip on), \
            and an edit from one device to another (a save, then the other device's fetch), over each link in the same run.

            | link | first sync (s) | records/s | fetches failed and retried | edit to other device p50 (ms) | p99 (ms) |
            |---|---|---|---|---|---|
            """)
        for figures in results {
            let rate = Double(records) / figures.firstSyncSeconds
            print(
                "| \(figures.name) | \(String(format: "%.1f", figures.firstSyncSeconds)) | \(Int(rate)) | \(figures.failedFetches) "
                    + "| \(String(format: "%.0f", percentile(figures.propagation, 0.5) * 1000)) "
                    + "| \(String(format: "%.0f", percentile(figures.propagation, 0.99) * 1000)) |")
        }
    }

    /// The first sync and the propagation of `trials` edits through `url`.
    private func measure(_ name: String, url: String, link links: Int, on bench: BenchServer) async throws -> Figures {
        var figures = Figures(name: name)
        progress("shaped network: first sync over \(name)")
        let device = BenchDevice(container: bench.container(device: "fresh-\(links)", url: url))
        let engine = try SyncEngine(
            SyncEngine.Configuration(
                database: device.container.privateCloudDatabase, stateSerialization: nil, delegate: device,
                automaticallySync: false))
        // A reset connection fails the fetch; the engine's state keeps the pages already applied,
        // so fetching again goes on from there, as an app's scheduler would.
        func fetch() async throws {
            while true {
                do {
                    return try await engine.fetchChanges()
                } catch let error as CloudError where error.isTransient || error.code == .serverResponseLost {
                    figures.failedFetches += 1
                    guard figures.failedFetches < 1_000 else { throw error }
                }
            }
        }
        figures.firstSyncSeconds = try await stratus_bench.measure { try await fetch() }
        // The zone also holds the edits of the links measured before this one.
        guard device.fetchedCount >= records else {
            throw BenchError("the device fetched \(device.fetchedCount) records over \(name), expected \(records)")
        }

        progress("shaped network: \(trials) edits over \(name)")
        let sender = bench.container(device: "sender-\(links)", url: url).privateCloudDatabase
        for trial in 0..<trials {
            let before = device.fetchedCount
            let seconds = try await stratus_bench.measure {
                // A save whose answer a reset lost is made again as a new record: either one arriving counts.
                for attempt in 0... {
                    var record = Record(
                        recordType: "Note",
                        recordID: Record.ID(recordName: "edit-\(links)-\(trial)-\(attempt)", zoneID: RecordZone.ID(zoneName: "Sync")))
                    record["title"] = "edit \(trial)"
                    do {
                        _ = try await sender.save(record)
                        break
                    } catch let error as CloudError where error.isTransient || error.code == .serverResponseLost {
                        guard attempt < 100 else { throw error }
                    }
                }
                try await fetch()
            }
            guard device.fetchedCount > before else { throw BenchError("the edit did not reach the other device over \(name)") }
            figures.propagation.append(seconds)
        }
        return figures
    }
}

/// A network namespace joined to this one by a veth pair shaped by `tc … tbf`; relays run inside it.
struct ShapedLink {
    /// Why the link cannot be made here.
    struct Unavailable: Error, CustomStringConvertible {
        let description: String
    }

    /// This namespace's end, where the server listens, and the namespace's end.
    static let hostAddress = "10.231.0.1"
    static let namespaceAddress = "10.231.0.2"

    let namespace: String
    private let ip: URL

    init(rateMbit: Int) throws {
        guard geteuid() == 0 else { throw Unavailable(description: "network namespaces need root") }
        guard let ip = Self.tool("ip"), let tc = Self.tool("tc") else {
            throw Unavailable(description: "the ip and tc commands (Debian's iproute2) are missing")
        }
        self.ip = ip
        let id = getpid() % 100_000
        namespace = "stratus-shaped-\(id)"
        let hostEnd = "stsh\(id)a"
        let namespaceEnd = "stsh\(id)b"
        let shape = ["root", "tbf", "rate", "\(rateMbit)mbit", "burst", "64kb", "latency", "100ms"]
        let steps: [(URL, [String])] = [
            (ip, ["netns", "add", namespace]),
            (ip, ["link", "add", hostEnd, "type", "veth", "peer", "name", namespaceEnd]),
            (ip, ["link", "set", namespaceEnd, "netns", namespace]),
            (ip, ["addr", "add", "\(Self.hostAddress)/30", "dev", hostEnd]),
            (ip, ["link", "set", hostEnd, "up"]),
            (ip, ["netns", "exec", namespace, "ip", "addr", "add", "\(Self.namespaceAddress)/30", "dev", namespaceEnd]),
            (ip, ["netns", "exec", namespace, "ip", "link", "set", namespaceEnd, "up"]),
            (ip, ["netns", "exec", namespace, "ip", "link", "set", "lo", "up"]),
            (tc, ["qdisc", "add", "dev", hostEnd] + shape),
            (ip, ["netns", "exec", namespace, tc.path, "qdisc", "add", "dev", namespaceEnd] + shape),
        ]
        for (tool, arguments) in steps {
            do {
                try Self.run(tool, arguments)
            } catch {
                try? Self.run(ip, ["netns", "del", namespace])
                throw Unavailable(description: "\(error)")
            }
        }
    }

    /// Starts a relay in the namespace to the server's `upstreamPort` on this namespace's end.
    func relay(upstreamPort: Int, delayMilliseconds: Int, resetPercent: Double) throws -> ServerProcess {
        let port = 7100 + Int(resetPercent * 10)
        return try ServerProcess(
            executable: ip,
            arguments: [
                "netns", "exec", namespace, ServerProcess.sibling("stratus-bench").path, "delay-relay",
                "--listen", "\(Self.namespaceAddress):\(port)", "--upstream", "\(Self.hostAddress):\(upstreamPort)",
                "--delay-milliseconds", "\(delayMilliseconds)", "--reset-percent", "\(resetPercent)",
            ])
    }

    /// Removes the namespace, and with it the veth pair and its relays' network.
    func remove() {
        try? Self.run(ip, ["netns", "del", namespace])
    }

    private static func tool(_ name: String) -> URL? {
        ["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map { URL(fileURLWithPath: "\($0)/\(name)") }
            .first { FileManager.default.isExecutableFile(atPath: $0.path) }
    }

    private static func run(_ tool: URL, _ arguments: [String]) throws {
        let process = try SpawnedProcess(executable: tool, arguments: arguments, standardError: .pipe)
        let errors = String(decoding: process.standardError?.readDataToEndOfFile() ?? Data(), as: UTF8.self)
        guard process.waitUntilExit() == .exit(0) else {
            throw BenchError("\(tool.lastPathComponent) \(arguments.joined(separator: " ")) failed: \(errors)")
        }
    }
}
