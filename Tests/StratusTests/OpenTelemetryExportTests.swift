import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import StratusProcess
import StratusServer
import StratusTestSupport
import Testing

/// `stratus serve --otel` exports a span of every request over OTLP/HTTP to the collector the
/// standard `OTEL_*` variables name; without the flag nothing is exported.
@Suite("OpenTelemetry export")
struct OpenTelemetryExportTests {
    /// An OTLP/HTTP collector stand-in: it writes its port to a file, accepts what is posted to
    /// `/v1/traces`, and exits 0 once a posted batch names the route it waits for (1 after 60 s).
    static let collector = #"""
        import http.server, sys, threading
        port_file, route = sys.argv[1], sys.argv[2].encode()
        class Collector(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()
                if self.path == "/v1/traces":
                    with open(sys.argv[3], "ab") as received_file:
                        received_file.write(body)
                if self.path == "/v1/traces" and route in body:
                    print("received", len(body), "bytes naming the route", flush=True)
                    received.append(True)
                    threading.Thread(target=server.shutdown).start()
            def log_message(self, *args):
                pass
        received = []
        server = http.server.HTTPServer(("127.0.0.1", 0), Collector)
        open(port_file, "w").write(str(server.server_address[1]))
        timer = threading.Timer(60, lambda: (print("nothing arrived", flush=True), server.shutdown()))
        timer.start()
        server.serve_forever()
        timer.cancel()
        sys.exit(0 if received else 1)
        """#

    @Test("with --otel, a request's span reaches the OTLP collector, named by its route")
    func spansReachTheCollector() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("stratus-otel-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: root) }
        let script = root.appendingPathComponent("collector.py")
        try Self.collector.write(to: script, atomically: true, encoding: .utf8)
        let portFile = root.appendingPathComponent("port")
        let exported = root.appendingPathComponent("exported")
        async let collected = runChildProcess(
            URL(fileURLWithPath: "/usr/bin/env"), ["python3", script.path, portFile.path, "/health", exported.path])
        var port: String?
        for _ in 0..<300 where port == nil {
            port = try? String(contentsOf: portFile, encoding: .utf8)
            if port == nil || port!.isEmpty { port = nil; try await Task.sleep(for: .milliseconds(50)) }
        }
        let collectorPort = try #require(port, "the collector did not start")
        let server = try ServerProcess(
            executable: productsDirectory.appendingPathComponent("stratus"),
            arguments: ["serve", "--otel", "--data", root.appendingPathComponent("data").path, "--port", "0"],
            environment: [
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:\(collectorPort)", "OTEL_BSP_SCHEDULE_DELAY": "100",
            ])
        defer { server.kill() }
        // A request with a token in its query first: its span must name the route, never the token.
        let credentials = try JSONDecoder().decode(
            ServerCredentials.self, from: Data(contentsOf: root.appendingPathComponent("data/credentials.json")))
        let tokened = try await HTTPClient.shared.execute(
            HTTPClientRequest(
                url: server.url + "/database/1/\(credentials.container)/development/public/users/current?ckAPIToken=\(credentials.apiToken)"),
            timeout: .seconds(30))
        #expect(tokened.status.code == 421)
        let response = try await HTTPClient.shared.execute(HTTPClientRequest(url: server.url + "/health"), timeout: .seconds(30))
        #expect(response.status == .ok)
        let result = try await collected
        #expect(result.status == 0 && result.output.contains("naming the route"), "\(result.output)\(result.errors)")
        let spans = try Data(contentsOf: exported)
        #expect(spans.range(of: Data("users/current".utf8)) != nil, "the tokened request's span was exported")
        #expect(spans.range(of: Data(credentials.apiToken.utf8)) == nil, "no token reaches the collector")
    }
}
