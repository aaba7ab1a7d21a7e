import Foundation
import StratusModel
import Synchronization

/// The time as the server reads it, in milliseconds since 1970: the system's clock in production,
/// a clock moved by hand in tests (``ManualClock``), so that tests of throttling and expiry move
/// time instead of sleeping.
public struct ServerClock: Sendable {
    private let read: @Sendable () -> Int64

    /// A clock that reads `read` for the current time in milliseconds since 1970.
    public init(_ read: @escaping @Sendable () -> Int64) {
        self.read = read
    }

    /// The system's wall clock.
    public static let system = ServerClock { Timestamp.now.milliseconds }

    /// The current time in milliseconds since 1970.
    public var milliseconds: Int64 { read() }
}
