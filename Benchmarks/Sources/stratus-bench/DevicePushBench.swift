import ArgumentParser
import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOPosix
import NIOSSL
import StratusModel
import StratusProcess
import Synchronization

/// Device push, end to end: a save on one device until the push for each of the user's other
/// devices reaches an APNs stand-in (HTTP/2 over TLS on loopback), beside the same trip through
/// Stratus's own WebSocket channel in the same run, rounds interleaved; then how many pushes a
/// second reach the stand-in when one save wakes 10,000 devices, beside `h2load` (nghttp2's C
/// load generator) sending the same requests to the same stand-in over as many connections and
/// streams; and the server's memory per registered device.
struct DevicePushCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "device-push",
        abstract: "Measures pushes to an APNs stand-in beside the WebSocket channel and beside h2load, in one run.")

    @Option(help: "Devices woken by each save of the latency rounds, on each channel.")
    var devices = 1_000

    @Option(help: "Saves timed on each channel, alternating (after 3 warm-up saves each).")
    var trials = 100

    @Option(help: "Devices one save wakes in the throughput rounds.")
    var throughputDevices = 10_000

    @Option(help: "Throughput rounds, each a save through Stratus and a run of h2load, alternating which goes first.")
    var throughputTrials = 5

    @Option(help: "The h2load executable (Debian: apt-get install nghttp2-client).")
    var h2load = "/usr/bin/h2load"

    @Option(help: "Write the Markdown table to this file.")
    var markdown: String?

    func run() async throws {
        guard FileManager.default.isExecutableFile(atPath: h2load) else {
            throw BenchError("\(h2load) is not an executable; install nghttp2-client or pass --h2load")
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("stratus-device-push-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let files = try TestCertificates(in: directory)
        let receiver = APNsReceiver()
        let listener = try await receiver.listen(certificate: files.certificate, key: files.certificateKey)
        let port = listener.localAddress?.port ?? 0
        let data = directory.appendingPathComponent("data")
        let server = try ServerProcess(
            executable: ServerProcess.sibling("stratus"),
            arguments: StratusTarget.serveArguments(data) + [
                "--apns-endpoint", "https://127.0.0.1:\(port)", "--push-ca-file", files.certificate,
                "--push-endpoints-per-user", "\(max(devices, throughputDevices))",
            ])
        defer { server.stop() }
        let http = StratusBench.uncompressedHTTP
        let result = try await measure(server, data: data, receiver: receiver, apnsKey: files.apnsKey, http: http)
        try await listener.close()
        let table = result.markdown
        print(table)
        if let markdown { try table.write(toFile: markdown, atomically: true, encoding: .utf8) }
    }

    /// What one run measured.
    struct Result {
        var devices = 0
        var apnsLatencies: [Double] = []
        var webSocketLatencies: [Double] = []
        var apnsLastMedian = 0.0
        var webSocketLastMedian = 0.0
        var throughputDevices = 0
        var stratusRates: [Double] = []
        var floorRates: [Double] = []
        var connections = 0
        var streams = 0
        var bytesPerRegisteredDevice = 0.0
        var bytesPerDeviceAfterPushes = 0.0

        var markdown: String {
            func ms(_ values: [Double], _ q: Double) -> String { String(format: "%.2f", percentile(values, q) * 1000) }
            func median(_ values: [Double]) -> String { String(format: "%.0f", percentile(values, 0.5)) }
            return """
                | save → push arrives, \(devices) devices | p50 (ms) | p99 (ms) | last device, median (ms) |
                |---|---|---|---|
                | APNs (HTTP/2 stand-in) | \(ms(apnsLatencies, 0.5)) | \(ms(apnsLatencies, 0.99)) | \(String(format: "%.2f", apnsLastMedian * 1000)) |
                | Stratus WebSocket | \(ms(webSocketLatencies, 0.5)) | \(ms(webSocketLatencies, 0.99)) | \(String(format: "%.2f", webSocketLastMedian * 1000)) |

                | one save wakes \(throughputDevices) devices | pushes per second, median | rounds |
                |---|---|---|
                | Stratus (save → last push at the stand-in) | \(median(stratusRates)) | \(stratusRates.map { String(format: "%.0f", $0) }.joined(separator: ", ")) |
                | h2load, the same requests over \(connections) connection(s) × \(streams) streams | \(median(floorRates)) | \(floorRates.map { String(format: "%.0f", $0) }.joined(separator: ", ")) |

                Server memory per registered device: \(String(format: "%.0f", bytesPerRegisteredDevice)) bytes registered, \
                \(String(format: "%.0f", bytesPerDeviceAfterPushes)) bytes after \(stratusRates.count) saves woke them all.

                """
        }
    }

    private func measure(
        _ server: ServerProcess, data: URL, receiver: APNsReceiver, apnsKey: String, http: HTTPClient
    ) async throws -> Result {
        var result = Result(devices: devices, throughputDevices: throughputDevices)
        let listening = try await BenchAccount.signUp(on: server, dataDirectory: data, username: "listening")
        let sleeping = try await BenchAccount.signUp(on: server, dataDirectory: data, username: "sleeping")
        let fleet = try await BenchAccount.signUp(on: server, dataDirectory: data, username: "fleet")
        try await configureAPNs(server, data: data, container: listening.container, key: apnsKey, http: http)
        let webSocketDatabase = try await StratusTarget.subscribeToZone(listening, on: server, http: http)
        let apnsDatabase = try await StratusTarget.subscribeToZone(sleeping, on: server, http: http)
        let fleetDatabase = try await StratusTarget.subscribeToZone(fleet, on: server, http: http)

        progress("device-push: \(devices) WebSocket devices and \(devices) APNs devices")
        let swarm = DeviceSwarm()
        defer { swarm.disconnect() }
        let urls = try await StratusTarget.registerWebSocketDevices(devices, listening, on: server, http: http)
        try await swarm.connect(upTo: devices, { urls[$0] })
        try await registerAPNsDevices(0..<devices, of: sleeping, on: server, http: http)

        progress("device-push: \(trials) saves on each channel, alternating")
        var sequence = 0
        var apnsLasts: [Double] = []
        var webSocketLasts: [Double] = []
        for trial in 0..<(trials + 3) {
            for apnsFirst in [trial.isMultiple(of: 2), !trial.isMultiple(of: 2)] {
                sequence += 1
                let latencies =
                    if apnsFirst {
                        try await receiver.arrivals.deliver(expecting: devices) { [sequence] in
                            try await StratusTarget.save(sequence, in: apnsDatabase, tokens: sleeping.tokens, http: http)
                        }
                    } else {
                        try await swarm.deliver(expecting: devices) { [sequence] in
                            try await StratusTarget.save(sequence, in: webSocketDatabase, tokens: listening.tokens, http: http)
                        }
                    }
                guard trial >= 3 else { continue }
                if apnsFirst {
                    result.apnsLatencies += latencies
                    apnsLasts.append(latencies.max() ?? 0)
                } else {
                    result.webSocketLatencies += latencies
                    webSocketLasts.append(latencies.max() ?? 0)
                }
            }
        }
        result.apnsLastMedian = percentile(apnsLasts, 0.5)
        result.webSocketLastMedian = percentile(webSocketLasts, 0.5)

        progress("device-push: registering \(throughputDevices) devices of one user")
        try await Task.sleep(for: .seconds(1))
        let before = server.residentBytes
        try await registerAPNsDevices(0..<throughputDevices, of: fleet, on: server, http: http)
        try await Task.sleep(for: .seconds(1))
        result.bytesPerRegisteredDevice = Double(server.residentBytes - before) / Double(throughputDevices)

        let replay = try receiver.replay(h2load: h2load, requests: throughputDevices, in: data)
        result.connections = replay.connections
        result.streams = replay.streams
        for trial in 0..<throughputTrials {
            for stratusFirst in [trial.isMultiple(of: 2), !trial.isMultiple(of: 2)] {
                if stratusFirst {
                    sequence += 1
                    progress("device-push: a save waking \(throughputDevices) devices")
                    let latencies = try await receiver.arrivals.deliver(expecting: throughputDevices, timeout: .seconds(300)) {
                        [sequence] in
                        try await StratusTarget.save(sequence, in: fleetDatabase, tokens: fleet.tokens, http: http)
                    }
                    result.stratusRates.append(Double(throughputDevices) / (latencies.max() ?? 1))
                } else {
                    progress("device-push: h2load, \(throughputDevices) requests")
                    result.floorRates.append(try replay.run())
                }
            }
        }
        result.bytesPerDeviceAfterPushes = Double(server.residentBytes - before) / Double(throughputDevices)
        return result
    }

    /// Registers a made-up APNs device token (development) for each index, as `account`'s devices.
    private func registerAPNsDevices(
        _ indices: Range<Int>, of account: BenchAccount, on server: ServerProcess, http: HTTPClient
    ) async throws {
        _ = try await StratusTarget.concurrently(indices) { index in
            let token = String(repeating: "0", count: 48) + String(format: "%016x", index)
            try await StratusTarget.register(
                #"{"apnsToken":"\#(token)","apnsEnvironment":"development"}"#, device: "\(account.userRecordName)-\(index)",
                account, on: server, http: http)
        }
    }

    /// Gives the container an APNs key for the development environment through the admin API.
    private func configureAPNs(_ server: ServerProcess, data: URL, container: String, key: String, http: HTTPClient) async throws {
        let credentials = try JSONValue.parse(
            Array(try Data(contentsOf: data.appendingPathComponent("credentials.json")))).object()
        let adminToken: String = try credentials.decode("adminToken")
        let body = try JSONSerialization.data(withJSONObject: [
            "teamID": "BENCHTEAM1", "keyID": "BENCHKEY01", "topic": "com.example.bench",
            "privateKey": try String(contentsOfFile: key, encoding: .utf8),
        ])
        var request = HTTPClientRequest(url: "\(server.url)/admin/1/containers/\(container)/push/apns/development")
        request.method = .PUT
        request.headers.add(name: "Authorization", value: "Bearer \(adminToken)")
        request.body = .bytes(ByteBuffer(bytes: body))
        let response = try await http.execute(request, timeout: .seconds(60))
        let answer = try await response.body.collect(upTo: 1 << 20)
        guard response.status == .ok else { throw BenchError("setting the APNs key: HTTP \(response.status.code): \(String(buffer: answer))") }
    }

    private func progress(_ line: String) {
        FileHandle.standardError.write(Data("\(line)\n".utf8))
    }
}

/// The files the run needs, made with `openssl`: a self-signed certificate for 127.0.0.1 (the
/// stand-in's, which the server is told to trust) and a P-256 key in PKCS #8 (the app's APNs key).
private struct TestCertificates {
    let certificate: String
    let certificateKey: String
    let apnsKey: String

    init(in directory: URL) throws {
        certificate = directory.appendingPathComponent("standin.pem").path
        certificateKey = directory.appendingPathComponent("standin-key.pem").path
        apnsKey = directory.appendingPathComponent("AuthKey.p8").path
        try Self.openssl([
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1",
            "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", certificateKey, "-out", certificate,
        ])
        try Self.openssl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", apnsKey])
    }

    private static func openssl(_ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["openssl"] + arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw BenchError("openssl \(arguments.first ?? "") failed") }
    }
}

