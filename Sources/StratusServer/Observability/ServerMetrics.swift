public import CoreMetrics
import Foundation
public import Prometheus
import StratusModel

/// What one server counts and measures, through swift-metrics into a Prometheus registry that
/// `GET /metrics` writes out (docs/deploy.md lists every series).
///
/// The handles are made with this server's own factory rather than the process-wide
/// `MetricsSystem`, so that several servers in one process (tests, embedding apps) keep separate
/// figures. `stratus serve` bootstraps `MetricsSystem` with the same registry, so that libraries'
/// own metrics appear beside these.
public final class ServerMetrics: Sendable {
    /// The registry `GET /metrics` writes out.
    public let registry: PrometheusCollectorRegistry
    /// swift-metrics' factory over ``registry``.
    public let factory: PrometheusMetricsFactory

    /// Records saved or deleted by `records/modify` (counted by ``recordsWritten(_:)``).
    private let recordsWrittenCounter: CoreMetrics.Counter
    /// Notifications put on a device's queue.
    let notificationsQueued: CoreMetrics.Counter
    /// Notifications written to a device (counted by ``notificationsSent(queuedAt:now:)``).
    private let notificationsSentCounter: CoreMetrics.Counter
    /// Notifications dropped from a full queue (the device is told it missed some).
    let notificationsDropped: CoreMetrics.Counter
    /// Conflicts (`CONFLICT`: a save whose change tag was stale), throttles (`THROTTLED`, and the
    /// body budget's `TRY_AGAIN_LATER`) and sync-token expiries (`CHANGE_TOKEN_EXPIRED`, of any
    /// feed), whether the whole request or one item of it was refused (counted by ``refused(_:)``).
    private let conflicts: CoreMetrics.Counter
    private let throttles: CoreMetrics.Counter
    private let syncTokenExpiries: CoreMetrics.Counter
    /// Asset bytes uploaded.
    let assetBytesIn: CoreMetrics.Counter
    /// Asset bytes downloaded.
    let assetBytesOut: CoreMetrics.Counter
    /// How long storage takes to apply a `records/modify` batch, its transaction included.
    let storageWriteTime: CoreMetrics.Timer
    /// How late a message from another instance arrives (sender's clock to receiver's clock).
    let instanceBusLag: CoreMetrics.Timer
    /// Request body bytes held in memory now (``RequestBodyBudget``).
    let bufferedRequestBytes: CoreMetrics.Meter
    /// Requests whose bodies are arriving now (``ConnectionAdmission``).
    let requestBodiesArriving: CoreMetrics.Meter
    /// Devices with a live push connection, and devices the server keeps a queue for.
    let pushDevicesConnected: CoreMetrics.Meter
    let pushDevicesQueued: CoreMetrics.Meter
    /// How long notifications wait in a device's queue before they are sent.
    let notificationWait: CoreMetrics.Timer
    /// The last hour in ten-second buckets, for the console's charts.
    let timeline = ActivityTimeline()
    /// PostgreSQL connections leased from the pool now, and the pool's size.
    let storageConnectionsInUse: CoreMetrics.Meter
    let storageConnectionsMax: CoreMetrics.Meter

