/// The time the sync engine schedules by: the send debounce, retries after a backoff or the
/// server's `retryAfter`, catch-up fetches and reconnecting the push channel all wait on it. The
/// engine uses the system's clock (``SystemSyncClock``); a test hands it one it moves by hand, so
/// that a five-minute backoff takes no time.
public protocol SyncClock: Sendable {
    /// The current instant.
    var now: ContinuousClock.Instant { get }
    /// Returns once the clock has reached `deadline`; throws `CancellationError` when the calling
    /// task is cancelled first.
    func sleep(until deadline: ContinuousClock.Instant) async throws
}

extension SyncClock {
    /// Returns after `duration` on this clock.
    func sleep(for duration: Duration) async throws {
        try await sleep(until: now + duration)
    }
}

/// The system's clock, which does not stop while the machine sleeps (`ContinuousClock`).
public struct SystemSyncClock: SyncClock {
    /// A system clock.
    public init() {}

    /// The current instant.
    public var now: ContinuousClock.Instant { .now }

    /// Sleeps until `deadline`.
    public func sleep(until deadline: ContinuousClock.Instant) async throws {
        try await Task.sleep(until: deadline, clock: .continuous)
    }
}
