import CoreMetrics
import Foundation
import Logging
import NIOCore
import ServiceLifecycle
import StratusModel
import StratusStorage
import Synchronization

/// Turns committed changes into notifications for the devices of the subscriptions they fire.
///
/// Writes hand their changes to ``publish(_:)`` and return at once; the hub's `run()` takes the
/// events in order, one at a time, and for each one asks, each of a part with one job:
/// - who hears of it: the database's own subscribers, and for a private zone its participants,
///   each of the changes their feed shows them (``PushAudience``);
/// - which subscriptions it fires, and with what notification (``SubscriptionMatcher``, over the
///   subscriptions kept in memory per database, reloaded when they change);
/// - how the notifications reach the devices: every ``PushTransport`` gets each subscriber's
///   notifications of the event at once, except for the device that made the change. The first
///   is ``PushDeviceRegistry``, whose queues WebSockets and web-courier polls take from; devices
///   that went away keep their queue for `pushRetentionSeconds`, after which a reconnect is told
///   it may have missed notifications.
///
/// When several instances share the storage (its ``StratusStorage/messageBus``), each event is also
/// sent to the others, and theirs are handled here like local ones: a device hears of every change
/// whichever instance it is connected to. When the link to the others was lost for a while, every
/// device here is told it may have missed notifications.
final class PushHub: Service {
    /// Something that may fire subscriptions.
    enum Event: Sendable {
        /// Records of a zone changed, from a device (when it said which one).
        case records(DatabaseLocator, zone: String, changes: [RecordChange], origin: Origin?)
        /// A custom zone was created or deleted; a deleted private zone names who had accepted its
        /// shares (read before it went: its share rows go with it).
        case zone(DatabaseLocator, name: String, deleted: Bool, participants: [String] = [], origin: Origin?)
        /// The subscriptions of a database changed: reload them.
        case subscriptionsChanged(DatabaseLocator)
        /// The one notification of a `firesOnce` subscription that fired through another instance,
        /// for the subscriber's devices here (only that instance's deletion of it succeeded).
        case delivery(DatabaseLocator, subscriber: String, notification: PushNotificationDictionary, origin: Origin?)
        /// Credentials another instance revoked: forget them and close what they opened
        /// (``revoke(_:)``).
        case credentialsRevoked(CredentialRevocation)
    }

    /// The device a change came from, and whose it is: that device is not told of it. A device ID
    /// is the client's own word, and other users see it in record stamps, so it stands for a device
    /// of its user only.
    struct Origin: Sendable, Equatable {
        var userRecordName: String?
        var deviceID: String

        /// Where a write's changes come from, when its client named its device.
        init?(_ context: WriteContext) {
            guard let deviceID = context.deviceID else { return nil }
            self.init(userRecordName: context.userRecordName, deviceID: deviceID)
        }

        /// Where `request`'s changes come from, when its client named its device.
        init?(_ request: DatabaseRequest) {
            guard let deviceID = request.deviceID else { return nil }
            self.init(userRecordName: request.userRecordName, deviceID: deviceID)
        }

        init(userRecordName: String?, deviceID: String) {
            self.userRecordName = userRecordName
            self.deviceID = deviceID
        }
    }

    private let storage: any SubscriptionStorage & SchemaStorage & ShareStorage
    /// How this instance hears of the others' changes, when several share the storage.
    let bus: (any InstanceMessageBus)?
    /// This process's credential caches, which forget what other instances revoke.
    let credentials: CredentialCaches
    let configuration: ServerConfiguration
    let logger: Logger
    /// Events in the order they happened, each with whether it happened here or on another instance.
    private let events: AsyncStream<(event: Event, local: Bool)>
    let continuation: AsyncStream<(event: Event, local: Bool)>.Continuation
    /// Local events waiting to go to the other instances, and the bell that says some are.
    let outgoing = Mutex<[Event]>([])
    let outgoingBell: AsyncStream<Void>
    private let outgoingBellContinuation: AsyncStream<Void>.Continuation
    /// The devices connected here and their queues: the first transport.
    let registry: PushDeviceRegistry
    /// How notifications reach devices, in order: the registry's queues first.
    private let transports: [any PushTransport]
    /// Set when messages of other instances were lost: the event loop then drops its caches.
    let cachesMissedEvents = Atomic(false)

