import Foundation

/// A server running as a child process of the benchmark, so that its memory can be read apart from
/// the clients' and each side has its own file descriptors.
final class ServerProcess: @unchecked Sendable {
    let process: Process
    /// The URL it printed once listening.
    let url: String

    /// Starts `executable` with `arguments` and waits for a line containing `http://` on its
    /// standard output (the URL it listens at).
    init(executable: URL, arguments: [String]) throws {
        guard FileManager.default.isExecutableFile(atPath: executable.path) else {
            throw BenchError(
                "\(executable.path) is missing: build it beside this executable (swift build -c release), or skip the "
                    + "push workload with --push-devices 0")
        }
        process = Process()
        process.executableURL = executable
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        var text = ""
        let handle = output.fileHandleForReading
        while true {
            let data = handle.availableData
            guard !data.isEmpty else { throw BenchError("\(executable.lastPathComponent) exited before it listened") }
            text += String(decoding: data, as: UTF8.self)
            if let start = text.range(of: "http://"),
                let end = text[start.lowerBound...].firstIndex(where: { $0 == "\n" || $0 == " " })
            {
                url = String(text[start.lowerBound..<end])
                break
            }
        }
        // Keep draining its output so it never blocks on a full pipe.
        Thread.detachNewThread { while !handle.availableData.isEmpty {} }
    }

    /// The executable beside the running benchmark (both are built into the same folder).
    static func sibling(_ name: String) -> URL {
        URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
            .appendingPathComponent(name)
    }

    /// The process's resident memory in bytes (`VmRSS`).
    var residentBytes: Int {
        guard let status = try? String(contentsOfFile: "/proc/\(process.processIdentifier)/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
            let kilobytes = Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
        else { return 0 }
        return kilobytes * 1024
    }

    func stop() {
        process.terminate()
        process.waitUntilExit()
    }
}
