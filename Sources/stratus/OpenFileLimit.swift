import Logging

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The process's limit on open files, which bounds how many connections the server can hold.
enum OpenFileLimit {
    /// Below this many open files, a start warns: a few hundred idle clients could use them all.
    static let comfortable: UInt64 = 4096

    /// Raises the soft limit to the hard one, and warns when the result is still low.
    static func raise(logger: Logger) {
        var limit = rlimit()
        guard getrlimit(resourceLimit, &limit) == 0 else { return }
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(resourceLimit, &raised) == 0 { limit = raised }
        }
        let current = UInt64(limit.rlim_cur)
        if current < comfortable {
            logger.warning(
                "the open-file limit is \(current) (hard limit \(UInt64(limit.rlim_max))); each connection uses one: raise it (ulimit -n, or LimitNOFILE= under systemd) to hold more clients")
        } else {
            logger.debug("open-file limit: \(current)")
        }
    }

    #if canImport(Glibc)
    private static let resourceLimit = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
    #else
    private static let resourceLimit = RLIMIT_NOFILE
    #endif
}
