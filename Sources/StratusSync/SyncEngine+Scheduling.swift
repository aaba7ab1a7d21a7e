import Foundation
import Logging
import Stratus
import Synchronization

extension SyncEngine {
    /// What an engine that syncs automatically will do by itself, and when.
    struct Schedule: Sendable {
        let catchUpInterval: Duration
        /// A notification or a gap asks for a fetch.
        var fetchRequested: Bool
        /// Changes were added, or a send failed for a passing reason.
        var sendRequested: Bool
        /// Changes were added that no send will report soon.
        var stateUpdateRequested = false
        /// Failures in a row, for the backoff.
        var failures = 0
        /// No scheduled fetch or send before this: the server asked to wait, or a backoff runs.
        var notBefore: ContinuousClock.Instant?
        /// When to fetch in case a notification was lost.
        var nextCatchUp: ContinuousClock.Instant

        /// An engine that syncs by itself fetches and sends as soon as it starts (at `now`).
        init(catchUpInterval: Duration, now: ContinuousClock.Instant) {
            self.catchUpInterval = catchUpInterval
            fetchRequested = true
            sendRequested = true
            nextCatchUp = now + catchUpInterval
        }

        /// What to do at `now`, or until when to wait: a pure function of the schedule and the time.
        /// State updates are never held back; fetches and sends wait out `notBefore`; a fetch is due
        /// when asked for or when the catch-up interval has passed.
        mutating func next(at now: ContinuousClock.Instant) -> ScheduledStep {
            var work: ScheduledWork = []
            if stateUpdateRequested {
                work.insert(.stateUpdate)
                stateUpdateRequested = false
            }
            if let notBefore, now < notBefore {
                return work.isEmpty ? .wait(until: notBefore) : .run(work)
            }
            notBefore = nil
            if fetchRequested || now >= nextCatchUp {
                work.insert(.fetch)
                fetchRequested = false
                nextCatchUp = now + catchUpInterval
            }
            if sendRequested {
                work.insert(.send)
                sendRequested = false
            }
            return work.isEmpty ? .wait(until: nextCatchUp) : .run(work)
        }

        /// An operation failed for a passing reason at `now`: fetches and sends wait `wait`, and
        /// the ones asked for run then.
        mutating func retry(after wait: Duration, at now: ContinuousClock.Instant, fetch: Bool, send: Bool) {
            failures += 1
            let retry = now + wait
            notBefore = max(notBefore ?? retry, retry)
            if fetch { fetchRequested = true }
            if send { sendRequested = true }
        }
    }

    /// What the scheduler does next.
    enum ScheduledStep: Sendable {
        case wait(until: ContinuousClock.Instant?)
        case run(ScheduledWork)
    }

    /// Operations the scheduler runs together.
    struct ScheduledWork: OptionSet, Sendable {
        let rawValue: Int
        static let fetch = ScheduledWork(rawValue: 1)
        static let send = ScheduledWork(rawValue: 2)
        static let stateUpdate = ScheduledWork(rawValue: 4)
    }

    /// The app added pending changes: send them, and hand over the state in case the send cannot run.
    func changesAdded() {
        guard settings.automaticallySync else { return }
        schedule.withLock { schedule in
            schedule.stateUpdateRequested = true
            schedule.sendRequested = true
        }
        wakeup.signal()
    }

    /// Changes stayed pending that the next send can take.
    func sendAgainSoon() {
        guard settings.automaticallySync else { return }
        schedule.withLock { $0.sendRequested = true }
        wakeup.signal()
    }

    /// The server pushed a notification of this database, or notifications may have been lost.
    func fetchRequested() {
        schedule.withLock { $0.fetchRequested = true }
        wakeup.signal()
    }

    /// An operation failed for a passing reason: the scheduler tries again after the server's
    /// `retryAfter`, or a backoff that grows with each failure in a row. Returns when.
    @discardableResult
    func scheduleRetry(after error: CloudError, fetch: Bool = false, send: Bool = false) -> Date {
        let backoff = transport.retryPolicy.backoff(
            afterFailures: schedule.withLock { $0.failures + 1 })
        let wait = max(error.retryAfterSeconds.map { Duration.seconds($0) } ?? .zero, backoff)
        schedule.withLock { $0.retry(after: wait, at: clock.now, fetch: fetch, send: send) }
        wakeup.signal()
        let seconds = Double(wait.components.seconds) + Double(wait.components.attoseconds) * 1e-18
        return Date(timeIntervalSinceNow: seconds)
    }

    /// A send failed for a passing reason that no settled change asked a retry for (the server's
    /// limits unread, the network gone before the first batch): it runs again after the backoff.
    func retrySendIfNotAsked(after error: CloudError) {
        guard !schedule.withLock({ $0.sendRequested }) else { return }
        scheduleRetry(after: error, send: true)
    }

    /// A request went through: the backoff starts over.
    func noteSuccess() {
        schedule.withLock { $0.failures = 0 }
    }

    /// A fetch ended: the next catch-up is a full interval away.
    func noteFetched() {
        let now = clock.now
        schedule.withLock { $0.nextCatchUp = now + $0.catchUpInterval }
    }

    /// What to do now, or until when to wait.
    func nextScheduledWork() -> ScheduledStep {
        let now = clock.now
        return schedule.withLock { $0.next(at: now) }
    }

