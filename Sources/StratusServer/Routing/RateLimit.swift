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

    /// The answer to a request over the limit: `429 THROTTLED` with `retryAfter`.
    func throttled(wait: Double, what: String) -> StratusError {
        StratusError(
            .throttled,
            "too many \(what): the limit is \(requestsPerSecond.formatted()) per second with bursts of \(burst); "
                + "retry after the retryAfter seconds",
            retryAfter: max(1, Int(wait.rounded(.up))))
    }
}

extension Double {
    /// The number without a trailing `.0`: `2` rather than `2.0`, `0.5` as is.
    fileprivate func formatted() -> String {
        self == rounded() && abs(self) < 1e15 ? String(Int64(self)) : String(self)
    }
}
