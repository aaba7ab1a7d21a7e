import AsyncHTTPClient
import Foundation
import StratusProcess
import Logging
import NIOCore
import NIOHTTP1
import StratusModel
import Synchronization
import WSClient

/// Push delivery, end to end: a save through HTTP on one device until the notification arrives on
/// every listening device, with the Stratus server and the raw WebSocket floor each running as a
/// child process, measured the same way in the same run.
struct PushBench {
    /// Latencies with some number of devices listening.
    struct Round: Encodable {
        var devices = 0
        var stratusP50 = 0.0
        var stratusP99 = 0.0
        var stratusLastMedian = 0.0
        var floorP50 = 0.0
        var floorP99 = 0.0
        var floorLastMedian = 0.0
        var stratusBytesPerConnection = 0.0
        var floorBytesPerConnection = 0.0
    }

    let deviceCounts: [Int]
    let trials: Int
    let http: HTTPClient
    let progress: @Sendable (String) -> Void

    func run() async throws -> [Round] {
        var rounds = deviceCounts.map { Round(devices: $0) }
        let maxDevices = deviceCounts.max() ?? 0
        progress("push: starting stratus serve and preparing \(maxDevices) device tokens")
        let stratus = try await StratusTarget.start(devices: maxDevices, http: http)
        do {
            try await measure(stratus, into: &rounds, stratus: true)
        } catch {
            stratus.stop()
            throw error
        }
        stratus.stop()
        progress("push: starting the raw WebSocket floor")
        let floor = try FloorTarget.start(http: http)
        do {
            try await measure(floor, into: &rounds, stratus: false)
        } catch {
            floor.stop()
            throw error
        }
        floor.stop()
        return rounds
    }

    /// Connects devices up to each count in turn and times `trials` deliveries at each.
    private func measure(_ target: any PushTarget, into rounds: inout [Round], stratus: Bool) async throws {
        let swarm = DeviceSwarm()
        let idleBytes = target.residentBytes
        var sent = 0
        for index in rounds.indices {
            let count = rounds[index].devices
            progress("push: \(stratus ? "Stratus" : "floor"): \(count) devices connected, \(trials(for: count)) deliveries")
            try await swarm.connect(upTo: count, target.deviceURLs)
            try await Task.sleep(for: .seconds(1))
            let perConnection = Double(target.residentBytes - idleBytes) / Double(count)
            var latencies: [Double] = []
            var lasts: [Double] = []
            for trial in 0..<(trials(for: count) + 3) {
                sent += 1
                let arrivals = try await swarm.deliver(expecting: count) { [sent] in try await target.send(sent) }
                guard trial >= 3 else { continue }
                latencies += arrivals
                lasts.append(arrivals.max() ?? 0)
            }
            if stratus {
                rounds[index].stratusP50 = percentile(latencies, 0.5) * 1000
                rounds[index].stratusP99 = percentile(latencies, 0.99) * 1000
                rounds[index].stratusLastMedian = percentile(lasts, 0.5) * 1000
                rounds[index].stratusBytesPerConnection = perConnection
            } else {
                rounds[index].floorP50 = percentile(latencies, 0.5) * 1000
                rounds[index].floorP99 = percentile(latencies, 0.99) * 1000
                rounds[index].floorLastMedian = percentile(lasts, 0.5) * 1000
                rounds[index].floorBytesPerConnection = perConnection
            }
        }
        swarm.disconnect()
    }

    /// Fewer deliveries when each one reaches many devices, but at least 50, so that a p99 rests on
    /// enough of them.
    private func trials(for devices: Int) -> Int { max(50, trials / max(1, devices / 100)) }
}

/// A server devices listen to.
protocol PushTarget: Sendable {
    /// The push URL of the `index`th device.
    var deviceURLs: @Sendable (Int) -> String { get }
    /// Makes the server push one message to every device; `sequence` (new for every call) names
    /// what changes.
    func send(_ sequence: Int) async throws
    /// The server process's resident memory.
    var residentBytes: Int { get }
}

/// Stratus: one user, one zone subscription, and a registered push token per device. A save of one
/// record through HTTP (as another device) is what each delivery times.
struct StratusTarget: PushTarget {
    let server: ServerProcess
    let http: HTTPClient
    let database: String
    let tokens: String
    let urls: [String]

    var deviceURLs: @Sendable (Int) -> String { { [urls] in urls[$0] } }
    var residentBytes: Int { server.residentBytes }

    static func start(devices: Int, http: HTTPClient) async throws -> StratusTarget {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("stratus-push-\(UUID().uuidString)")
        let server = try ServerProcess(executable: ServerProcess.sibling("stratus"), arguments: serveArguments(directory))
        do {
            let account = try await BenchAccount.signUp(on: server, dataDirectory: directory, username: "push")
            let database = try await subscribeToZone(account, on: server, http: http)
            let urls = try await registerWebSocketDevices(devices, account, on: server, http: http)
            return StratusTarget(server: server, http: http, database: database, tokens: account.tokens, urls: urls)
        } catch {
            server.stop()
            throw error
        }
    }

