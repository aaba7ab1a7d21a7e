import StratusModel
import Synchronization

/// The last hour of this instance's activity in ten-second buckets, for the console's charts: fed by
/// the same calls that count ``ServerMetrics``, so the charts and `/metrics` agree.
final class ActivityTimeline: Sendable {
    /// What happened in one bucket.
    struct Bucket: Sendable, Equatable {
        /// When the bucket starts, in milliseconds since 1970.
        var start: Int64
        var requests = 0
        /// Requests answered with a 5xx status.
        var failures = 0
        var latencyMilliseconds = 0.0
        var recordsWritten = 0
        var notificationsSent = 0
        /// Summed time notifications waited in a device's queue before they were sent.
        var waitMilliseconds = 0.0
    }

    static let bucketMilliseconds: Int64 = 10_000
    static let bucketCount = 360
    private let buckets = Mutex<[Bucket]>([])

    /// Adds to the bucket of now.
    func add(_ update: (inout Bucket) -> Void) {
        let start = Timestamp.now.milliseconds / Self.bucketMilliseconds * Self.bucketMilliseconds
        buckets.withLock { buckets in
            if buckets.last?.start != start {
                buckets.append(Bucket(start: start))
                if buckets.count > Self.bucketCount { buckets.removeFirst(buckets.count - Self.bucketCount) }
            }
            update(&buckets[buckets.count - 1])
        }
    }

    /// The last hour, oldest first, one bucket per ten seconds (empty ones included).
    func lastHour() -> [Bucket] {
        let now = Timestamp.now.milliseconds / Self.bucketMilliseconds * Self.bucketMilliseconds
        let kept = buckets.withLock { Dictionary($0.map { ($0.start, $0) }, uniquingKeysWith: { $1 }) }
        return (0..<Self.bucketCount).reversed().map { back in
            let start = now - Int64(back) * Self.bucketMilliseconds
            return kept[start] ?? Bucket(start: start)
        }
    }
}