    init(
        storage: any SubscriptionStorage & SchemaStorage & ShareStorage, bus: (any InstanceMessageBus)?,
        credentials: CredentialCaches, configuration: ServerConfiguration, logger: Logger,
        transports: [any PushTransport] = []
    ) {
        self.storage = storage
        self.bus = bus
        self.credentials = credentials
        self.configuration = configuration
        self.logger = logger
        registry = PushDeviceRegistry(configuration: configuration)
        self.transports = [registry] + transports
        (events, continuation) = AsyncStream.makeStream()
        (outgoingBell, outgoingBellContinuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
    }

    /// Hands an event to the hub; returns at once.
    func publish(_ event: Event) {
        continuation.yield((event, true))
        forward(event)
    }

    /// Sends an event to the other instances only.
    func forward(_ event: Event) {
        guard bus != nil else { return }
        outgoing.withLock { $0.append(event) }
        outgoingBellContinuation.yield()
    }

    func run() async throws {
        await cancelWhenGracefulShutdown {
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await self.processEvents() }
                group.addTask { await self.pruneAwayDevices() }
                if let bus = self.bus {
                    group.addTask { await self.send(to: bus) }
                    group.addTask { await self.receive(from: bus) }
                }
                await group.next()
                group.cancelAll()
            }
        }
        // Push connections are served by channel handlers with no task the server waits for:
        // close them, so devices see the server go and reconnect to whichever instance comes next.
        registry.disconnectAll()
    }

    /// What the hub keeps between events: each database's subscriptions, and the audience of the
    /// private zones written.
    private struct Caches {
        var subscriptions: [DatabaseLocator: [StoredSubscription]] = [:]
        var audience: PushAudience
    }

    private func processEvents() async {
        var caches = Caches(audience: PushAudience(storage: storage))
        for await (event, local) in events {
            // Events of other instances were lost (their subscription and share changes among
            // them): what the caches hold may be stale.
            if cachesMissedEvents.exchange(false, ordering: .acquiringAndReleasing) {
                caches = Caches(audience: PushAudience(storage: storage))
            }
            do {
                try await handle(event, local: local, caches: &caches)
            } catch {
                // Its notifications are lost: every device hears that it may have missed some, and
                // the caches, which the event may have left half changed, start over.
                logger.error("push: an event could not be handled", metadata: ["error": "\(error)"])
                caches = Caches(audience: PushAudience(storage: storage))
                notificationsMayHaveBeenMissed()
            }
        }
    }

    /// Every device, through every transport, hears that it may have missed notifications.
    func notificationsMayHaveBeenMissed() {
        for transport in transports { transport.notificationsMayHaveBeenMissed() }
    }

    /// Handles an event; `local` when it happened on this instance, which alone sends its pushes
    /// through the transports that reach devices anywhere (``PushTransport``).
    private func handle(_ event: Event, local: Bool, caches: inout Caches) async throws {
        switch event {
        case .credentialsRevoked:
            // Handled as it arrives (``receive(from:)``); local ones by ``revoke(_:)``.
            break
        case .subscriptionsChanged(let database):
            caches.subscriptions[database] = nil
        case .delivery(let database, let subscriber, let notification, let origin):
            send([subscriber: [notification]], in: database, origin: origin, local: local)
        case .records(let database, let zone, let changes, let origin):
            let subscriptions = try await subscriptions(of: database, cache: &caches.subscriptions)
            if !subscriptions.isEmpty {
                let schema = try await schema(matching: subscriptions, in: database)
                let firings = SubscriptionMatcher(database: database, schema: schema)
                    .firings(of: changes, zone: zone, subscriptions: subscriptions)
                try await deliver(firings, database: database, origin: origin, local: local, cache: &caches.subscriptions)
            }
            guard database.scope == .private, zone != ZoneID.defaultZoneName else { return }
            // The zone's participants hear of it through their shared databases.
            for participant in try await caches.audience.participants(toNotifyOf: changes, zone: zone, in: database) {
                let shared = DatabaseLocator(
                    container: database.container, environment: database.environment, scope: .shared, owner: participant)
                let subscriptions = try await self.subscriptions(of: shared, cache: &caches.subscriptions)
                guard !subscriptions.isEmpty else { continue }
                let heard = try await caches.audience.changes(changes, heardBy: participant, zone: zone, in: database)
                guard !heard.isEmpty else { continue }
                let schema = try await schema(matching: subscriptions, in: shared)
                let firings = SubscriptionMatcher(database: shared, schema: schema, zoneOwner: database.owner)
                    .firings(of: heard, zone: zone, subscriptions: subscriptions)
                try await deliver(firings, database: shared, origin: origin, local: local, cache: &caches.subscriptions)
            }
        case .zone(let database, let name, let deleted, let participants, let origin):
            var notified = [(database, database.owner)]
            if deleted, database.scope == .private {
                for participant in caches.audience.zoneDeleted(name, in: database, participants: participants) {
                    notified.append(
                        (DatabaseLocator(
                            container: database.container, environment: database.environment, scope: .shared,
                            owner: participant), database.owner))
                }
            }
            for (subscriber, zoneOwner) in notified {
                let subscriptions = try await subscriptions(of: subscriber, cache: &caches.subscriptions)
                guard !subscriptions.isEmpty else { continue }
                let firings = SubscriptionMatcher(database: subscriber, schema: Schema(), zoneOwner: zoneOwner)
                    .firings(ofZone: name, deleted: deleted, subscriptions: subscriptions)
                try await deliver(firings, database: subscriber, origin: origin, local: local, cache: &caches.subscriptions)
            }
        }
    }

    /// The environment's schema when matching `subscriptions` of `database` reads it: for the public
    /// database's READ grants, and for a search of `___all`, which reads the SEARCHABLE fields only,
    /// as a query does. An empty schema otherwise, with no read.
    private func schema(matching subscriptions: [StoredSubscription], in database: DatabaseLocator) async throws -> Schema {
        let searches = subscriptions.contains { subscription in
            subscription.definition.query?.filterBy.contains { $0.fieldName == QueryFilter.allSearchableFields } == true
        }
        guard database.scope == .public || searches else { return Schema() }
        return try await storage.schema(container: database.container, environment: database.environment)
    }

    private func subscriptions(
        of database: DatabaseLocator, cache: inout [DatabaseLocator: [StoredSubscription]]
    ) async throws -> [StoredSubscription] {
        if let cached = cache[database] { return cached }
        let loaded = try await storage.subscriptions(in: database, subscriber: nil)
        cache[database] = loaded
        return loaded
    }

    /// Sends each firing's notification to the subscriber's devices, except the one that made the
    /// change (``Origin``), and deletes the `firesOnce` subscriptions that fired.
    ///
    /// Every instance matches every change, against subscriptions it may have read before or after
    /// another deleted one: a `firesOnce` subscription's notification goes out from the instance
    /// whose deletion of it succeeded, here and, through the bus, on the other instances.
    private func deliver(
        _ firings: [SubscriptionMatcher.Firing], database: DatabaseLocator, origin: Origin?, local: Bool,
        cache: inout [DatabaseLocator: [StoredSubscription]]
    ) async throws {
        var bySubscriber: [String: [PushNotificationDictionary]] = [:]
        // A `firesOnce` notification is sent everywhere by the instance that deleted its subscription.
        var firedOnce: [String: [PushNotificationDictionary]] = [:]
        for firing in firings {
            let subscription = firing.subscription
            if subscription.definition.firesOnce == true {
                let deleted = try await storage.deleteSubscription(
                    id: subscription.subscriptionID, subscriber: subscription.subscriber, in: database)
                cache[database]?.removeAll {
                    $0.subscriptionID == subscription.subscriptionID && $0.subscriber == subscription.subscriber
                }
                guard deleted else { continue }
                forward(
                    .delivery(database, subscriber: subscription.subscriber, notification: firing.notification, origin: origin))
                firedOnce[subscription.subscriber, default: []].append(firing.notification)
            } else {
                bySubscriber[subscription.subscriber, default: []].append(firing.notification)
            }
        }
        if local {
            send(bySubscriber.merging(firedOnce) { $0 + $1 }, in: database, origin: origin, local: true)
        } else {
            send(bySubscriber, in: database, origin: origin, local: false)
            send(firedOnce, in: database, origin: origin, local: true)
        }
    }

    /// Hands each subscriber's notifications to every transport at once, so that a device never
    /// sees half of an event; the device that made the change is skipped.
    private func send(
        _ notifications: [String: [PushNotificationDictionary]], in database: DatabaseLocator, origin: Origin?,
        local: Bool
    ) {
        for (subscriber, notifications) in notifications {
            let owner = PushDevice.Owner(
                container: database.container, environment: database.environment, userRecordName: subscriber)
            let skipped = origin.flatMap { $0.userRecordName == subscriber ? $0.deviceID : nil }
            for transport in transports {
                transport.deliver(notifications, to: owner, skippingDevice: skipped, originatedHere: local)
            }
        }
    }

    // MARK: Devices

    /// Ends here the push connections that credentials just revoked opened, and tells the other
    /// instances, which forget the credentials and end theirs, before the caller answers: unlike
    /// other events, the message goes out at once rather than with the next batch. One that cannot
    /// be sent is logged; the other instances' caches then let go within their lifetime.
    func revoke(_ revocation: CredentialRevocation) async {
        registry.closeConnections(of: revocation)
        guard let bus else { return }
        let message = Event.credentialsRevoked(revocation).message(sentAt: configuration.clock.milliseconds)
        do {
            // Its own task: a request cancelled meanwhile (its client went away) still sends it.
            try await Task { try await bus.broadcast([message]) }.value
        } catch {
            logger.error(
                "push: a revocation could not be sent to the other instances", metadata: ["error": "\(error)"])
        }
    }

    /// Every minute, forgets devices away for longer than `pushRetentionSeconds`.
    private func pruneAwayDevices() async {
        while !Task.isCancelled {
            try? await Task.sleep(for: .seconds(60))
            registry.forgetDevices(awaySince: configuration.clock.milliseconds - configuration.pushRetentionSeconds * 1000)
        }
    }
}
