import CoreMetrics
import NIOCore
import StratusModel
import Synchronization

/// A WebSocket connection that takes a device's notifications: the queue tells it when some are
/// waiting, and it takes them (``PushDevice/take(_:)``) when its socket can be written.
protocol PushSink: Sendable {
    /// Notifications are waiting.
    func notificationsWaiting()
    /// The connection is over: another connection took the device, or its session ended.
    func close()
}

/// One device's push queue: the notifications waiting for it, coalesced and bounded, and the
/// connection (a WebSocket, through a ``PushSink``, or a long poll) that takes them.
///
/// A newer notification replaces a waiting one of the same subscription and zone (a notification
/// only says "fetch"), so a slow or offline device holds at most one per subscription and zone.
/// When more than `limit` are waiting the oldest is dropped and the device is told it missed
/// notifications, so it fetches everything with its change tokens. Memory per device is bounded
/// either way.
final class PushDevice: Sendable {
    /// Who the device belongs to.
    struct Owner: Hashable, Sendable {
        var container: String
        var environment: ContainerEnvironment
        var userRecordName: String
    }

    /// A notification, encoded once for every device that receives it.
    struct Entry: Sendable {
        /// Which waiting notification a newer one replaces: the subscription (its ID is unique only
        /// within its database, so with the database) and the zone (with its owner).
        var key: String
        /// The WebSocket message, `{"type": "notification", …}`.
        var frame: ByteBuffer
        /// The notification alone, for long polls.
        var payload: PushNotificationDictionary
        /// When it was queued, in milliseconds since 1970 by the server's clock.
        var queuedAt: Int64
    }

    /// What a connection takes from the queue.
    enum Delivery: Sendable {
        /// Notifications, oldest first; `missed` when some were dropped before them.
        case batch([Entry], missed: Bool)
        /// The connection is over: another one took the device, or its session ended.
        case closed
    }

    private struct State {
        var order: [String] = []
        var entries: [String: Entry] = [:]
        var missed: Bool
        var connection: UInt64?
        var nextConnection: UInt64 = 1
        var sessionHash: String?
        var waiter: (connection: UInt64, continuation: CheckedContinuation<Delivery, Never>)?
        var sink: (any PushSink)?
        var lastSeen: Int64
    }

    let tokenHash: String
    let owner: Owner
    let deviceID: String?
    let limit: Int
    private let clock: ServerClock
    private let metrics: ServerMetrics
    private let state: Mutex<State>

    /// A device new to this process: the server cannot vouch for what it missed before.
    init(tokenHash: String, owner: Owner, deviceID: String?, limit: Int, clock: ServerClock, metrics: ServerMetrics) {
        self.clock = clock
        self.metrics = metrics
        self.tokenHash = tokenHash
        self.owner = owner
        self.deviceID = deviceID
        self.limit = limit
        self.state = Mutex(State(missed: true, lastSeen: clock.milliseconds))
    }

    /// Starts a connection, ending any earlier one of this device; a WebSocket connection gives its
    /// `sink`. Returns the connection's ID and whether notifications may have been missed since the
    /// device was last connected.
    func attach(sessionHash: String?, sink: (any PushSink)? = nil) -> (connection: UInt64, missedNotifications: Bool) {
        let (connection, missed, replaced) = state.withLock { state in
            let connection = state.nextConnection
            state.nextConnection += 1
            state.connection = connection
            state.sessionHash = sessionHash
            let replaced = Self.release(&state)
            state.sink = sink
            let missed = state.missed
            state.missed = false
            return (connection, missed, replaced)
        }
        replaced()
        return (connection, missed)
    }

    /// Ends a connection; the device keeps its queue while it is away.
    func detach(_ connection: UInt64) {
        state.withLock { state -> () -> Void in
            guard state.connection == connection else { return {} }
            state.connection = nil
            state.lastSeen = clock.milliseconds
            state.sink = nil
            return Self.release(&state)
        }()
    }

    /// Ends the current connection; with `sessionHash`, only if it signed in with that session.
    func disconnect(sessionHash: String? = nil) {
        state.withLock { state -> () -> Void in
            guard state.connection != nil, sessionHash == nil || state.sessionHash == sessionHash else { return {} }
            state.connection = nil
            state.lastSeen = clock.milliseconds
            return Self.release(&state)
        }()
    }

    /// Takes the connection's waiter and sink out of `state`; the returned closure (run outside the
    /// lock) tells them the connection is over.
    private static func release(_ state: inout State) -> () -> Void {
        let waiter = state.waiter.take()?.continuation
        let sink = state.sink.take()
        return {
            waiter?.resume(returning: .closed)
            sink?.close()
        }
    }

