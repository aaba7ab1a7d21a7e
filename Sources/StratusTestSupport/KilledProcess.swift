package import Foundation
import StratusProcess

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Runs the package's executable `name` with `arguments`, kills it with SIGKILL once it printed
/// `afterLines` lines, and returns every line it printed and whether the kill, not its own end,
/// stopped it: the crash of an app between two of its steps.
package func runKilled(_ name: String, _ arguments: [String], afterLines: Int) async throws -> (lines: [String], killed: Bool) {
    let process = try SpawnedProcess(
        executable: productsDirectory.appendingPathComponent(name), arguments: arguments, standardOutput: .pipe)
    // The reads block until the child prints, and the child may wait on this process's server: read
    // on a thread of its own, never on Swift's cooperative pool, whose threads the server needs.
    return await withCheckedContinuation { continuation in
        Thread.detachNewThread {
            let lines = readUntilKilled(process, afterLines: afterLines)
            continuation.resume(returning: (lines, process.waitUntilExit() == .signal(SIGKILL)))
        }
    }
}

/// Reads `process`'s lines until `afterLines` came, kills it with SIGKILL, and returns every line
/// it printed.
private func readUntilKilled(_ process: SpawnedProcess, afterLines: Int) -> [String] {
    var lines: [String] = []
    var pending = Data()
    guard let handle = process.standardOutput else { return [] }
    while lines.count < afterLines, process.isRunning || !pending.isEmpty {
        let chunk = handle.availableData
        if chunk.isEmpty { break }
        pending.append(chunk)
        while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
            lines.append(String(decoding: pending[..<newline], as: UTF8.self))
            pending.removeSubrange(...newline)
        }
    }
    process.send(SIGKILL)
    process.waitUntilExit()
    // Lines written before the kill but not read yet count too.
    pending.append(handle.readDataToEndOfFile())
    lines += String(decoding: pending, as: UTF8.self).split(separator: "\n").map(String.init)
    return lines
}
