public import Foundation

/// A moment as the protocol writes it: whole milliseconds since 1970-01-01T00:00:00Z (the
/// `timestamp` of `created` and `modified`, expiry times, `TIMESTAMP` field values).
public struct Timestamp: Hashable, Comparable, Sendable {
    /// Milliseconds since 1970.
    public var milliseconds: Int64

    /// The moment `milliseconds` after 1970 began.
    public init(milliseconds: Int64) {
        self.milliseconds = milliseconds
    }

    /// The moment of `date`, to the millisecond below.
    public init(_ date: Date) {
        milliseconds = Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
    }

    /// The system clock's moment now. Code that can be tested with time moved by hand reads a clock
    /// that is passed in instead (the server's `ServerClock`).
    public static var now: Timestamp { Timestamp(Date()) }

    /// The moment as a `Date`.
    public var date: Date { Date(timeIntervalSince1970: Double(milliseconds) / 1000) }

    public static func < (lhs: Timestamp, rhs: Timestamp) -> Bool { lhs.milliseconds < rhs.milliseconds }
}
