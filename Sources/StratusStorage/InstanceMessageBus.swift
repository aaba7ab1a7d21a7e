/// Carries messages between server instances that share one storage: several processes over one
/// PostgreSQL database. What one instance broadcasts reaches every other instance, not itself.
///
/// Delivery is at most once: an instance that loses its link misses what is sent meanwhile, and its
/// stream says so with ``InstanceMessage/gap`` once the link is back.
public protocol InstanceMessageBus: Sendable {
    /// Sends messages to the other instances, which receive them in this order. A bus may carry
    /// several in one delivery: a burst of writes costs one round trip, not one per write.
    func broadcast(_ messages: [[UInt8]]) async throws
    /// Listens to the other instances until the calling task is cancelled, handing each message to
    /// `receive` as it arrives. One listener per bus.
    func listen(_ receive: @Sendable (InstanceMessage) async -> Void) async
}

/// What arrives on an ``InstanceMessageBus``.
public enum InstanceMessage: Sendable, Equatable {
    /// A message another instance broadcast.
    case message([UInt8])
    /// The link to the other instances was lost and is back: messages sent meanwhile are lost.
    case gap
}

extension StratusStorage {
    /// Storage that one process owns has no other instances to talk to.
    public var messageBus: (any InstanceMessageBus)? { nil }
}
