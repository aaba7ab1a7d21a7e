import Foundation
import Synchronization

/// A clock that stands still until it is moved: `ServerClock(manual)` reads it.
public final class ManualClock: Sendable {
    private let now: Mutex<Int64>

    /// A clock at `milliseconds` since 1970 (the system's time by default).
    public init(milliseconds: Int64 = ServerClock.system.milliseconds) {
        now = Mutex(milliseconds)
    }

    /// Moves the clock forward.
    public func advance(bySeconds seconds: Double) {
        now.withLock { $0 += Int64(seconds * 1000) }
    }

    /// The clock's current time in milliseconds since 1970.
    public var milliseconds: Int64 { now.withLock { $0 } }

    /// A ``ServerClock`` that reads this clock.
    public var serverClock: ServerClock { ServerClock { self.milliseconds } }
}
