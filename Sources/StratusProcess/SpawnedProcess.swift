public import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A child process started with `posix_spawn`, for tests and benchmarks.
///
/// Foundation's `Process.run()` on Linux lists `/proc/self/fd` with a read past each directory
/// entry (swift-corelibs-foundation #5472) and crashes the whole test process now and then when
/// many descriptors are open; this starts children without it. The child gets only its three
/// standard streams (every other descriptor is closed in it, as `Process` does). The pipes it makes are
/// close-on-exec (set before any other spawn of this class runs), so another child never holds
/// their write end, which would keep a reader waiting for an end of file; the child gets a clean
/// signal mask and default handlers.
public final class SpawnedProcess: Sendable {
    /// Where a standard stream of the child goes.
    public enum Output: Sendable {
        /// Nowhere (`/dev/null`).
        case discard
        /// A pipe this process reads (``standardOutput``, ``standardError``).
        case pipe
        /// An open file.
        case file(FileHandle)
    }

    /// How the child ended.
    public enum Termination: Sendable, Equatable {
        /// It exited with this status.
        case exit(Int32)
        /// A signal ended it.
        case signal(Int32)
    }

    /// Why a child could not be started.
    public struct SpawnError: Error, CustomStringConvertible {
        public let description: String
    }

    /// The child's process ID.
    public let processIdentifier: Int32
    /// The read end of its standard output, when it goes to a pipe.
    public let standardOutput: FileHandle?
    /// The read end of its standard error, when it goes to a pipe.
    public let standardError: FileHandle?
    private let termination = Mutex<Termination?>(nil)
    private static let spawning = NSLock()

    /// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34 and later), which Swift's Glibc
    /// module does not import.
    private nonisolated(unsafe) static let closeFrom: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32)? = {
        #if canImport(Glibc)
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np") else { return nil }
        return unsafeBitCast(
            symbol, to: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32).self)
        #else
        return nil
        #endif
    }()

    /// Starts `executable` with `arguments`; `environment` is added to this process's.
    public init(
        executable: URL, arguments: [String], environment: [String: String] = [:],
        standardOutput output: Output = .discard, standardError errors: Output = .discard
    ) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        var parentEnds: [Int32] = []
        var childEnds: [Int32] = []
        defer { for descriptor in childEnds { close(descriptor) } }
        func connect(_ stream: Output, to target: Int32) throws -> FileHandle? {
            switch stream {
            case .discard:
                posix_spawn_file_actions_addopen(&actions, target, "/dev/null", O_WRONLY, 0)
                return nil
            case .file(let handle):
                posix_spawn_file_actions_adddup2(&actions, handle.fileDescriptor, target)
                return nil
            case .pipe:
                var ends: [Int32] = [-1, -1]
                guard pipe(&ends) == 0 else { throw SpawnError(description: "no pipe for the child: errno \(errno)") }
                // Close-on-exec before any other spawn can run (spawns take turns, below).
                for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
                parentEnds.append(ends[0])
                childEnds.append(ends[1])
                // dup2 gives the child its end without close-on-exec.
                posix_spawn_file_actions_adddup2(&actions, ends[1], target)
                return FileHandle(fileDescriptor: ends[0], closeOnDealloc: true)
            }
        }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        // Spawns take turns, so that no child inherits the pipe of another before it is close-on-exec.
        Self.spawning.lock()
        defer { Self.spawning.unlock() }
        let outputHandle: FileHandle?
        let errorHandle: FileHandle?
        do {
            outputHandle = try connect(output, to: 1)
            errorHandle = try connect(errors, to: 2)
        } catch {
            for descriptor in parentEnds { close(descriptor) }
            throw error
        }
        // Nothing else of this process reaches the child: a listening socket it inherited would keep
        // the port taken after this process closed it.
        Self.closeFrom?(&actions, 3)

        // The child starts with no signal blocked and every signal at its default.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        var allSignals = sigset_t()
        sigfillset(&allSignals)
        posix_spawnattr_setsigdefault(&attributes, &allSignals)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        let variables = ProcessInfo.processInfo.environment.merging(environment) { $1 }.map { "\($0.key)=\($0.value)" }
        let path = executable.path
        var pid: pid_t = 0
        let status = withCStrings([path] + arguments) { argv in
            withCStrings(variables) { envp in posix_spawn(&pid, path, &actions, &attributes, argv, envp) }
        }
        guard status == 0 else {
            for descriptor in parentEnds { close(descriptor) }
            throw SpawnError(description: "\(path) could not be started: \(String(cString: strerror(status)))")
        }
        processIdentifier = pid
        standardOutput = outputHandle
        standardError = errorHandle
    }

    /// Whether the child has not ended yet.
    public var isRunning: Bool {
        termination.withLock { ended in
            guard ended == nil else { return false }
            var status: Int32 = 0
            guard waitpid(processIdentifier, &status, WNOHANG) == processIdentifier else { return true }
            ended = Self.ending(status)
            return false
        }
    }

    /// Waits for the child to end (on the calling thread) and says how it ended.
    @discardableResult
    public func waitUntilExit() -> Termination {
        if let ended = termination.withLock({ $0 }) { return ended }
        var status: Int32 = 0
        while waitpid(processIdentifier, &status, 0) < 0 {
            guard errno == EINTR else {
                // Another wait took it first: it has ended, and that wait recorded how.
                return termination.withLock { $0 } ?? .exit(-1)
            }
        }
        let ended = Self.ending(status)
        termination.withLock { $0 = $0 ?? ended }
        return ended
    }

    /// Sends `signal` to the child (`SIGTERM` to ask it to stop, `SIGKILL` to kill it).
    public func send(_ signal: Int32) {
        guard termination.withLock({ $0 }) == nil else { return }
        kill(processIdentifier, signal)
    }

    private static func ending(_ status: Int32) -> Termination {
        // WIFEXITED / WEXITSTATUS / WTERMSIG, which Swift does not import as functions.
        let signal = status & 0x7f
        return signal == 0 ? .exit((status >> 8) & 0xff) : .signal(signal)
    }
}

/// Calls `body` with `strings` as a NULL-terminated array of C strings.
private func withCStrings<Result>(_ strings: [String], _ body: ([UnsafeMutablePointer<CChar>?]) -> Result) -> Result {
    let pointers = strings.map { strdup($0) } + [nil]
    defer { for pointer in pointers { free(pointer) } }
    return body(pointers)
}
