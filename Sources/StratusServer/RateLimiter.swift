import Hummingbird
public import StratusModel
import Synchronization

/// How many requests one caller may make: a token bucket of `burst` requests that refills at
/// `requestsPerSecond`.
public struct RateLimit: Sendable, Hashable {
    /// The sustained rate each caller may make requests at.
    public var requestsPerSecond: Double
    /// Requests a caller may make at once after a quiet period.
    public var burst: Int

    /// Creates a limit; `burst` defaults to one second's worth of requests (at least 1).
    public init(requestsPerSecond: Double, burst: Int? = nil) {
        self.requestsPerSecond = requestsPerSecond
        self.burst = burst ?? max(1, Int(requestsPerSecond.rounded(.up)))
    }

    /// The answer to a request over the limit: `429 THROTTLED` with `retryAfter`.
    func throttled(wait: Double, what: String) -> StratusError {
        StratusError(
            .throttled,
            "too many \(what): the limit is \(requestsPerSecond.formatted()) per second with bursts of \(burst); "
                + "retry after the retryAfter seconds",
            retryAfter: max(1, Int(wait.rounded(.up))))
    }
}

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

extension Double {
    /// The number without a trailing `.0`: `2` rather than `2.0`, `0.5` as is.
    fileprivate func formatted() -> String {
        self == rounded() && abs(self) < 1e15 ? String(Int64(self)) : String(self)
    }
}
