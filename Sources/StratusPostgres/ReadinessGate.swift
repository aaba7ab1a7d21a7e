import Synchronization

/// A gate that calls wait at until the storage is ready (its migrations applied), and that tells
/// them why when it never will be.
final class ReadinessGate: Sendable {
    private enum State {
        case waiting([CheckedContinuation<Void, any Error>])
        case open
        case failed(any Error)
    }

    private let state = Mutex(State.waiting([]))

    /// Returns once the gate is open; throws the error it failed with.
    func wait() async throws {
        switch state.withLock({ $0 }) {
        case .open: return
        case .failed(let error): throw error
        case .waiting: break
        }
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let resume: Result<Void, any Error>? = state.withLock { state in
                switch state {
                case .open: return .success(())
                case .failed(let error): return .failure(error)
                case .waiting(var waiters):
                    waiters.append(continuation)
                    state = .waiting(waiters)
                    return nil
                }
            }
            if let resume { continuation.resume(with: resume) }
        }
    }

    /// Opens the gate for every caller, those waiting and those to come.
    func open() {
        finish(.open).forEach { $0.resume() }
    }

    /// Fails the gate: every caller, waiting or to come, gets `error`.
    func fail(_ error: any Error) {
        finish(.failed(error)).forEach { $0.resume(throwing: error) }
    }

    private func finish(_ final: State) -> [CheckedContinuation<Void, any Error>] {
        state.withLock { state in
            guard case .waiting(let waiters) = state else { return [] }
            state = final
            return waiters
        }
    }
}
