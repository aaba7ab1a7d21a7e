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

    /// The entries, and how many removals there have been: a value loaded while one happened may
    /// be the one removed, read before its revocation, and is answered but not kept.
    private let entries = Mutex<(byKey: [String: Entry], removals: UInt64)>(([:], 0))
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
        let (cached, removals) = entries.withLock { ($0.byKey[key], $0.removals) }
        if let cached, cached.expires > now { return cached.value }
        guard let value = try await load() else { return nil }
        let expires = now + lifetimeMilliseconds
        entries.withLock { state in
            guard state.removals == removals else { return }
            if state.byKey.count >= capacity { state.byKey.removeAll(keepingCapacity: true) }
            state.byKey[key] = Entry(value: value, expires: expires)
        }
        return value
    }

    /// Forgets `key`, and keeps no value loaded while it was being removed.
    func remove(_ key: String) {
        entries.withLock { state in
            state.byKey[key] = nil
            state.removals &+= 1
        }
    }
}
