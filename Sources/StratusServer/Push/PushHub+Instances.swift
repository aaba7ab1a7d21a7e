import CoreMetrics
import Logging
import StratusModel
import StratusStorage
import Synchronization

/// Events as messages between instances: every instance matches every change against the
/// subscriptions and notifies the devices connected to it.
extension PushHub.Event: JSONWritable, JSONDecodable {
    func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writeFields(to: &writer)
        writer.endObject()
    }

    /// The message to the other instances: the event, and when it was sent (milliseconds since 1970
    /// on the sender's clock), from which the receiver measures the bus's lag.
    func message(sentAt: Int64) -> [UInt8] {
        var writer = JSONWriter()
        writer.beginObject()
        writeFields(to: &writer)
        writer.field("sentAt", sentAt)
        writer.endObject()
        return writer.bytes
    }

    /// When a message of ``message(sentAt:)`` was sent, if it says.
    static func sentAt(_ json: JSONValue) -> Int64? {
        try? json.object().decodeIfPresent("sentAt")
    }

    private func writeFields(to writer: inout JSONWriter) {
        switch self {
        case .records(let database, let zone, let changes, let origin):
            writer.field("kind", "records")
            writer.field("database", database)
            writer.field("zone", zone)
            Self.write(origin, to: &writer)
            writer.key("changes")
            writer.beginArray()
            for change in changes {
                writer.beginObject()
                writer.field("previous", change.previous)
                writer.field("record", change.record)
                writer.endObject()
            }
            writer.endArray()
        case .zone(let database, let name, let deleted, let participants, let origin):
            writer.field("kind", "zone")
            writer.field("database", database)
            writer.field("name", name)
            writer.field("deleted", deleted)
            writer.field("participants", participants)
            Self.write(origin, to: &writer)
        case .subscriptionsChanged(let database):
            writer.field("kind", "subscriptions")
            writer.field("database", database)
        case .delivery(let database, let subscriber, let notification, let origin):
            writer.field("kind", "delivery")
            writer.field("database", database)
            writer.field("subscriber", subscriber)
            writer.field("notification", notification)
            Self.write(origin, to: &writer)
        case .credentialsRevoked(let revocation):
            writer.field("kind", "credentials")
            writer.field("container", revocation.container)
            writer.field("user", revocation.userRecordName)
            writer.field("sessions", revocation.sessionHashes)
            writer.field("apiTokens", revocation.apiTokenHashes)
        }
    }

    private static func write(_ origin: PushHub.Origin?, to writer: inout JSONWriter) {
        writer.field("deviceID", origin?.deviceID)
        writer.field("deviceUser", origin?.userRecordName)
    }

    private static func origin(in object: JSONObject) throws -> PushHub.Origin? {
        try (object.decodeIfPresent("deviceID") as String?).map {
            PushHub.Origin(userRecordName: try object.decodeIfPresent("deviceUser"), deviceID: $0)
        }
    }

    init(json: JSONValue) throws {
        let object = try json.object()
        let kind: String = try object.decode("kind")
        if kind == "credentials" {
            self = .credentialsRevoked(
                CredentialRevocation(
                    container: try object.decode("container"), userRecordName: try object.decodeIfPresent("user"),
                    sessionHashes: try object.decode("sessions"), apiTokenHashes: try object.decode("apiTokens")))
            return
        }
        let database: DatabaseLocator = try object.decode("database")
        switch kind {
        case "records":
            let changes = try (try object.decode("changes") as [JSONValue]).map { value in
                let change = try value.object()
                return RecordChange(previous: try change.decodeIfPresent("previous"), record: try change.decode("record"))
            }
            self = .records(
                database, zone: try object.decode("zone"), changes: changes, origin: try Self.origin(in: object))
        case "zone":
            self = .zone(
                database, name: try object.decode("name"), deleted: try object.decode("deleted"),
                participants: try object.decodeIfPresent("participants") ?? [], origin: try Self.origin(in: object))
        case "subscriptions":
            self = .subscriptionsChanged(database)
        case "delivery":
            self = .delivery(
                database, subscriber: try object.decode("subscriber"), notification: try object.decode("notification"),
                origin: try Self.origin(in: object))
        case let kind:
            throw StratusError.badRequest("instance message: unknown event kind '\(kind)'")
        }
    }
}

/// The instance bus: local events go to the other instances, theirs are handled here like local ones.
extension PushHub {
    /// Sends the local events to the other instances, in order: every event published while the
    /// last send was under way goes in the next one.
    func send(to bus: any InstanceMessageBus) async {
        for await _ in outgoingBell {
            let events = outgoing.withLock { events in
                defer { events = [] }
                return events
            }
            guard !events.isEmpty else { continue }
            do {
                let now = configuration.clock.milliseconds
                try await bus.broadcast(events.map { $0.message(sentAt: now) })
            } catch {
                // Shutting down cancels a send in flight; anything else is worth knowing.
                if !Task.isCancelled {
                    logger.error("push: an event could not be sent to the other instances", metadata: ["error": "\(error)"])
                }
            }
        }
    }

    /// Handles the other instances' events as local ones.
    func receive(from bus: any InstanceMessageBus) async {
        await bus.listen { [self] message in
            switch message {
            case .message(let bytes):
                do {
                    let json = try JSONValue.parse(bytes)
                    if let sentAt = Event.sentAt(json) {
                        configuration.metrics.instanceBusLag.recordMilliseconds(max(0, configuration.clock.milliseconds - sentAt))
                    }
                    let event = try Event(json: json)
                    if case .credentialsRevoked(let revocation) = event {
                        // Not behind the record events waiting in the loop: the credentials stop now.
                        credentials.forget(revocation)
                        registry.closeConnections(of: revocation)
                    } else {
                        continuation.yield((event, false))
                    }
                } catch {
                    logger.error("push: a message from another instance is not an event", metadata: ["error": "\(error)"])
                }
            case .gap:
                cachesMissedEvents.store(true, ordering: .releasing)
                notificationsMayHaveBeenMissed()
            }
        }
    }
}