    /// A server's metrics in `registry` (a new one by default).
    public init(registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry()) {
        self.registry = registry
        var factory = PrometheusMetricsFactory(registry: registry)
        // Storage writes and bus messages take milliseconds; requests up to the long poll's minute.
        let fast: [Duration] = [
            .microseconds(250), .microseconds(500), .milliseconds(1), .milliseconds(2), .milliseconds(5),
            .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250),
            .seconds(1),
        ]
        factory.durationHistogramBuckets = [
            Self.requestDuration: [
                .milliseconds(1), .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50),
                .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .milliseconds(2500),
                .seconds(10), .seconds(60),
            ],
            "stratus_storage_write_seconds": fast, "stratus_storage_read_seconds": fast, "stratus_instance_bus_lag_seconds": fast,
            "stratus_notification_wait_seconds": fast,
            Self.pushSendDuration: [
                .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
                .milliseconds(250), .milliseconds(500), .seconds(1), .milliseconds(2500), .seconds(10), .seconds(30),
            ],
        ]
        self.factory = factory
        recordsWrittenCounter = CoreMetrics.Counter(label: "stratus_records_written_total", factory: factory)
        notificationsQueued = CoreMetrics.Counter(label: "stratus_notifications_queued_total", factory: factory)
        notificationsSentCounter = CoreMetrics.Counter(label: "stratus_notifications_sent_total", factory: factory)
        notificationsDropped = CoreMetrics.Counter(label: "stratus_notifications_dropped_total", factory: factory)
        conflicts = CoreMetrics.Counter(label: "stratus_conflicts_total", factory: factory)
        throttles = CoreMetrics.Counter(label: "stratus_throttles_total", factory: factory)
        syncTokenExpiries = CoreMetrics.Counter(label: "stratus_sync_token_expiries_total", factory: factory)
        assetBytesIn = CoreMetrics.Counter(label: "stratus_asset_bytes_in_total", factory: factory)
        assetBytesOut = CoreMetrics.Counter(label: "stratus_asset_bytes_out_total", factory: factory)
        storageWriteTime = CoreMetrics.Timer(label: "stratus_storage_write_seconds", factory: factory)
        instanceBusLag = CoreMetrics.Timer(label: "stratus_instance_bus_lag_seconds", factory: factory)
        notificationWait = CoreMetrics.Timer(label: "stratus_notification_wait_seconds", factory: factory)
        bufferedRequestBytes = CoreMetrics.Meter(label: "stratus_request_body_buffered_bytes", factory: factory)
        requestBodiesArriving = CoreMetrics.Meter(label: "stratus_request_bodies_arriving", factory: factory)
        pushDevicesConnected = CoreMetrics.Meter(label: "stratus_push_devices_connected", factory: factory)
        pushDevicesQueued = CoreMetrics.Meter(label: "stratus_push_devices", factory: factory)
        storageConnectionsInUse = CoreMetrics.Meter(label: "stratus_storage_connections_in_use", factory: factory)
        storageConnectionsMax = CoreMetrics.Meter(label: "stratus_storage_connections_max", factory: factory)
    }

    static let requestDuration = "stratus_http_request_duration_seconds"
    static let pushSendDuration = "stratus_device_push_duration_seconds"

    /// Counts a device push a push service answered (APNs, FCM, Web Push: `channel`), by outcome
    /// (`delivered`, `gone`, `retry`, `refused-credentials`, `failed`) and reason, with how long the
    /// service took.
    func devicePushAnswered(channel: String, outcome: String, reason: String?, duration: Duration) {
        CoreMetrics.Counter(
            label: "stratus_device_pushes_total",
            dimensions: [("channel", channel), ("outcome", outcome), ("reason", reason ?? "")], factory: factory
        ).increment()
        CoreMetrics.Timer(label: Self.pushSendDuration, dimensions: [("channel", channel)], factory: factory)
            .recordInterval(duration)
    }

    /// Counts a device push given up on, by why: `retries-exhausted`, `refused-credentials` (its
    /// channel rests), `unconfigured`, `overloaded` (the send queue was full), `failed`.
    func devicePushDropped(channel: String, reason: String) {
        CoreMetrics.Counter(
            label: "stratus_device_pushes_dropped_total", dimensions: [("channel", channel), ("reason", reason)],
            factory: factory
        ).increment()
    }

    /// Counts an answered request: by route pattern, method and status, its duration by route, and
    /// the `serverErrorCode` of a refused one.
    func requestAnswered(endpoint: String, method: String, status: Int, errorCode: String?, duration: Duration) {
        CoreMetrics.Counter(
            label: "stratus_http_requests_total",
            dimensions: [("endpoint", endpoint), ("method", method), ("status", String(status))], factory: factory
        ).increment()
        CoreMetrics.Timer(label: Self.requestDuration, dimensions: [("endpoint", endpoint)], factory: factory).recordInterval(duration)
        if let errorCode {
            CoreMetrics.Counter(label: "stratus_errors_total", dimensions: [("code", errorCode)], factory: factory).increment()
            refused(errorCode)
        }
        timeline.add { bucket in
            bucket.requests += 1
            if status >= 500 { bucket.failures += 1 }
            bucket.latencyMilliseconds += duration.milliseconds
        }
    }

    /// Counts a connection or request the server refused or closed to protect itself, by why
    /// (``ConnectionAdmission/Shedding``): past a cap, to make room, or for a body too slow.
    func connectionShed(_ reason: String) {
        CoreMetrics.Counter(label: "stratus_connections_shed_total", dimensions: [("reason", reason)], factory: factory)
            .increment()
    }

    /// Counts records a `records/modify` saved or deleted.
    func recordsWritten(_ count: Int) {
        guard count > 0 else { return }
        recordsWrittenCounter.increment(by: count)
        timeline.add { $0.recordsWritten += count }
    }

    /// Counts notifications written to a device, and how long each waited in its queue (`now` and
    /// their `queuedAt` by the server's clock, in milliseconds).
    func notificationsSent(queuedAt: [Int64], now: Int64) {
        guard !queuedAt.isEmpty else { return }
        notificationsSentCounter.increment(by: queuedAt.count)
        var waited = 0.0
        for queued in queuedAt {
            let wait = max(0, now - queued)
            notificationWait.recordMilliseconds(wait)
            waited += Double(wait)
        }
        timeline.add { bucket in
            bucket.notificationsSent += queuedAt.count
            bucket.waitMilliseconds += waited
        }
    }

    /// Counts one item of an answer that failed alone (a record's `CONFLICT`, a zone's
    /// `CHANGE_TOKEN_EXPIRED`, …), by its code.
    func itemFailed(_ code: String) {
        CoreMetrics.Counter(label: "stratus_item_errors_total", dimensions: [("code", code)], factory: factory).increment()
        refused(code)
    }

    /// Counts a refusal, of a request or of one item, in the series of its kind when it has one.
    private func refused(_ code: String) {
        switch code {
        case ServerErrorCode.conflict.rawValue: conflicts.increment()
        case ServerErrorCode.throttled.rawValue, ServerErrorCode.tryAgainLater.rawValue: throttles.increment()
        case ServerErrorCode.changeTokenExpired.rawValue: syncTokenExpiries.increment()
        default: break
        }
    }

    /// Counts records answered to clients, by how they were read: `lookup`, `query` or `changes`.
    func recordsRead(_ count: Int, via source: String) {
        guard count > 0 else { return }
        CoreMetrics.Counter(label: "stratus_records_read_total", dimensions: [("source", source)], factory: factory)
            .increment(by: count)
    }

    /// Counts a change-feed page served: `zone` (`records/changes`, `changes/zone`) or `database`
    /// (`changes/database`, `zones/changes`).
    func feedPageServed(_ feed: String) {
        CoreMetrics.Counter(label: "stratus_change_feed_pages_total", dimensions: [("feed", feed)], factory: factory).increment()
    }

    /// Measures `body` as a storage read: `lookup`, `query` or `changes` (a zone's feed page).
    func timingStorageRead<T>(_ source: String, _ body: () async throws -> T) async rethrows -> T {
        let start = ContinuousClock.now
        defer {
            CoreMetrics.Timer(label: "stratus_storage_read_seconds", dimensions: [("source", source)], factory: factory)
                .recordInterval(ContinuousClock.now - start)
        }
        return try await body()
    }

    /// Measures `body` as a storage write.
    func timingStorageWrite<T>(_ body: () async throws -> T) async rethrows -> T {
        let start = ContinuousClock.now
        defer { storageWriteTime.recordInterval(ContinuousClock.now - start) }
        return try await body()
    }

    /// The registry in Prometheus's text exposition format.
    func exposition() -> [UInt8] {
        registry.emitToBuffer()
    }
}

extension Duration {
    /// The duration in milliseconds.
    var milliseconds: Double {
        Double(components.seconds) * 1_000 + Double(components.attoseconds) / 1e15
    }
}

extension CoreMetrics.Timer {
    /// Records a `Duration`.
    func recordInterval(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        recordNanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}
