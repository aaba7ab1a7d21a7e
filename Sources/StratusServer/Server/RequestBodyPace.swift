/// How fast a request body must arrive, and how many bodies one client network may have arriving at
/// once: a client that sends a large `Content-Length` and then a byte every few seconds holds a
/// connection, a task and a slot of the memory budget for as long as it likes unless its body has a
/// pace to keep.
///
/// Time is counted while the server waits for the client (a read is asked for and nothing has come),
/// never while the server itself is busy with what arrived, so a slow disk or a busy database never
/// cuts a client off. A body may arrive at any pace during ``gracePeriod``; after it, each
/// ``minimumBytesPerSecond`` bytes received buy one more second, and a body that falls behind is
/// closed. No body may take longer than ``timeout`` in all.
public struct RequestBodyPace: Sendable, Hashable {
    /// The longest a body may take to arrive (15 minutes by default: 64 MiB at 75 kB/s).
    public var timeout: Duration
    /// How long a body may take before its pace is checked (10 seconds by default).
    public var gracePeriod: Duration
    /// The slowest average pace a body may keep after the grace period, in bytes per second
    /// (1,024 by default).
    public var minimumBytesPerSecond: Int
    /// Requests whose bodies are arriving that one client network may have at once (64 by default;
    /// trusted proxies are not limited); one more is answered `503 TRY_AGAIN_LATER`.
    public var maxBodiesPerClient: Int

    /// Creates a pace; every argument has the default documented on its property.
    public init(
        timeout: Duration = .seconds(900), gracePeriod: Duration = .seconds(10), minimumBytesPerSecond: Int = 1024,
        maxBodiesPerClient: Int = 64
    ) {
        self.timeout = timeout
        self.gracePeriod = gracePeriod
        self.minimumBytesPerSecond = minimumBytesPerSecond
        self.maxBodiesPerClient = maxBodiesPerClient
    }

    /// Whether a body that has `received` bytes after the client kept the server waiting `waited`
    /// has fallen behind the pace (or run out of time).
    func isBehind(received: Int, waited: Duration) -> Bool {
        if waited > timeout { return true }
        guard waited > gracePeriod else { return false }
        let earned = Duration.seconds(Double(received) / Double(max(1, minimumBytesPerSecond)))
        return waited > gracePeriod + earned
    }
}