    /// `stratus serve` for the push workloads: on loopback over `directory`, errors logged only,
    /// and every device of the workload allowed to connect from this one address.
    static func serveArguments(_ directory: URL) -> [String] {
        ["serve", "--port", "0", "--data", directory.path, "--log-level", "error", "--max-connections-per-client", "100000"]
    }

    /// Creates the zone `Bench` in `account`'s private database with a zone subscription on it;
    /// returns the database's URL.
    static func subscribeToZone(_ account: BenchAccount, on server: ServerProcess, http: HTTPClient) async throws -> String {
        let database = "\(server.url)/database/1/\(account.container)/development/private"
        _ = try await StratusBench.post(
            http, "\(database)/zones/modify\(account.tokens)",
            Array(#"{"operations":[{"operationType":"create","zone":{"zoneID":{"zoneName":"Bench"}}}]}"#.utf8))
        _ = try await StratusBench.post(
            http, "\(database)/subscriptions/modify\(account.tokens)",
            Array(#"{"operations":[{"operationType":"create","subscription":{"subscriptionID":"zone","subscriptionType":"zone","zoneID":{"zoneName":"Bench"}}}]}"#.utf8))
        return database
    }

    /// Registers `count` push tokens of `account` as many devices would (`tokens/create`, then
    /// `tokens/register`), 32 at a time; returns each device's WebSocket URL.
    static func registerWebSocketDevices(
        _ count: Int, _ account: BenchAccount, on server: ServerProcess, http: HTTPClient
    ) async throws -> [String] {
        let environment = "\(server.url)/database/1/\(account.container)/development"
        return try await concurrently(0..<count) { index in
            let created = try JSONValue.parse(Array(try await StratusBench.post(
                http, "\(environment)/tokens/create?ckAPIToken=\(account.apiToken)", Array("{}".utf8)).readableBytesView))
                .object()
            let token: String = try created.decode("apnsToken")
            try await register(#"{"apnsToken":"\#(token)"}"#, device: "listener-\(index)", account, on: server, http: http)
            let url: String = try created.decode("webcourierURL")
            return url + account.tokens
        }
    }

    /// `tokens/register` with `body`, as the device `device` of `account`.
    static func register(
        _ body: String, device: String, _ account: BenchAccount, on server: ServerProcess, http: HTTPClient
    ) async throws {
        var request = HTTPClientRequest(
            url: "\(server.url)/database/1/\(account.container)/development/tokens/register\(account.tokens)")
        request.method = .POST
        request.headers.add(name: "X-Stratus-Device-ID", value: device)
        request.body = .bytes(ByteBuffer(string: body))
        let response = try await http.execute(request, timeout: .seconds(60))
        let answer = try await response.body.collect(upTo: 1 << 20)
        guard response.status == .ok else { throw BenchError("tokens/register: HTTP \(response.status.code): \(String(buffer: answer))") }
    }

    /// Runs `body` for each index, 32 at a time; returns the results in order.
    static func concurrently<Result: Sendable>(
        _ indices: Range<Int>, _ body: @escaping @Sendable (Int) async throws -> Result
    ) async throws -> [Result] {
        var results: [Int: Result] = [:]
        try await withThrowingTaskGroup(of: (Int, Result).self) { group in
            var next = indices.lowerBound
            while next < min(indices.lowerBound + 32, indices.upperBound) {
                group.addTask { [next] in (next, try await body(next)) }
                next += 1
            }
            while let (index, result) = try await group.next() {
                results[index] = result
                if next < indices.upperBound {
                    group.addTask { [next] in (next, try await body(next)) }
                    next += 1
                }
            }
        }
        return indices.map { results[$0]! }
    }

    /// Saves one record in the zone `Bench` of `database`, as the device `writer`.
    static func save(_ sequence: Int, in database: String, tokens: String, http: HTTPClient) async throws {
        var request = HTTPClientRequest(url: "\(database)/records/modify\(tokens)")
        request.method = .POST
        request.headers.add(name: "X-Stratus-Device-ID", value: "writer")
        request.body = .bytes(ByteBuffer(bytes: Workload.modifyBody(sequence..<sequence + 1, zone: "Bench", prefix: "p")))
        let response = try await http.execute(request, timeout: .seconds(60))
        let answer = try await response.body.collect(upTo: 1 << 20)
        guard response.status == .ok else { throw BenchError("records/modify: HTTP \(response.status.code): \(String(buffer: answer))") }
    }

    func send(_ sequence: Int) async throws {
        try await Self.save(sequence, in: database, tokens: tokens, http: http)
    }

    func stop() { server.stop() }
}

/// The floor: `POST /broadcast` puts one frame on every socket of `/ws`.
struct FloorTarget: PushTarget {
    let server: ServerProcess
    let http: HTTPClient

    var deviceURLs: @Sendable (Int) -> String { { [url = server.url] _ in url + "/ws" } }
    var residentBytes: Int { server.residentBytes }

    static func start(http: HTTPClient) throws -> FloorTarget {
        FloorTarget(
            server: try ServerProcess(executable: ServerProcess.sibling("stratus-bench"), arguments: ["websocket-floor"]),
            http: http)
    }

    func send(_ sequence: Int) async throws {
        _ = try await StratusBench.post(http, server.url + "/broadcast", [])
    }

    func stop() { server.stop() }
}

/// Many WebSocket devices in this process, and when each last received a notification.
final class DeviceSwarm: Sendable {
    private let state = Mutex<(connected: Int, tasks: [Task<Void, Never>])>((0, []))
    private let arrivals = Arrivals(what: "devices were notified")

    /// Connects devices until `count` are connected, in waves of 100.
    func connect(upTo count: Int, _ urls: @escaping @Sendable (Int) -> String) async throws {
        var started = state.withLock { $0.tasks.count }
        while started < count {
            let wave = min(count, started + 100)
            for index in started..<wave { start(urls(index)) }
            started = wave
            let deadline = ContinuousClock.now + .seconds(30)
            while state.withLock({ $0.connected }) < wave {
                guard ContinuousClock.now < deadline else {
                    throw BenchError("only \(state.withLock { $0.connected }) of \(wave) devices connected")
                }
                try await Task.sleep(for: .milliseconds(5))
            }
        }
    }

    private func start(_ url: String) {
        let task = Task { [self] in
            do {
                try await WebSocketClient.connect(
                    url: url, configuration: .init(maxFrameSize: 1 << 16), logger: Logger(label: "bench", factory: { _ in SwiftLogNoOpLogHandler() })
                ) { inbound, _, _ in
                    self.state.withLock { $0.connected += 1 }
                    for try await frame in inbound {
                        // Stratus opens with a `connected` message; only notifications count.
                        if frame.data.readableBytesView.starts(with: Self.notificationPrefix) { self.arrivals.arrived() }
                    }
                }
            } catch {}
        }
        state.withLock { $0.tasks.append(task) }
    }

    private static let notificationPrefix = Array(#"{"type":"notification""#.utf8)

    /// Runs `send` and waits (up to 10 s) until `expecting` devices received a notification;
    /// returns each device's latency in seconds.
    func deliver(expecting: Int, _ send: () async throws -> Void) async throws -> [Double] {
        try await arrivals.deliver(expecting: expecting, send)
    }

    func disconnect() {
        let tasks = state.withLock { state in
            defer { state = (0, []) }
            return state.tasks
        }
        for task in tasks { task.cancel() }
    }
}

/// When each of a trial's expected messages arrived, counted from the trial's start: the devices
/// of the push workloads, wherever they listen, count their arrivals here.
final class Arrivals: Sendable {
    private struct Trial {
        var start: ContinuousClock.Instant
        var expected: Int
        var latencies: [Double] = []
        var done: CheckedContinuation<Void, Never>?
    }

    private let trial = Mutex<Trial?>(nil)
    /// What arrived, for the error when too little did ("devices were notified").
    private let what: String

    init(what: String) { self.what = what }

    /// Counts one arrival in the trial under way; outside a trial it counts nothing.
    func arrived() {
        let now = ContinuousClock.now
        let done = trial.withLock { trial -> CheckedContinuation<Void, Never>? in
            guard trial != nil else { return nil }
            let elapsed = now - trial!.start
            trial!.latencies.append(Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
            guard trial!.latencies.count == trial!.expected, let done = trial!.done else { return nil }
            trial!.done = nil
            return done
        }
        done?.resume()
    }

    /// Runs `send` and waits (up to `timeout`) until `expecting` messages arrived; returns each
    /// one's latency in seconds.
    func deliver(expecting: Int, timeout: Duration = .seconds(10), _ send: () async throws -> Void) async throws -> [Double] {
        trial.withLock { $0 = Trial(start: .now, expected: expecting) }
        try await send()
        let complete = await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                await withCheckedContinuation { continuation in
                    let finished = self.trial.withLock { trial -> Bool in
                        guard trial!.latencies.count < trial!.expected else { return true }
                        trial!.done = continuation
                        return false
                    }
                    if finished { continuation.resume() }
                }
                return true
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return false
            }
            let first = await group.next() ?? false
            if !first {
                let waiting = self.trial.withLock { trial in
                    defer { trial?.done = nil }
                    return trial?.done
                }
                waiting?.resume()
            }
            group.cancelAll()
            return first
        }
        let latencies = trial.withLock { trial in
            defer { trial = nil }
            return trial?.latencies ?? []
        }
        guard complete, latencies.count == expecting else {
            throw BenchError("\(latencies.count) of \(expecting) \(what) within \(timeout)")
        }
        return latencies
    }
}