    /// Runs what the scheduler decided, as one operation in line with the app's.
    func runScheduled(_ work: ScheduledWork) async {
        if work.contains(.send), settings.sendDebounce > .zero {
            try? await clock.sleep(for: settings.sendDebounce)
        }
        do {
            try await operations.run { [self] in
                guard let delegate else { return }
                if work.contains(.fetch) {
                    do {
                        try await fetch(FetchChangesContext(reason: .scheduled, options: FetchChangesOptions()))
                    } catch let error as CloudError where error.keepsChangesPending && work.contains(.send) {
                        // The send this run was to make goes with the fetch's retry.
                        sendAgainSoon()
                        throw error
                    }
                }
                if work.contains(.send) {
                    try await send(SendChangesContext(reason: .scheduled, options: SendChangesOptions()))
                } else if work.contains(.stateUpdate) {
                    await emitStateUpdate(to: delegate)
                }
            }
        } catch let error as CloudError where error.code == .notAuthenticated {
            logger.debug("sync engine: nobody is signed in; waiting", metadata: ["stratus.error": "\(error)"])
        } catch is CancellationError {
        } catch {
            logger.info("sync engine: a scheduled sync failed", metadata: ["stratus.error": "\(error)"])
        }
    }

    /// Turns the server's notifications of `database` into fetches, reconnecting when the channel ends.
    static func listenForNotifications(
        _ transport: any SyncTransport, clock: any SyncClock, engine: Weak<SyncEngine>
    ) async {
        var failures = 0
        while !Task.isCancelled {
            do {
                for try await event in transport.notifications() {
                    failures = 0
                    guard let engine = engine.value else { return }
                    switch event {
                    case .notification(let notification) where notification.databaseScope == transport.databaseScope:
                        engine.fetchRequested()
                    case .notification:
                        break
                    case .missedNotifications:
                        engine.fetchRequested()
                    }
                }
            } catch {
                engine.value?.logger.debug("sync engine: the push channel ended", metadata: ["stratus.error": "\(error)"])
            }
            failures += 1
            let backoff = transport.retryPolicy.backoff(afterFailures: failures)
            do { try await clock.sleep(for: max(backoff, .milliseconds(100))) } catch { return }
        }
    }
}

/// A weak reference, to hand a background task its engine without keeping the engine alive.
struct Weak<Object: AnyObject & Sendable>: Sendable {
    weak var value: Object?

    init(_ value: Object) {
        self.value = value
    }
}

/// Wakes the scheduler when there is work, or at a deadline.
final class Wakeup: Sendable {
    private struct Waiting {
        var signaled = false
        var waiter: CheckedContinuation<Void, Never>?
    }

    private let waiting = Mutex(Waiting())

    /// Wakes the waiting scheduler, or the next wait if none waits.
    func signal() {
        let waiter = waiting.withLock { waiting -> CheckedContinuation<Void, Never>? in
            guard let waiter = waiting.waiter else {
                waiting.signaled = true
                return nil
            }
            waiting.waiter = nil
            return waiter
        }
        waiter?.resume()
    }

    /// Waits for a signal, `deadline` on `clock`, or cancellation.
    func wait(until deadline: ContinuousClock.Instant?, on clock: any SyncClock) async {
        let timer = deadline.map { deadline in
            Task { [self] in
                do { try await clock.sleep(until: deadline) } catch { return }
                signal()
            }
        }
        defer { timer?.cancel() }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let now = waiting.withLock { waiting in
                    if waiting.signaled {
                        waiting.signaled = false
                        return true
                    }
                    waiting.waiter = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            signal()
        }
    }
}

/// Runs the engine's operations one at a time, in the order they were asked for, so that the
/// delegate sees one operation's events at a time.
final class SerialOperations: Sendable {
    private struct Line {
        var busy = false
        var waiters: [CheckedContinuation<Void, Never>] = []
        var cancellers: [Int: @Sendable () -> Void] = [:]
        var nextID = 0
    }

    private let line = Mutex(Line())

    /// Runs `operation` once those asked for before it ended; cancelling the caller cancels it.
    func run<Value: Sendable>(_ operation: @escaping @Sendable () async throws -> Value) async throws -> Value {
        let task = Task { [self] in
            await acquire()
            defer { release() }
            try Task.checkCancellation()
            return try await operation()
        }
        let id = line.withLock { line in
            line.nextID += 1
            line.cancellers[line.nextID] = { task.cancel() }
            return line.nextID
        }
        defer { line.withLock { _ = $0.cancellers.removeValue(forKey: id) } }
        return try await withTaskCancellationHandler { try await task.value } onCancel: { task.cancel() }
    }

    /// Cancels every operation running or waiting, and returns once they ended.
    func cancelAll() async {
        for cancel in line.withLock({ Array($0.cancellers.values) }) { cancel() }
        await acquire()
        release()
    }

    private func acquire() async {
        await withCheckedContinuation { continuation in
            let free = line.withLock { line in
                guard line.busy else {
                    line.busy = true
                    return true
                }
                line.waiters.append(continuation)
                return false
            }
            if free { continuation.resume() }
        }
    }

    private func release() {
        let next = line.withLock { line -> CheckedContinuation<Void, Never>? in
            guard !line.waiters.isEmpty else {
                line.busy = false
                return nil
            }
            return line.waiters.removeFirst()
        }
        next?.resume()
    }
}
