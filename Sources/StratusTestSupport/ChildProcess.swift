package import Foundation
package import StratusProcess

/// What a finished child process printed, and how it ended.
package struct ChildProcessResult: Sendable {
    /// The exit status (128 plus the signal's number when a signal ended it, as shells say).
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
    let process = try SpawnedProcess(executable: executable, arguments: arguments, standardOutput: .pipe, standardError: .pipe)
    return await withCheckedContinuation { continuation in
        Thread.detachNewThread {
            let group = DispatchGroup()
            nonisolated(unsafe) var errorData = Data()
            group.enter()
            Thread.detachNewThread {
                errorData = process.standardError?.readDataToEndOfFile() ?? Data()
                group.leave()
            }
            let outputData = process.standardOutput?.readDataToEndOfFile() ?? Data()
            group.wait()
            let status: Int32 = switch process.waitUntilExit() {
            case .exit(let code): code
            case .signal(let signal): 128 + signal
            }
            continuation.resume(
                returning: ChildProcessResult(
                    status: status, output: String(decoding: outputData, as: UTF8.self),
                    errors: String(decoding: errorData, as: UTF8.self)))
        }
    }
}

/// The first line `process` writes on its standard output (a pipe), without its newline; read on a
/// thread of its own, as the read blocks.
package func firstLine(of process: SpawnedProcess) async -> Data {
    await withCheckedContinuation { continuation in
        Thread.detachNewThread {
            var bytes = Data()
            while let chunk = try? process.standardOutput?.read(upToCount: 1), !chunk.isEmpty {
                if chunk == Data("\n".utf8) { break }
                bytes += chunk
            }
            continuation.resume(returning: bytes)
        }
    }
}
