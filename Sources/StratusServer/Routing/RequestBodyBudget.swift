import Foundation
import CoreMetrics
import Hummingbird
import StratusModel
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The server-wide budget of request bytes held in memory at once. Each request that buffers a
/// body charges its bytes as they arrive (``RequestBodyReservation``); past the budget it is refused
/// with `503 TRY_AGAIN_LATER` and `Retry-After`, so that many large bodies at once cannot take the
/// server's memory, whatever each is under its own limit. The rest of a refused body is read and
/// dropped as it comes, never held, for at most ``BodyPaceHandler/lingerTime``; then the connection closes.
final class RequestBodyBudget: Sendable {
    /// Bytes that may be reserved at once.
    let capacity: Int
    /// Where the bytes reserved now are reported (`stratus_request_body_buffered_bytes`).
    private let level: CoreMetrics.Meter
    private let state = Mutex(State())

    private struct State {
        var reserved = 0
        /// Bytes released since the allocator last returned free memory to the system.
        var releasedSinceTrim = 0
        /// Whether a return of free memory is already waiting to run.
        var trimPending = false
    }

    /// After this many bytes released, and nothing reserved, free memory goes back to the system.
    static let trimThreshold = 8 << 20

    init(capacity: Int, level: CoreMetrics.Meter) {
        self.capacity = capacity
        self.level = level
    }

    /// Reserves `bytes` if they fit.
    func reserve(_ bytes: Int) -> Bool {
        state.withLock { state in
            guard state.reserved + bytes <= capacity else { return false }
            state.reserved += bytes
            level.set(state.reserved)
            return true
        }
    }

    /// Gives `bytes` back. When a burst is over (nothing reserved, much released), the allocator is
    /// asked to return its free memory, so that the server's resident size falls back to its
    /// baseline instead of staying at the burst's peak.
    func release(_ bytes: Int) {
        let trims = state.withLock { state in
            state.reserved -= bytes
            level.set(state.reserved)
            state.releasedSinceTrim += bytes
            guard state.reserved == 0, state.releasedSinceTrim >= Self.trimThreshold, !state.trimPending else { return false }
            state.trimPending = true
            return true
        }
        if trims { returnFreeMemory() }
    }

    #if canImport(Glibc)
    /// glibc's `malloc_trim`, which Swift's Glibc module does not export.
    private static let mallocTrim: (@convention(c) (Int) -> Int32)? = dlsym(nil, "malloc_trim").map {
        unsafeBitCast($0, to: (@convention(c) (Int) -> Int32).self)
    }
    #endif

    /// Returns the allocator's free memory to the system half a second later, once the burst's last
    /// answers are being written, and again two seconds after that, for what those answers held; each
    /// time only if nothing is reserved by then. On a thread of its own, since a trim after a large
    /// burst takes milliseconds no request should wait for. One such thread waits at a time.
    private func returnFreeMemory() {
        #if canImport(Glibc)
        Thread.detachNewThread { [self] in
            for wait in [0.5, 2.0] {
                Thread.sleep(forTimeInterval: wait)
                guard state.withLock({ $0.reserved == 0 }) else { break }
                if let mallocTrim = Self.mallocTrim { _ = mallocTrim(0) }
            }
            state.withLock { state in
                state.trimPending = false
                if state.reserved == 0 { state.releasedSinceTrim = 0 }
            }
        }
        #endif
    }
}

/// The bytes of the budget one request holds, from when it first buffers its body until it is
/// answered. ``Request/collectBody(limit:limitName:)``, the one place bodies are buffered, charges it.
final class RequestBodyReservation: Sendable {
    /// The reservation of the request being handled.
    @TaskLocal static var current: RequestBodyReservation?

    /// The reservation of the request being handled; reading a body outside a request (where no
    /// budget could be charged) is a programming error, answered `INTERNAL_ERROR`.
    static var required: RequestBodyReservation {
        get throws {
            guard let current else { throw StratusError(.internalError, "a request body was read outside the body budget") }
            return current
        }
    }

    private let budget: RequestBodyBudget
    private let held = Mutex(0)

    init(budget: RequestBodyBudget) {
        self.budget = budget
    }

    /// Makes sure this request holds at least `bytes`; `TRY_AGAIN_LATER` when the budget cannot
    /// give them.
    func reserve(atLeast bytes: Int) throws {
        let missing = held.withLock { max(0, bytes - $0) }
        guard missing > 0 else { return }
        guard budget.reserve(missing) else {
            throw StratusError(
                .tryAgainLater,
                "the server is holding as many request bodies as it may (\(budget.capacity) bytes); retry later",
                retryAfter: 1)
        }
        held.withLock { $0 += missing }
    }

    /// Gives everything back.
    func release() {
        let bytes = held.withLock { bytes in
            defer { bytes = 0 }
            return bytes
        }
        if bytes > 0 { budget.release(bytes) }
    }
}

/// Gives each request its ``RequestBodyReservation`` and releases it once the request is answered.
struct RequestBodyBudgetMiddleware: RouterMiddleware {
    typealias Context = StratusRequestContext

    let budget: RequestBodyBudget

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        let reservation = RequestBodyReservation(budget: budget)
        defer { reservation.release() }
        return try await RequestBodyReservation.$current.withValue(reservation) {
            try await next(request, context)
        }
    }
}
