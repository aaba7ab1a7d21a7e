import Synchronization

/// Hands each element to every stream made by ``stream()`` and not yet ended; a slow reader keeps
/// the newest `buffer` elements.
final class Broadcast<Element: Sendable>: Sendable {
    private let continuations = Mutex<[Int: AsyncStream<Element>.Continuation]>([:])
    private let nextID = Atomic<Int>(0)
    private let buffer: Int

    init(buffer: Int = 1_000) {
        self.buffer = buffer
    }

    /// A stream of the elements yielded from now on.
    func stream() -> AsyncStream<Element> {
        let (stream, continuation) = AsyncStream.makeStream(of: Element.self, bufferingPolicy: .bufferingNewest(buffer))
        let id = nextID.add(1, ordering: .relaxed).newValue
        continuations.withLock { $0[id] = continuation }
        continuation.onTermination = { [weak self] _ in _ = self?.continuations.withLock { $0.removeValue(forKey: id) } }
        return stream
    }

    func yield(_ element: Element) {
        for continuation in continuations.withLock({ Array($0.values) }) { continuation.yield(element) }
    }

    /// Ends every stream made so far.
    func finish() {
        for continuation in continuations.withLock({ Array($0.values) }) { continuation.finish() }
    }

    deinit {
        finish()
    }
}
