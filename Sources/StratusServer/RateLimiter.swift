import Hummingbird
import StratusModel
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
}

/// Throttles callers to a ``RateLimit``: a request over the limit fails with `429 THROTTLED`, a
/// `retryAfter` in the body and a `Retry-After` header saying when the next one will be accepted.
///
/// A caller is its web auth token when it sends one (a signed-in user of the app), otherwise its
/// API token (everyone using the app anonymously shares one bucket), otherwise its upload ticket.
/// Buckets live in memory; idle ones are dropped once they are full again.
final class RateLimiter: Sendable {
    private struct Bucket {
        var tokens: Double
        var updated: ContinuousClock.Instant
    }

    let limit: RateLimit
    private let buckets = Mutex<[String: Bucket]>([:])
    private static let pruneThreshold = 10_000

    init(limit: RateLimit) {
        self.limit = limit
    }

    /// Takes one request from `caller`'s bucket; the seconds to wait when it is empty.
    func acquire(caller: String, now: ContinuousClock.Instant = .now) -> Double? {
        buckets.withLock { buckets in
            if buckets.count > Self.pruneThreshold {
                buckets = buckets.filter { refilled($0.value, now: now).tokens < Double(limit.burst) }
            }
            var bucket = refilled(buckets[caller] ?? Bucket(tokens: Double(limit.burst), updated: now), now: now)
            defer { buckets[caller] = bucket }
            guard bucket.tokens >= 1 else { return (1 - bucket.tokens) / limit.requestsPerSecond }
            bucket.tokens -= 1
            return nil
        }
    }

    private func refilled(_ bucket: Bucket, now: ContinuousClock.Instant) -> Bucket {
        let elapsed = now - bucket.updated
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
        return Bucket(tokens: min(Double(limit.burst), bucket.tokens + seconds * limit.requestsPerSecond), updated: now)
    }
}

/// Applies a ``RateLimiter`` to every request that names a caller.
struct RateLimitMiddleware<Context: RequestContext>: RouterMiddleware {
    let limiter: RateLimiter

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        let caller = request.query("ckWebAuthToken").map { "user:" + $0 }
            ?? request.query("ckAPIToken").map { "app:" + $0 }
            ?? request.query("ticket").map { "upload:" + $0 }
        if let caller, let wait = limiter.acquire(caller: caller) {
            let limit = limiter.limit
            throw StratusError(
                .throttled,
                "too many requests: the limit is \(limit.requestsPerSecond.formatted()) per second with bursts of "
                    + "\(limit.burst) per caller; retry after the retryAfter seconds",
                retryAfter: max(1, Int(wait.rounded(.up))))
        }
        return try await next(request, context)
    }
}

extension Double {
    /// The number without a trailing `.0`: `2` rather than `2.0`, `0.5` as is.
    fileprivate func formatted() -> String {
        self == rounded() && abs(self) < 1e15 ? String(Int64(self)) : String(self)
    }
}
