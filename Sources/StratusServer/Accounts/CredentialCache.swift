import Foundation
import Synchronization

/// Remembers recent answers to "which container is this API token for" and "whom does this web
/// auth token sign in", so that a request does not pay two storage reads before its real work.
///
/// Entries live `lifetimeSeconds` by the server's clock (10 by default). Signing out removes the
/// session here at once; another server instance sharing the database may honour a revoked session
/// for at most `lifetimeSeconds`. The cache holds at most `capacity` entries and starts over when full.
final class CredentialCache<Value: Sendable>: Sendable {
    private struct Entry {
        var value: Value
        var expires: Int64
    }

    private let entries = Mutex<[String: Entry]>([:])
    private let lifetimeMilliseconds: Int64
    private let capacity: Int
    private let clock: ServerClock

    init(clock: ServerClock, lifetimeSeconds: Int64 = 10, capacity: Int = 10_000) {
        self.clock = clock
        lifetimeMilliseconds = lifetimeSeconds * 1000
        self.capacity = capacity
    }

    /// The cached value for `key`, or the result of `load`, cached when it is not `nil`.
    func value(for key: String, load: () async throws -> Value?) async rethrows -> Value? {
        let now = clock.milliseconds
        if let cached = entries.withLock({ $0[key] }), cached.expires > now { return cached.value }
        guard let value = try await load() else { return nil }
        let expires = now + lifetimeMilliseconds
        entries.withLock { entries in
            if entries.count >= capacity { entries.removeAll(keepingCapacity: true) }
            entries[key] = Entry(value: value, expires: expires)
        }
        return value
    }

    /// Forgets `key`.
    func remove(_ key: String) {
        _ = entries.withLock { $0.removeValue(forKey: key) }
    }
}
