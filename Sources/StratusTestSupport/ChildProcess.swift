package import Foundation

/// What a finished child process printed, and how it ended.
package struct ChildProcessResult: Sendable {
    /// The exit status.
    package let status: Int32
    /// Its standard output.
    package let output: String
    /// Its standard error.
    package let errors: String
}

/// Runs `executable` with `arguments` to its end without holding a thread of Swift's cooperative
/// pool: the blocking reads and the wait run on a thread of their own, so tests running meanwhile
/// (on a two-core machine the pool has two threads) keep going. Both pipes are drained together, so
/// a child that writes much to one of them cannot block on it.
package func runChildProcess(_ executable: URL, _ arguments: [String]) async throws -> ChildProcessResult {
    let process = Process()
    process.executableURL = executable
    process.arguments = arguments
    let output = Pipe()
    let errors = Pipe()
    process.standardOutput = output
    process.standardError = errors
    try process.run()
    return await withCheckedContinuation { continuation in
        Thread.detachNewThread {
            let group = DispatchGroup()
            nonisolated(unsafe) var errorData = Data()
            group.enter()
            Thread.detachNewThread {
                errorData = errors.fileHandleForReading.readDataToEndOfFile()
                group.leave()
            }
            let outputData = output.fileHandleForReading.readDataToEndOfFile()
            group.wait()
            process.waitUntilExit()
            continuation.resume(
                returning: ChildProcessResult(
                    status: process.terminationStatus, output: String(decoding: outputData, as: UTF8.self),
                    errors: String(decoding: errorData, as: UTF8.self)))
        }
    }
}
