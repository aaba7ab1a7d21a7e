import Hummingbird
import StratusModel
import Synchronization

/// Token buckets of a ``RateLimit``, one per key (a verified caller, a client address).
///
/// Buckets live in memory; once there are more than 10,000, those that have refilled are dropped,
/// which bounds the memory one caller can make the server hold by inventing keys.
final class RateLimiter: Sendable {
    private struct Bucket {
        var tokens: Double
        var updated: Int64
    }

    let limit: RateLimit
    private let clock: ServerClock
    private let buckets = Mutex<[String: Bucket]>([:])
    private static let pruneThreshold = 10_000

    init(limit: RateLimit, clock: ServerClock) {
        self.limit = limit
        self.clock = clock
    }

    /// Takes one request from `key`'s bucket; the seconds to wait when it is empty.
    func acquire(_ key: String) -> Double? {
        let now = clock.milliseconds
        return buckets.withLock { buckets in
            if buckets.count > Self.pruneThreshold {
                buckets = buckets.filter { refilled($0.value, now: now).tokens < Double(limit.burst) }
            }
            var bucket = refilled(buckets[key] ?? Bucket(tokens: Double(limit.burst), updated: now), now: now)
            defer { buckets[key] = bucket }
            guard bucket.tokens >= 1 else { return (1 - bucket.tokens) / limit.requestsPerSecond }
            bucket.tokens -= 1
            return nil
        }
    }

    private func refilled(_ bucket: Bucket, now: Int64) -> Bucket {
        let seconds = Double(max(0, now - bucket.updated)) / 1000
        return Bucket(tokens: min(Double(limit.burst), bucket.tokens + seconds * limit.requestsPerSecond), updated: now)
    }
}
