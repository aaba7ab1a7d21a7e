import StratusModel
import Synchronization

/// Exponential backoff after failed attempts, per key (an account, a client address).
///
/// An attempt counts as a failure from the moment it starts (``begin(_:)``), so guesses sent in
/// parallel are counted before any of them is checked; a success takes its own count back
/// (``succeeded(_:forgiving:)``). The first `freeFailures` of a key cost nothing; from then on each
/// failure locks the key for twice as long as the one before, 1 s, 2 s, 4 s, … up to
/// `maximumLockSeconds`. While a key is locked, every attempt is refused before it is checked, with
/// the same answer whatever the attempt was. A key forgets its failures after an hour without one.
final class FailureBackoff: Sendable {
    /// A key and how many failures it is allowed before it is locked.
    struct Key: Sendable, Hashable {
        var name: String
        var freeFailures: Int
    }

    private struct Entry {
        var failures: Int
        var lockedUntil: Int64
        var lastFailure: Int64
    }

    private let maximumLockSeconds: Int64
    private let clock: ServerClock
    private let entries = Mutex<(byKey: [String: Entry], pruneAt: Int)>(([:], pruneThreshold))
    private static let forgetAfterMilliseconds: Int64 = 3_600_000
    private static let pruneThreshold = 50_000

    init(maximumLockSeconds: Int64, clock: ServerClock) {
        self.maximumLockSeconds = maximumLockSeconds
        self.clock = clock
    }

    /// How many keys have failures remembered.
    var rememberedKeys: Int { entries.withLock { $0.byKey.count } }

    /// Starts an attempt for every key: the seconds to wait when one of them is locked (and then
    /// nothing is counted), otherwise `nil`, with the attempt counted as a failure of each key.
    func begin(_ keys: [Key]) -> Int? {
        let now = clock.milliseconds
        return entries.withLock { state in
            // Keys with a failure in the last hour stay; when that leaves most of them, the next
            // pruning waits until there are twice as many, so its cost spreads over the calls.
            if state.byKey.count > state.pruneAt {
                state.byKey = state.byKey.filter { now - $0.value.lastFailure < Self.forgetAfterMilliseconds }
                state.pruneAt = max(Self.pruneThreshold, 2 * state.byKey.count)
            }
            let current = keys.map { key in
                state.byKey[key.name].flatMap { now - $0.lastFailure < Self.forgetAfterMilliseconds ? $0 : nil }
            }
            let lockedUntil = current.compactMap { $0?.lockedUntil }.max() ?? 0
            if lockedUntil > now { return Int((lockedUntil - now + 999) / 1000) }
            for (key, entry) in zip(keys, current) {
                var entry = entry ?? Entry(failures: 0, lockedUntil: 0, lastFailure: now)
                entry.failures += 1
                entry.lastFailure = now
                let excess = entry.failures - key.freeFailures
                if excess > 0 {
                    let seconds = excess > 20 ? maximumLockSeconds : min(maximumLockSeconds, Int64(1) << (excess - 1))
                    entry.lockedUntil = now + seconds * 1000
                }
                state.byKey[key.name] = entry
            }
            return nil
        }
    }

    /// An attempt of `keys` succeeded (or was no guess): its count is taken back, and a key named in
    /// `forgiving` forgets its failures altogether (an account whose password was given).
    func succeeded(_ keys: [Key], forgiving: Set<String> = []) {
        entries.withLock { state in
            for key in keys {
                if forgiving.contains(key.name) {
                    state.byKey[key.name] = nil
                } else if var entry = state.byKey[key.name] {
                    entry.failures = max(0, entry.failures - 1)
                    if entry.failures <= key.freeFailures { entry.lockedUntil = 0 }
                    // A key without failures left is forgotten at once.
                    state.byKey[key.name] = entry.failures == 0 ? nil : entry
                }
            }
        }
    }
}
