import StratusModel
import Synchronization

/// Asset transfers under way, each holding a file (or a connection to the bucket) open: at most
/// as many as the server holds connections, so that the open-file budget (two descriptors per
/// connection: its socket and one file) holds even when HTTP/2 carries many transfers on one
/// connection. One more is answered `503 TRY_AGAIN_LATER`.
final class AssetTransfers: Sendable {
    /// Transfers that may be under way at once.
    let capacity: Int
    private let count = Mutex(0)

    /// One transfer's place, given back by ``Slot/end()`` or, at the latest, when the slot goes (a
    /// response whose body is never written, as a `HEAD`'s, drops it).
    final class Slot: Sendable {
        private let transfers: AssetTransfers
        private let ended = Mutex(false)

        fileprivate init(_ transfers: AssetTransfers) {
            self.transfers = transfers
        }

        /// Gives the place back (once).
        func end() {
            guard !ended.withLock({ ended in defer { ended = true }; return ended }) else { return }
            transfers.count.withLock { $0 -= 1 }
        }

        deinit { end() }
    }

    init(capacity: Int) {
        self.capacity = capacity
    }

    /// A place for one transfer; `TRY_AGAIN_LATER` when every place is taken.
    func begin() throws -> Slot {
        let taken = count.withLock { count in
            guard count < capacity else { return false }
            count += 1
            return true
        }
        guard taken else {
            throw StratusError(
                .tryAgainLater, "the server has as many asset transfers under way as it may; retry after the retryAfter seconds",
                retryAfter: 1)
        }
        return Slot(self)
    }
}
