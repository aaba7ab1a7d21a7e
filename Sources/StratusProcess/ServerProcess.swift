public import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A server running as a child process of a benchmark or a test: its memory can be read apart from
/// the clients', each side has its own file descriptors, and it can be killed.
public final class ServerProcess: @unchecked Sendable {
    /// Why a server process did not start.
    public struct StartError: Error, CustomStringConvertible {
        public let description: String
    }

    /// The running process.
    public let process: SpawnedProcess
    /// The URL it printed once listening.
    public let url: String
    /// What it printed on its standard output up to and including the URL's line.
    public let banner: String

    /// Starts `executable` with `arguments` and waits for a line containing `http://` on its
    /// standard output (the URL it listens at). Its standard error (the log) goes to `log` when
    /// given, and is discarded otherwise. `environment` is added to this process's.
    public init(executable: URL, arguments: [String], log: URL? = nil, environment: [String: String] = [:]) throws {
        guard FileManager.default.isExecutableFile(atPath: executable.path) else {
            throw StartError(description: "\(executable.path) is missing: build it first (swift build)")
        }
        var errors = SpawnedProcess.Output.discard
        if let log {
            guard FileManager.default.createFile(atPath: log.path, contents: nil),
                let handle = FileHandle(forWritingAtPath: log.path)
            else { throw StartError(description: "cannot write the log file \(log.path)") }
            errors = .file(handle)
        }
        process = try SpawnedProcess(
            executable: executable, arguments: arguments, environment: environment, standardOutput: .pipe,
            standardError: errors)
        guard let handle = process.standardOutput else { throw StartError(description: "no pipe from the server") }
        var text = ""
        while true {
            let data = handle.availableData
            guard !data.isEmpty else {
                throw StartError(description: "\(executable.lastPathComponent) exited before it listened: \(text)")
            }
            text += String(decoding: data, as: UTF8.self)
            if let start = text.range(of: "http://"),
                let end = text[start.lowerBound...].firstIndex(where: { $0 == "\n" || $0 == " " })
            {
                url = String(text[start.lowerBound..<end])
                banner = text
                break
            }
        }
        // Keep draining its output so it never blocks on a full pipe.
        Thread.detachNewThread { while !handle.availableData.isEmpty {} }
    }

    /// The executable beside the running program (both are built into the same folder).
    public static func sibling(_ name: String) -> URL {
        URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
            .appendingPathComponent(name)
    }

    /// The process's resident memory in bytes (`VmRSS`).
    public var residentBytes: Int {
        guard let status = try? String(contentsOfFile: "/proc/\(process.processIdentifier)/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
            let kilobytes = Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
        else { return 0 }
        return kilobytes * 1024
    }

    /// Asks the server to stop (SIGTERM) and waits for it.
    public func stop() {
        process.send(SIGTERM)
        process.waitUntilExit()
    }

    /// Kills the server at once (SIGKILL), as a crash or a lost machine would, and waits for it.
    public func kill() {
        process.send(SIGKILL)
        process.waitUntilExit()
    }
}
