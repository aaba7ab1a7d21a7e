import Foundation
import StratusProcess

/// A stand-in for an outside service, written in Python under `scripts/`, running as a child
/// process: it writes its standard error to a log in a state directory of its own, and its first
/// line on standard output is a JSON object saying where it listens.
struct StandInProcess: Sendable {
    let process: SpawnedProcess
    /// The directory of its log (and of whatever else it keeps).
    let stateDirectory: URL
    let logFile: URL

    /// What it wrote to standard error so far.
    var log: String { (try? String(contentsOf: logFile, encoding: .utf8)) ?? "" }

    /// Starts `scripts/<script>` with `arguments` (where `{state}` stands for the state directory)
    /// and answers it with its first line's object. Throws, naming `needs` and with its log, when it
    /// does not say where it listens.
    static func start(script: String, arguments: [String] = [], needs: String) async throws -> (Self, [String: Any]) {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let state = FileManager.default.temporaryDirectory.appendingPathComponent(
            "\(script.replacingOccurrences(of: ".py", with: ""))-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: state, withIntermediateDirectories: true)
        let log = state.appendingPathComponent("stderr.log")
        FileManager.default.createFile(atPath: log.path, contents: nil)
        let process = try SpawnedProcess(
            executable: URL(fileURLWithPath: "/usr/bin/env"),
            arguments: ["python3", root.appendingPathComponent("scripts/\(script)").path]
                + arguments.map { $0.replacingOccurrences(of: "{state}", with: state.path) },
            standardOutput: .pipe, standardError: .file(try FileHandle(forWritingTo: log)))
        let standIn = StandInProcess(process: process, stateDirectory: state, logFile: log)
        guard let announced = try? JSONSerialization.jsonObject(with: await firstLine(of: process)) as? [String: Any] else {
            let errors = standIn.log
            standIn.stop(signal: SIGKILL)
            throw StandInError("scripts/\(script) did not start (needs \(needs)): \(errors)")
        }
        return (standIn, announced)
    }

    /// Ends the process with `signal` and removes its state directory.
    func stop(signal: Int32 = SIGTERM) {
        process.send(signal)
        _ = process.waitUntilExit()
        try? FileManager.default.removeItem(at: stateDirectory)
    }
}

/// Why a stand-in did not start, or answered a request unexpectedly.
struct StandInError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
