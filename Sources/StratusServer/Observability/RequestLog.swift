import Foundation
import StratusModel
import Synchronization

/// One answered request, as the request log and the console show it. Credentials never appear:
/// the path is kept without its query string, and the caller as what the server verified.
struct RequestLogEntry: Sendable, Equatable {
    /// The request's ID: the `X-Stratus-Request-ID` header of its answer, and the `uuid` of its error.
    var id: String
    /// When it was answered, in milliseconds since 1970 (the server's clock).
    var time: Int64
    var method: String
    /// The path without its query string.
    var path: String
    /// The route pattern it matched (`/database/1/{container}/…`), or `NotFound`.
    var endpoint: String
    var status: Int
    /// The `serverErrorCode` and reason of a refused request.
    var errorCode: String?
    var reason: String?
    var milliseconds: Double
    var address: String
    var container: String?
    var userRecordName: String?
    var deviceID: String?
}

/// The last answered requests of this instance, newest last, in a ring of fixed size: the console's
/// live log and its lookup by request ID read it. Each instance keeps its own.
final class RequestLog: Sendable {
    /// How many requests are kept.
    let capacity: Int
    private let state: Mutex<State>

    private struct State {
        var entries: [RequestLogEntry] = []
        /// Where the next entry goes once the ring is full.
        var next = 0
        /// How many entries were ever appended; an entry's sequence number is its position in that count.
        var appended = 0
    }

    init(capacity: Int = 2_000) {
        self.capacity = capacity
        state = Mutex(State())
    }

    func append(_ entry: RequestLogEntry) {
        state.withLock { state in
            if state.entries.count < capacity {
                state.entries.append(entry)
            } else {
                state.entries[state.next] = entry
                state.next = (state.next + 1) % capacity
            }
            state.appended += 1
        }
    }

    /// The kept entries that `matches` accepts, newest first, at most `limit`.
    func entries(limit: Int, where matches: (RequestLogEntry) -> Bool = { _ in true }) -> [RequestLogEntry] {
        state.withLock { state in
            let ordered = state.entries[state.next...] + state.entries[..<state.next]
            var found: [RequestLogEntry] = []
            for entry in ordered.reversed() where matches(entry) {
                found.append(entry)
                if found.count == limit { break }
            }
            return found
        }
    }

    /// The kept request with this ID.
    func entry(id: String) -> RequestLogEntry? {
        entries(limit: 1) { $0.id == id }.first
    }
}

/// What the server learns of one request while it handles it, for the request log, the metrics and
/// the logs: its ID, who it turned out to be from, and why it was refused. Inner middleware fill
/// it in; ``ObservabilityMiddleware`` reads it once the request is answered.
final class RequestTrace: Sendable {
    /// The request's ID, a UUID.
    let id = RequestTrace.nextID()
    private let state = Mutex(State())

    struct State {
        var caller = VerifiedCaller()
        var errorCode: ServerErrorCode?
        var reason: String?
        /// The administrator acting (the admin token, a console session): their changes go to the
        /// audit log.
        var actor: String?
    }

    /// Where request IDs start: 128 random bits drawn once per process.
    private static let firstID = (high: UInt64.random(in: .min ... .max), low: UInt64.random(in: .min ... .max))
    private static let issuedIDs = Atomic<UInt64>(0)

    /// A new request ID: the process's random start plus a count, shaped as a version 4 UUID. Request
    /// IDs name requests (in answers, logs and the request log), and the `uuid`s of the errors of
    /// single items in an answer come from the same count; they grant nothing, so they need to be
    /// unique, not unpredictable. Foundation's `UUID()` opens and reads `/dev/urandom` for each one on
    /// Linux, a few percent of a small request's time.
    static func nextID() -> String {
        let count = issuedIDs.add(1, ordering: .relaxed).newValue
        // The version nibble and the variant bits take 6 of the 128; the count runs in the low 62.
        let high = (firstID.high & ~0xF000) | 0x4000
        let low = ((firstID.low &+ count) & 0x3FFF_FFFF_FFFF_FFFF) | 0x8000_0000_0000_0000
        let bytes = withUnsafeBytes(of: (high.bigEndian, low.bigEndian)) { Array($0) }
        return UUID(uuid: (
            bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7], bytes[8], bytes[9], bytes[10],
            bytes[11], bytes[12], bytes[13], bytes[14], bytes[15])).uuidString
    }

    /// Records that an administrator makes the request.
    func act(as actor: String) {
        state.withLock { $0.actor = actor }
    }

    /// Records who the request turned out to be from.
    func identify(_ caller: VerifiedCaller) {
        state.withLock { $0.caller = caller }
    }

    /// Records why the request was refused.
    func fail(_ error: StratusError) {
        state.withLock { state in
            state.errorCode = error.code
            state.reason = ErrorDictionary.clipped(error.reason)
        }
    }

    var current: State { state.withLock { $0 } }
}
