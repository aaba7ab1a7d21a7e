import Foundation
import StratusStorage
import Synchronization

/// Remembers recent answers to "which container is this API token for" and "whom does this web
/// auth token sign in", so that a request does not pay two storage reads before its real work.
///
/// Entries live `lifetimeSeconds` by the server's clock (10 by default). Signing out removes the
/// session here at once, and other server instances sharing the database as soon as the revocation
/// reaches them (``CredentialRevocation``); one that missed the message honours a revoked session
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

/// The credential caches of one server process, by hash: which container an API token is for, and
/// whom a session signs in. ``AccountService`` fills them and forgets what it revokes; ``PushHub``
/// forgets what other instances revoked.
final class CredentialCaches: Sendable {
    let apiTokens: CredentialCache<String>
    let sessions: CredentialCache<SessionInfo>

    init(clock: ServerClock) {
        apiTokens = CredentialCache(clock: clock)
        sessions = CredentialCache(clock: clock)
    }

    /// Forgets the credentials a revocation ended.
    func forget(_ revocation: CredentialRevocation) {
        for hash in revocation.sessionHashes { sessions.remove(hash) }
        for hash in revocation.apiTokenHashes { apiTokens.remove(hash) }
    }
}

/// Credentials that just stopped working, which every instance sharing the storage forgets at once
/// rather than when its cache would expire, and whose push connections it closes.
struct CredentialRevocation: Sendable, Equatable {
    var container: String
    /// The user all of whose sessions ended (disabled, or given a new password); `nil` when only
    /// the sessions and tokens named ended.
    var userRecordName: String?
    /// The hashes of the sessions that ended.
    var sessionHashes: [String] = []
    /// The hashes (IDs) of the API tokens revoked.
    var apiTokenHashes: [String] = []
}
