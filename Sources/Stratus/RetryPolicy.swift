/// How the SDK retries requests that fail for transient reasons: the network, `429 THROTTLED`,
/// `503 TRY_AGAIN_LATER`.
///
/// Waits grow exponentially from ``initialBackoff`` up to ``maxBackoff``, each a random time in
/// that range ("full jitter", so that many clients do not retry in step). When the server says how
/// long to wait (`retryAfter`, `Retry-After`), the SDK waits that long instead, plus up to a tenth
/// more. A request that may have changed data is repeated only when the server certainly did not
/// apply it: it was throttled, refused, or never reached the server. Otherwise the call fails with
/// ``CloudError/Code/serverResponseLost`` and the caller decides.
public struct RetryPolicy: Sendable, Hashable {
    /// Attempts per request, the first included (5 by default); 1 disables retries.
    public var maxAttempts: Int
    /// The range of the first wait (200 ms by default).
    public var initialBackoff: Duration
    /// The largest computed wait (30 s by default).
    public var maxBackoff: Duration
    /// The longest server-requested wait the SDK sits out (60 s by default); a longer `retryAfter`
    /// is returned to the caller in ``CloudError/retryAfterSeconds``.
    public var maxRetryAfter: Duration

    /// Creates a policy.
    public init(
        maxAttempts: Int = 5, initialBackoff: Duration = .milliseconds(200), maxBackoff: Duration = .seconds(30),
        maxRetryAfter: Duration = .seconds(60)
    ) {
        self.maxAttempts = max(1, maxAttempts)
        self.initialBackoff = initialBackoff
        self.maxBackoff = maxBackoff
        self.maxRetryAfter = maxRetryAfter
    }

    /// No retries: every failure reaches the caller at once.
    public static let never = RetryPolicy(maxAttempts: 1)

    /// How long to wait before attempt `attempt + 1` after attempt `attempt` (counting from 1)
    /// failed with `error`; `nil` when the policy gives up.
    func delay(afterAttempt attempt: Int, error: CloudError) -> Duration? {
        guard attempt < maxAttempts else { return nil }
        if let retryAfter = error.retryAfterSeconds {
            let wait = Duration.seconds(retryAfter)
            guard wait <= maxRetryAfter else { return nil }
            return wait + wait * Double.random(in: 0...0.1)
        }
        return backoff(afterFailures: attempt)
    }

    /// A random wait after `failures` failures in a row: up to ``initialBackoff`` doubled for each
    /// failure after the first, capped at ``maxBackoff`` ("full jitter").
    public func backoff(afterFailures failures: Int) -> Duration {
        let ceiling = min(maxBackoff, initialBackoff * (1 << min(max(failures, 1) - 1, 30)))
        return ceiling * Double.random(in: 0...1)
    }
}
