package import StratusServer
import Synchronization

/// A clock for the SDK under test whose waits return at once and move a server's ``ManualClock``
/// by the time waited instead: a client that sits out a `retryAfter` finds the server that much
/// later, without the test spending the time.
package final class SteppingClock: Clock {
    /// A point on the server's clock.
    package struct Instant: InstantProtocol {
        let sinceEpoch: Duration

        package func advanced(by duration: Duration) -> Instant { Instant(sinceEpoch: sinceEpoch + duration) }
        package func duration(to other: Instant) -> Duration { other.sinceEpoch - sinceEpoch }
        package static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.sinceEpoch < rhs.sinceEpoch }
    }

    private let server: ManualClock
    private let waited = Mutex<Duration>(.zero)

    /// A clock that moves `server`.
    package init(moving server: ManualClock) {
        self.server = server
    }

    package var now: Instant { Instant(sinceEpoch: .milliseconds(server.milliseconds)) }
    package var minimumResolution: Duration { .milliseconds(1) }

    package func sleep(until deadline: Instant, tolerance: Duration?) async throws {
        try Task.checkCancellation()
        let wait = now.duration(to: deadline)
        if wait > .zero {
            let (seconds, attoseconds) = wait.components
            server.advance(bySeconds: Double(seconds) + Double(attoseconds) / 1e18)
            waited.withLock { $0 += wait }
        }
        await Task.yield()
    }

    /// The time all waits on this clock added up to.
    package var totalWaited: Duration { waited.withLock { $0 } }
}
