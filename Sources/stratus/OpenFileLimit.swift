import ArgumentParser
import Logging

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The process's limit on open files, treated as a budget: the server holds no more connections
/// than fit in it beside the storage's files and a reserve, so that it never runs out of descriptors
/// (a process that does cannot accept clients, open an asset, or even let the thread pool read
/// `/proc`, which traps).
enum OpenFileLimit {
    /// Descriptors one connection may hold: its socket, and a file it reads or writes (an asset).
    static let perConnection = 2
    /// Descriptors kept for everything else: standard streams, event loops' pollers and wake-ups,
    /// the thread pool's reads of `/proc`, log and data files, outgoing connections.
    static let reserve = 128
    /// The connection cap when the operator sets none and the limit allows it.
    static let defaultConnections = 10_000

    /// The soft and hard limits on open files, after the soft one is raised to the hard one.
    static func raise() -> (current: Int, hard: Int) {
        var limit = rlimit()
        guard getrlimit(resourceLimit, &limit) == 0 else { return (Int.max, Int.max) }
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(resourceLimit, &raised) == 0 { limit = raised }
        }
        return (Int(clamping: UInt64(limit.rlim_cur)), Int(clamping: UInt64(limit.rlim_max)))
    }

    /// The connection cap: `requested` when it fits in the limit beside `storageFiles` and the
    /// reserve (an error naming the numbers when it does not); without one, ``defaultConnections``
    /// or as many as fit, whichever is fewer (a notice says so when fewer).
    static func connectionCap(
        requested: Int?, limit: (current: Int, hard: Int), storageFiles: Int, logger: Logger
    ) throws -> Int {
        let fitting = (limit.current - storageFiles - reserve) / perConnection
        let needed = { (connections: Int) in connections * perConnection + storageFiles + reserve }
        if let requested {
            guard requested <= fitting else {
                throw ValidationError(
                    "--max-connections \(requested) needs \(needed(requested)) open files (\(perConnection) per connection, "
                        + "\(storageFiles) for the storage and \(reserve) in reserve), but the open-file limit is "
                        + "\(limit.current) (hard limit \(limit.hard)): raise it (ulimit -n, or LimitNOFILE= under "
                        + "systemd) or give --max-connections \(max(fitting, 0)) or less")
            }
            return requested
        }
        guard fitting >= 16 else {
            throw ValidationError(
                "the open-file limit is \(limit.current) (hard limit \(limit.hard)), too low to serve clients beside "
                    + "\(storageFiles) files for the storage and \(reserve) in reserve: raise it (ulimit -n, or "
                    + "LimitNOFILE= under systemd)")
        }
        if fitting < defaultConnections {
            logger.notice(
                "the open-file limit is \(limit.current) (hard limit \(limit.hard)): the server holds at most \(fitting) connections (\(perConnection) files each, \(storageFiles) for the storage, \(reserve) in reserve); raise it (ulimit -n, or LimitNOFILE= under systemd) to hold more")
            return fitting
        }
        return defaultConnections
    }

    #if canImport(Glibc)
    private static let resourceLimit = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
    #else
    private static let resourceLimit = RLIMIT_NOFILE
    #endif
}
