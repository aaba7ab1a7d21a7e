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

    /// Fewer deliveries when each one reaches many devices.
    private func trials(for devices: Int) -> Int { max(10, trials / max(1, devices / 100)) }
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
        let server = try ServerProcess(
            executable: ServerProcess.sibling("stratus"),
            arguments: ["serve", "--port", "0", "--data", directory.path, "--log-level", "error"])
        do {
            return try await prepare(server, directory: directory, devices: devices, http: http)
        } catch {
            server.stop()
            throw error
        }
    }

    private static func prepare(_ server: ServerProcess, directory: URL, devices: Int, http: HTTPClient) async throws
        -> StratusTarget
    {
        let account = try await BenchAccount.signUp(on: server, dataDirectory: directory, username: "push")
        let container = account.container
        let apiToken = account.apiToken
        let tokens = account.tokens
        let base = server.url
        let database = "\(base)/database/1/\(container)/development/private"
        _ = try await StratusBench.post(
            http, "\(database)/zones/modify\(tokens)",
            Array(#"{"operations":[{"operationType":"create","zone":{"zoneID":{"zoneName":"Bench"}}}]}"#.utf8))
        _ = try await StratusBench.post(
            http, "\(database)/subscriptions/modify\(tokens)",
            Array(#"{"operations":[{"operationType":"create","subscription":{"subscriptionID":"zone","subscriptionType":"zone","zoneID":{"zoneName":"Bench"}}}]}"#.utf8))
        let environment = "\(base)/database/1/\(container)/development"
        var urls = Array(repeating: "", count: devices)
        try await withThrowingTaskGroup(of: (Int, String).self) { group in
            var next = 0
            func register(_ index: Int) {
                group.addTask {
                    let created = try JSONValue.parse(Array(try await StratusBench.post(
                        http, "\(environment)/tokens/create?ckAPIToken=\(apiToken)", Array("{}".utf8)).readableBytesView))
                        .object()
                    let token: String = try created.decode("apnsToken")
                    var request = HTTPClientRequest(url: "\(environment)/tokens/register\(tokens)")
                    request.method = .POST
                    request.headers.add(name: "X-Stratus-Device-ID", value: "listener-\(index)")
                    request.body = .bytes(ByteBuffer(string: #"{"apnsToken":"\#(token)"}"#))
                    _ = try await http.execute(request, timeout: .seconds(60)).body.collect(upTo: 1 << 20)
                    let url: String = try created.decode("webcourierURL")
                    return (index, url + tokens)
                }
            }
            while next < min(32, devices) {
                register(next)
                next += 1
            }
            while let (index, url) = try await group.next() {
                urls[index] = url
                if next < devices {
                    register(next)
                    next += 1
                }
            }
        }
        return StratusTarget(server: server, http: http, database: database, tokens: tokens, urls: urls)
    }

    func send(_ sequence: Int) async throws {
        var request = HTTPClientRequest(url: "\(database)/records/modify\(tokens)")
        request.method = .POST
        request.headers.add(name: "X-Stratus-Device-ID", value: "writer")
        request.body = .bytes(ByteBuffer(bytes: Workload.modifyBody(sequence..<sequence + 1, zone: "Bench", prefix: "p")))
        _ = try await http.execute(request, timeout: .seconds(60)).body.collect(upTo: 1 << 20)
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
    private struct Trial {
        var start: ContinuousClock.Instant
        var expected: Int
        var latencies: [Double] = []
        var done: CheckedContinuation<Void, Never>?
    }

    private let state = Mutex<(connected: Int, tasks: [Task<Void, Never>], trial: Trial?)>((0, [], nil))

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
                        if frame.data.readableBytesView.starts(with: Self.notificationPrefix) { self.arrived() }
                    }
                }
            } catch {}
        }
        state.withLock { $0.tasks.append(task) }
    }

    private static let notificationPrefix = Array(#"{"type":"notification""#.utf8)

    private func arrived() {
        let now = ContinuousClock.now
        let done = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard var trial = state.trial else { return nil }
            let elapsed = now - trial.start
            trial.latencies.append(Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
            let finished = trial.latencies.count == trial.expected ? trial.done : nil
            if finished != nil { trial.done = nil }
            state.trial = trial
            return finished
        }
        done?.resume()
    }

    /// Runs `send` and waits (up to 10 s) until `expecting` devices received a notification;
    /// returns each device's latency in seconds.
    func deliver(expecting: Int, _ send: () async throws -> Void) async throws -> [Double] {
        state.withLock { $0.trial = Trial(start: .now, expected: expecting) }
        try await send()
        let complete = await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                await withCheckedContinuation { continuation in
                    let finished = self.state.withLock { state -> Bool in
                        guard state.trial!.latencies.count < state.trial!.expected else { return true }
                        state.trial!.done = continuation
                        return false
                    }
                    if finished { continuation.resume() }
                }
                return true
            }
            group.addTask {
                try? await Task.sleep(for: .seconds(10))
                return false
            }
            let first = await group.next() ?? false
            if !first {
                let waiting = self.state.withLock { state in
                    defer { state.trial?.done = nil }
                    return state.trial?.done
                }
                waiting?.resume()
            }
            group.cancelAll()
            return first
        }
        let latencies = state.withLock { state in
            defer { state.trial = nil }
            return state.trial?.latencies ?? []
        }
        guard complete, latencies.count == expecting else {
            throw BenchError("\(latencies.count) of \(expecting) devices were notified within 10 s")
        }
        return latencies
    }

    func disconnect() {
        let tasks = state.withLock { state in
            defer { state = (0, [], nil) }
            return state.tasks
        }
        for task in tasks { task.cancel() }
    }
}