/// Apple's push service as far as the workload needs it: HTTP/2 over TLS on loopback, a thousand
/// streams per connection as APNs allows, answering every request 200 with an `apns-id`. It checks
/// nothing (the tests' stand-in, `scripts/push-standin.py`, verifies what Apple would); it counts
/// arrivals and connections, and keeps the first request so that `h2load` can send the same.
final class APNsReceiver: Sendable {
    let arrivals = Arrivals(what: "pushes reached the APNs stand-in")
    private let first = Mutex<(head: HTTPRequestHead, body: ByteBuffer)?>(nil)
    private let connections = Atomic<Int>(0)
    private let port = Atomic<Int>(0)

    /// Listens on a free port of 127.0.0.1 until the returned channel is closed.
    func listen(certificate: String, key: String) async throws -> any Channel {
        var tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMFile(certificate).map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(file: key, format: .pem)))
        tls.applicationProtocols = ["h2"]
        let context = try NIOSSLContext(configuration: tls)
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .serverChannelOption(.backlog, value: 256)
            .childChannelInitializer { [self] channel in
                connections.add(1, ordering: .relaxed)
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context))
                }.flatMap {
                    channel.configureHTTP2Pipeline(
                        mode: .server, initialLocalSettings: [HTTP2Setting(parameter: .maxConcurrentStreams, value: 1000)],
                        inboundStreamInitializer: { stream in
                            stream.eventLoop.makeCompletedFuture {
                                try stream.pipeline.syncOperations.addHandlers([
                                    HTTP2FramePayloadToHTTP1ServerCodec(), RequestHandler(receiver: self),
                                ])
                            }
                        }
                    ).map { _ in }
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        port.store(channel.localAddress?.port ?? 0, ordering: .relaxed)
        return channel
    }

    fileprivate func received(_ head: HTTPRequestHead, _ body: ByteBuffer) {
        first.withLock { first in
            if first == nil { first = (head, body) }
        }
        arrivals.arrived()
    }

    /// One request of the stand-in: answered 200 once it has all arrived.
    private final class RequestHandler: ChannelInboundHandler {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart

        private let receiver: APNsReceiver
        private var head: HTTPRequestHead?
        private var body = ByteBuffer()

        init(receiver: APNsReceiver) { self.receiver = receiver }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head(let head): self.head = head
            case .body(var part): body.writeBuffer(&part)
            case .end:
                if let head { receiver.received(head, body) }
                let response = HTTPResponseHead(
                    version: .init(major: 2, minor: 0), status: .ok, headers: ["apns-id": "8FE746A2-0D67-4A4B-8A44-6A9C9C2C1F01"])
                context.write(wrapOutboundOut(.head(response)), promise: nil)
                context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
            }
        }
    }

    /// The floor: `h2load` sending the first request Stratus sent, `requests` times, over as many
    /// connections as Stratus opened and as many streams at once as Stratus sends (256, shared
    /// among its connections).
    struct Replay {
        let h2load: String
        let arguments: [String]
        let connections: Int
        let streams: Int
        let requests: Int

        /// Runs `h2load` once; returns the requests it completed per second.
        func run() throws -> Double {
            let process = Process()
            let output = Pipe()
            process.executableURL = URL(fileURLWithPath: h2load)
            process.arguments = arguments
            process.standardOutput = output
            process.standardError = FileHandle.nullDevice
            try process.run()
            let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            // "finished in 1.05s, 9523.81 req/s, …" and "requests: N total, N started, N done, N succeeded, …"
            guard text.contains("\(requests) succeeded"),
                let finished = text.split(separator: "\n").first(where: { $0.hasPrefix("finished in") }),
                let rate = finished.split(separator: ",").dropFirst().first?.split(separator: " ").first.flatMap({ Double($0) })
            else { throw BenchError("h2load did not complete its \(requests) requests:\n\(text)") }
            return rate
        }
    }

    /// The `h2load` run replaying the first request, its body written into `directory`.
    func replay(h2load: String, requests: Int, in directory: URL) throws -> Replay {
        guard let (head, body) = first.withLock({ $0 }) else { throw BenchError("no push reached the stand-in") }
        let bodyFile = directory.appendingPathComponent("push-body.json")
        try Data(body.readableBytesView).write(to: bodyFile)
        let connections = max(1, connections.load(ordering: .relaxed))
        let streams = max(1, 256 / connections)
        var arguments = ["-n", "\(requests)", "-c", "\(connections)", "-m", "\(streams)", "-d", bodyFile.path]
        for (name, value) in head.headers where !["host", "content-length"].contains(name.lowercased()) {
            arguments += ["-H", "\(name): \(value)"]
        }
        arguments.append("https://127.0.0.1:\(port.load(ordering: .relaxed))\(head.uri)")
        return Replay(h2load: h2load, arguments: arguments, connections: connections, streams: streams, requests: requests)
    }
}
