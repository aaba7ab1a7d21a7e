package import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Runs the package's executable `name` with `arguments`, kills it with SIGKILL once it printed
/// `afterLines` lines, and returns every line it printed and why it ended (`.uncaughtSignal` when
/// the kill, not its own end, stopped it): the crash of an app between two of its steps.
package func runKilled(
    _ name: String, _ arguments: [String], afterLines: Int
) async throws -> (lines: [String], reason: Process.TerminationReason) {
    let process = Process()
    process.executableURL = productsDirectory.appendingPathComponent(name)
    process.arguments = arguments
    let output = Pipe()
    process.standardOutput = output
    process.standardError = FileHandle.nullDevice
    try process.run()
    // The reads block until the child prints, and the child may wait on this process's server: read
    // on a thread of its own, never on Swift's cooperative pool, whose threads the server needs.
    let lines = await withCheckedContinuation { continuation in
        Thread.detachNewThread {
            continuation.resume(returning: readUntilKilled(process, output: output, afterLines: afterLines))
        }
    }
    return (lines, process.terminationReason)
}

/// Reads `process`'s lines until `afterLines` came, kills it with SIGKILL, and returns every line
/// it printed.
private func readUntilKilled(_ process: Process, output: Pipe, afterLines: Int) -> [String] {
    var lines: [String] = []
    var pending = Data()
    let handle = output.fileHandleForReading
    while lines.count < afterLines, process.isRunning || !pending.isEmpty {
        let chunk = handle.availableData
        if chunk.isEmpty { break }
        pending.append(chunk)
        while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
            lines.append(String(decoding: pending[..<newline], as: UTF8.self))
            pending.removeSubrange(...newline)
        }
    }
    kill(process.processIdentifier, SIGKILL)
    process.waitUntilExit()
    // Lines written before the kill but not read yet count too.
    pending.append(handle.readDataToEndOfFile())
    lines += String(decoding: pending, as: UTF8.self).split(separator: "\n").map(String.init)
    return lines
}
