package import StratusSync
import Synchronization

/// A ``SyncClock`` that moves only when the test says: a sync engine on it waits out a backoff,
/// a `retryAfter` or its catch-up interval when the test calls ``advance(by:)``, in no time.
package final class ManualSyncClock: SyncClock {
    private struct State {
        var now: ContinuousClock.Instant
        var sleepers: [Int: (deadline: ContinuousClock.Instant, continuation: CheckedContinuation<Void, any Error>)] = [:]
        var nextID = 0
    }

    private let state: Mutex<State>

    /// A clock that starts at the system clock's present.
    package init() {
        state = Mutex(State(now: .now))
    }

    package var now: ContinuousClock.Instant { state.withLock { $0.now } }

    /// The earliest deadline someone sleeps until, if anyone does.
    package var nextDeadline: ContinuousClock.Instant? {
        state.withLock { $0.sleepers.values.map(\.deadline).min() }
    }

    package func sleep(until deadline: ContinuousClock.Instant) async throws {
        let id = state.withLock { state in
            defer { state.nextID += 1 }
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let due = state.withLock { state -> Bool in
                    if deadline <= state.now || Task.isCancelled { return true }
                    state.sleepers[id] = (deadline, continuation)
                    return false
                }
                if due {
                    if Task.isCancelled { continuation.resume(throwing: CancellationError()) } else { continuation.resume() }
                }
            }
        } onCancel: {
            state.withLock { $0.sleepers.removeValue(forKey: id) }?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Moves the clock forward by `duration`, waking everyone whose deadline it reaches.
    package func advance(by duration: Duration) {
        let woken = state.withLock { state in
            state.now = state.now + duration
            let due = state.sleepers.filter { $0.value.deadline <= state.now }
            for id in due.keys { state.sleepers[id] = nil }
            return due.values.map(\.continuation)
        }
        for continuation in woken { continuation.resume() }
    }
}