    /// The waiting notifications, without waiting: an empty batch when there are none, `.closed`
    /// when `connection` is over. For WebSocket connections, when their sink was told.
    func take(_ connection: UInt64) -> Delivery {
        state.withLock { state in
            guard state.connection == connection else { return .closed }
            return Self.takeAll(&state)
        }
    }

    /// Puts notifications a poll took but did not answer back at the front of the queue, before
    /// any that arrived meanwhile (a bare poll answers one at a time).
    func putBack(_ entries: [Entry]) {
        guard !entries.isEmpty else { return }
        state.withLock { state in
            let returned = entries.filter { state.entries[$0.key] == nil }
            for entry in returned { state.entries[entry.key] = entry }
            state.order.insert(contentsOf: returned.map(\.key), at: 0)
        }
    }

    /// What the console shows of a device.
    struct Snapshot: Sendable {
        var owner: Owner
        var deviceID: String?
        var connected: Bool
        /// Notifications waiting in its queue, oldest first.
        var waiting: [PushNotificationDictionary]
        /// When each of `waiting` was queued, in milliseconds since 1970.
        var waitingSince: [Int64]
        /// Whether it will be told it may have missed notifications.
        var missed: Bool
        /// When a connection last took or left its queue, in milliseconds since 1970.
        var lastSeen: Int64
    }

    var snapshot: Snapshot {
        state.withLock { state in
            let waiting = state.order.compactMap { state.entries[$0] }
            return Snapshot(
                owner: owner, deviceID: deviceID, connected: state.connection != nil, waiting: waiting.map(\.payload),
                waitingSince: waiting.map(\.queuedAt), missed: state.missed, lastSeen: state.lastSeen)
        }
    }

    /// Whether a connection holds the device now.
    var isConnected: Bool {
        state.withLock { $0.connection != nil }
    }

    /// Whether no connection has taken the queue since `instant`.
    func isAway(since milliseconds: Int64) -> Bool {
        state.withLock { $0.connection == nil && $0.lastSeen < milliseconds }
    }

    /// Queues notifications, each replacing a waiting one with the same key, and hands the queue to
    /// a waiting connection. With `missed`, the device is also told it may have missed some.
    func enqueue(_ newEntries: [Entry], missed: Bool = false) {
        var dropped = 0
        let handOver = state.withLock { state -> HandOver? in
            if missed { state.missed = true }
            for entry in newEntries {
                if state.entries.updateValue(entry, forKey: entry.key) != nil {
                    state.order.removeAll { $0 == entry.key }
                }
                state.order.append(entry.key)
                if state.order.count > limit {
                    state.entries[state.order.removeFirst()] = nil
                    state.missed = true
                    dropped += 1
                }
            }
            if let waiter = state.waiter.take() { return .waiter(waiter.continuation, Self.takeAll(&state)) }
            return state.sink.map(HandOver.sink)
        }
        metrics.notificationsQueued.increment(by: newEntries.count)
        if dropped > 0 { metrics.notificationsDropped.increment(by: dropped) }
        switch handOver {
        case .waiter(let continuation, let delivery)?: continuation.resume(returning: delivery)
        case .sink(let sink)?: sink.notificationsWaiting()
        case nil: break
        }
    }

    /// Who takes newly queued notifications.
    private enum HandOver {
        case waiter(CheckedContinuation<Delivery, Never>, Delivery)
        case sink(any PushSink)
    }

    /// The waiting notifications, or the next ones to arrive; `.closed` when `connection` is over
    /// or the task is cancelled.
    func next(_ connection: UInt64) async -> Delivery {
        let id = connection
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let ready = state.withLock { state -> Delivery? in
                    guard state.connection == id, !Task.isCancelled else { return .closed }
                    guard state.order.isEmpty, !state.missed else { return Self.takeAll(&state) }
                    state.waiter = (id, continuation)
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<Delivery, Never>? in
                guard state.waiter?.connection == id else { return nil }
                return state.waiter.take()?.continuation
            }
            waiter?.resume(returning: .closed)
        }
    }

    /// Like ``next(_:)``, but answers an empty batch after `timeout` (a long poll).
    func poll(_ connection: UInt64, timeout: Duration) async -> Delivery {
        // Without a wait there is nothing to race: a timer ending first would cancel the take.
        guard timeout > .zero else { return take(connection) }
        return await withTaskGroup(of: Delivery?.self) { group in
            group.addTask { await self.next(connection) }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return nil
            }
            // Whichever ends first cancels the other; a batch taken meanwhile is still answered.
            var result = Delivery.batch([], missed: false)
            while let finished = await group.next() {
                group.cancelAll()
                if case .batch? = finished { result = finished! }
            }
            return result
        }
    }

    private static func takeAll(_ state: inout State) -> Delivery {
        let entries = state.order.compactMap { state.entries[$0] }
        let missed = state.missed
        state.order = []
        state.entries = [:]
        state.missed = false
        return .batch(entries, missed: missed)
    }
}
