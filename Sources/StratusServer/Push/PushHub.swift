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
/// events in order, one at a time: it finds the subscriptions each one fires (kept in memory per
/// database, reloaded when they change), encodes each notification once, and queues it on every
/// device of the subscriber except the one that made the change. Connections take notifications
/// from their device's queue (``PushDevice``). Devices that went away keep their queue for
/// `pushRetentionSeconds`, after which a reconnect is told it may have missed notifications.
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

    private struct Registry {
        var devices: [String: PushDevice] = [:]
        var byOwner: [PushDevice.Owner: Set<String>] = [:]
    }

    private let storage: any SubscriptionStorage & SchemaStorage & ShareStorage
    /// How this instance hears of the others' changes, when several share the storage.
    private let bus: (any InstanceMessageBus)?
    /// This process's credential caches, which forget what other instances revoke.
    private let credentials: CredentialCaches
    let configuration: ServerConfiguration
    private let logger: Logger
    private let events: AsyncStream<Event>
    private let continuation: AsyncStream<Event>.Continuation
    /// Local events waiting to go to the other instances, and the bell that says some are.
    private let outgoing = Mutex<[Event]>([])
    private let outgoingBell: AsyncStream<Void>
    private let outgoingBellContinuation: AsyncStream<Void>.Continuation
    private let registry = Mutex(Registry())
    /// Set when messages of other instances were lost: the event loop then drops its caches.
    private let cachesMissedEvents = Atomic(false)

    init(
        storage: any SubscriptionStorage & SchemaStorage & ShareStorage, bus: (any InstanceMessageBus)?,
        credentials: CredentialCaches, configuration: ServerConfiguration, logger: Logger
    ) {
        self.storage = storage
        self.bus = bus
        self.credentials = credentials
        self.configuration = configuration
        self.logger = logger
        (events, continuation) = AsyncStream.makeStream()
        (outgoingBell, outgoingBellContinuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
    }

    /// Hands an event to the hub; returns at once.
    func publish(_ event: Event) {
        continuation.yield(event)
        if bus != nil {
            outgoing.withLock { $0.append(event) }
            outgoingBellContinuation.yield()
        }
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
        for device in registry.withLock({ Array($0.devices.values) }) { device.disconnect() }
    }

    /// What the hub keeps between events: each database's subscriptions, and who accepted the share
    /// of each private zone written (kept up to date from the share records' own changes).
    private struct Caches {
        var subscriptions: [DatabaseLocator: [StoredSubscription]] = [:]
        var participants: [SharedZoneKey: Set<String>] = [:]
        /// Each subscribing participant's accepted memberships of a zone's shares, by participant.
        var memberships: [SharedZoneKey: [String: [ShareMembership]]] = [:]
    }

    /// A zone of a private database.
    private struct SharedZoneKey: Hashable {
        var database: DatabaseLocator
        var zone: String
    }

    private func processEvents() async {
        var caches = Caches()
        for await event in events {
            // Events of other instances were lost (their subscription and share changes among
            // them): what the caches hold may be stale.
            if cachesMissedEvents.exchange(false, ordering: .acquiringAndReleasing) { caches = Caches() }
            do {
                try await handle(event, caches: &caches)
            } catch {
                // Its notifications are lost: every device hears that it may have missed some, and
                // the caches, which the event may have left half changed, start over.
                logger.error("push: an event could not be handled", metadata: ["error": "\(error)"])
                caches = Caches()
                tellEveryDeviceItMissedNotifications()
            }
        }
    }

    private func tellEveryDeviceItMissedNotifications() {
        for device in registry.withLock({ Array($0.devices.values) }) { device.enqueue([], missed: true) }
    }

    /// Sends local events to the other instances, in order.
    /// Sends the local events to the other instances: every event published while the last send
    /// was under way goes in the next one.
    private func send(to bus: any InstanceMessageBus) async {
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
    private func receive(from bus: any InstanceMessageBus) async {
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
                        closeConnections(of: revocation)
                    } else {
                        continuation.yield(event)
                    }
                } catch {
                    logger.error("push: a message from another instance is not an event", metadata: ["error": "\(error)"])
                }
            case .gap:
                cachesMissedEvents.store(true, ordering: .releasing)
                tellEveryDeviceItMissedNotifications()
            }
        }
    }

    private func handle(_ event: Event, caches: inout Caches) async throws {
        switch event {
        case .credentialsRevoked:
            // Handled as it arrives (``receive(from:)``); local ones by ``revoke(_:)``.
            break
        case .subscriptionsChanged(let database):
            caches.subscriptions[database] = nil
        case .delivery(let database, let subscriber, let notification, let origin):
            var batches: [String: (device: PushDevice, entries: [PushDevice.Entry])] = [:]
            queue(notification, for: subscriber, in: database, origin: origin, into: &batches)
            for (device, entries) in batches.values { device.enqueue(entries) }
        case .records(let database, let zone, let changes, let origin):
            let subscriptions = try await subscriptions(of: database, cache: &caches.subscriptions)
            if !subscriptions.isEmpty {
                let schema = try await schema(matching: subscriptions, in: database)
                let firings = SubscriptionMatcher(database: database, schema: schema)
                    .firings(of: changes, zone: zone, subscriptions: subscriptions)
                try await deliver(firings, database: database, origin: origin, cache: &caches.subscriptions)
            }
            guard database.scope == .private, zone != ZoneID.defaultZoneName else { return }
            // The zone's participants hear of it through their shared databases.
            var audiences: [ChangeAudience]?
            for participant in try await participants(toNotifyOf: changes, zone: zone, in: database, caches: &caches) {
                let shared = DatabaseLocator(
                    container: database.container, environment: database.environment, scope: .shared, owner: participant)
                let subscriptions = try await self.subscriptions(of: shared, cache: &caches.subscriptions)
                guard !subscriptions.isEmpty else { continue }
                let heard = try await self.changes(
                    changes, heardBy: participant, zone: zone, in: database, audiences: &audiences, caches: &caches)
                guard !heard.isEmpty else { continue }
                let schema = try await schema(matching: subscriptions, in: shared)
                let firings = SubscriptionMatcher(database: shared, schema: schema, zoneOwner: database.owner)
                    .firings(of: heard, zone: zone, subscriptions: subscriptions)
                try await deliver(firings, database: shared, origin: origin, cache: &caches.subscriptions)
            }
        case .zone(let database, let name, let deleted, let participants, let origin):
            var notified = [(database, database.owner)]
            if deleted, database.scope == .private {
                let key = SharedZoneKey(database: database, zone: name)
                for participant in (caches.participants[key] ?? []).union(participants) {
                    notified.append(
                        (DatabaseLocator(
                            container: database.container, environment: database.environment, scope: .shared,
                            owner: participant), database.owner))
                }
                caches.participants[key] = nil
                caches.memberships[key] = nil
            }
            for (subscriber, zoneOwner) in notified {
                let subscriptions = try await subscriptions(of: subscriber, cache: &caches.subscriptions)
                guard !subscriptions.isEmpty else { continue }
                let firings = SubscriptionMatcher(database: subscriber, schema: Schema(), zoneOwner: zoneOwner)
                    .firings(ofZone: name, deleted: deleted, subscriptions: subscriptions)
                try await deliver(firings, database: subscriber, origin: origin, cache: &caches.subscriptions)
            }
        }
    }

    /// The participants to notify of changes to a private zone: those who accepted one of its
    /// shares, and when a share changed, also those it just lost (they hear that the zone or their
    /// records left their shared database). Which changes each hears of: ``changes(_:heardBy:zone:in:caches:)``.
    private func participants(
        toNotifyOf changes: [RecordChange], zone: String, in database: DatabaseLocator, caches: inout Caches
    ) async throws -> Set<String> {
        let key = SharedZoneKey(database: database, zone: zone)
        func accepted(_ record: StoredRecord?) -> Set<String> {
            Set(
                record?.shareState?.participants.filter { $0.status == .accepted && $0.type != .owner }
                    .map(\.userRecordName) ?? [])
        }
        let shareChanges = changes.filter { $0.record.recordType == ShareKeys.recordType }
        if !shareChanges.isEmpty {
            // The change is committed, so the share index already holds who takes part now.
            let now = Set(try await storage.acceptedParticipants(zone: zone, in: database))
            caches.participants[key] = now
            caches.memberships[key] = nil
            return shareChanges.reduce(now) { $0.union(accepted($1.previous)) }
        }
        if let known = caches.participants[key] { return known }
        // One entry per private zone written since start; a busy server starts over rather than grow.
        if caches.participants.count >= 100_000 {
            caches.participants.removeAll()
            caches.memberships.removeAll()
        }
        let loaded = Set(try await storage.acceptedParticipants(zone: zone, in: database))
        caches.participants[key] = loaded
        return loaded
    }

    /// Who may hear of one change to a private zone, worked out once per event for all participants.
    private struct ChangeAudience {
        /// The hierarchical shares whose participants' change feeds show the change: the record's
        /// share, the share it just left, and the one it was in before (``ZoneAccess/feedEntry(_:since:)``
        /// read from just before the change).
        var shares: Set<String> = []
        /// For a change to a share, who had accepted it before: one just removed hears of it.
        var acceptedBefore: Set<String> = []

        init(_ change: RecordChange) {
            let record = change.record
            if let share = record.shareName { shares.insert(share) }
            if let left = record.formerShare, left.sequence >= record.sequence { shares.insert(left.shareName) }
            if let share = change.previous?.shareName { shares.insert(share) }
            if let before = change.previous?.shareState {
                acceptedBefore = Set(before.participants.filter { $0.status == .accepted }.map(\.userRecordName))
            }
        }
    }

    /// The changes of a private zone that `participant` hears of through their shared database's
    /// subscriptions: all of them when they reach the whole zone (its zone-wide share); otherwise,
    /// as their change feed would show them, those to records of the shares they accepted or that
    /// just left one, so that a participant of a share rooted at a record learns nothing of the
    /// owner's other records, not even that they changed. Either way, the changes to a share they
    /// had accepted, so that one who was just removed hears of it. `audiences` holds each change's
    /// ``ChangeAudience`` once a participant needed it.
    private func changes(
        _ changes: [RecordChange], heardBy participant: String, zone: String, in database: DatabaseLocator,
        audiences: inout [ChangeAudience]?, caches: inout Caches
    ) async throws -> [RecordChange] {
        let key = SharedZoneKey(database: database, zone: zone)
        let memberships: [ShareMembership]
        if let known = caches.memberships[key]?[participant] {
            memberships = known
        } else {
            memberships = try await storage.shareMemberships(zone: zone, in: database, user: participant)
                .filter { $0.status == .accepted }
            caches.memberships[key, default: [:]][participant] = memberships
        }
        let access = ZoneAccess(
            name: zone, locator: database, wireZoneID: ZoneID(zoneName: zone, ownerRecordName: database.owner),
            memberships: memberships)
        if !memberships.isEmpty, access.participantShares == nil { return changes }
        let shares = Set((access.participantShares ?? [:]).keys)
        let each = audiences ?? changes.map(ChangeAudience.init)
        audiences = each
        return zip(changes, each).compactMap { change, audience in
            audience.acceptedBefore.contains(participant) || !audience.shares.isDisjoint(with: shares) ? change : nil
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

    /// Queues each firing's notification on the subscriber's devices, except the one that made the
    /// change (``Origin``), and deletes the `firesOnce` subscriptions that fired. A device gets all of
    /// an event's notifications at once, so a connection never sees half of them.
    ///
    /// Every instance matches every change, against subscriptions it may have read before or after
    /// another deleted one: a `firesOnce` subscription's notification goes out from the instance
    /// whose deletion of it succeeded, here and, through the bus, on the other instances.
    private func deliver(
        _ firings: [SubscriptionMatcher.Firing], database: DatabaseLocator, origin: Origin?,
        cache: inout [DatabaseLocator: [StoredSubscription]]
    ) async throws {
        var batches: [String: (device: PushDevice, entries: [PushDevice.Entry])] = [:]
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
            }
            queue(firing.notification, for: subscription.subscriber, in: database, origin: origin, into: &batches)
        }
        for (device, entries) in batches.values { device.enqueue(entries) }
    }

    /// Adds `notification` for the devices of `subscriber` here, except the one that made the
    /// change, to their batches.
    private func queue(
        _ notification: PushNotificationDictionary, for subscriber: String, in database: DatabaseLocator, origin: Origin?,
        into batches: inout [String: (device: PushDevice, entries: [PushDevice.Entry])]
    ) {
        do {
            let owner = PushDevice.Owner(
                container: database.container, environment: database.environment, userRecordName: subscriber)
            let skipped = origin.flatMap { $0.userRecordName == subscriber ? $0.deviceID : nil }
            let recipients = devices(of: owner).filter { skipped == nil || $0.deviceID != skipped }
            guard !recipients.isEmpty else { return }
            let entry = PushDevice.Entry(
                key: [
                    notification.databaseScope.rawValue, notification.subscriptionID, notification.zoneID?.zoneName ?? "",
                    notification.zoneID?.ownerRecordName ?? "",
                ].joined(separator: "\u{0}"),
                frame: ByteBuffer(bytes: PushMessage.notification(notification).jsonBytes), payload: notification,
                queuedAt: configuration.clock.milliseconds)
            for device in recipients { batches[device.tokenHash, default: (device, [])].entries.append(entry) }
        }
    }

    /// Sends an event to the other instances only.
    private func forward(_ event: Event) {
        guard bus != nil else { return }
        outgoing.withLock { $0.append(event) }
        outgoingBellContinuation.yield()
    }

    // MARK: Devices

    private func devices(of owner: PushDevice.Owner) -> [PushDevice] {
        registry.withLock { registry in
            (registry.byOwner[owner] ?? []).compactMap { registry.devices[$0] }
        }
    }

    /// Connects a device: its queue (kept from an earlier connection of this process, or new),
    /// the connection's ID, and whether notifications may have been missed.
    func connect(
        tokenHash: String, owner: PushDevice.Owner, deviceID: String?, sessionHash: String?, sink: (any PushSink)? = nil
    ) -> (device: PushDevice, connection: UInt64, missedNotifications: Bool) {
        let device = registry.withLock { registry -> PushDevice in
            if let known = registry.devices[tokenHash], known.owner == owner, known.deviceID == deviceID { return known }
            if let previous = registry.devices[tokenHash] { registry.byOwner[previous.owner]?.remove(tokenHash) }
            let device = PushDevice(
                tokenHash: tokenHash, owner: owner, deviceID: deviceID, limit: configuration.pushQueueLimit,
                clock: configuration.clock, metrics: configuration.metrics)
            registry.devices[tokenHash] = device
            registry.byOwner[owner, default: []].insert(tokenHash)
            return device
        }
        let (connection, missed) = device.attach(sessionHash: sessionHash, sink: sink)
        return (device, connection, missed)
    }

    /// Ends here the push connections that credentials just revoked opened, and tells the other
    /// instances, which forget the credentials and end theirs, before the caller answers: unlike
    /// other events, the message goes out at once rather than with the next batch. One that cannot
    /// be sent is logged; the other instances' caches then let go within their lifetime.
    func revoke(_ revocation: CredentialRevocation) async {
        closeConnections(of: revocation)
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

    /// Ends the connections signed in with the sessions that ended; when all of a user's ended,
    /// every push connection of theirs, bare web courier polls included (their push tokens were
    /// deleted with their sessions).
    private func closeConnections(of revocation: CredentialRevocation) {
        let devices = registry.withLock { Array($0.devices.values) }
        for device in devices {
            if let user = revocation.userRecordName, device.owner.container == revocation.container,
                device.owner.userRecordName == user
            {
                device.disconnect()
            } else {
                for hash in revocation.sessionHashes { device.disconnect(sessionHash: hash) }
            }
        }
    }

    /// The devices of a container this instance holds a queue for, connected or recently away.
    func devices(container: String) -> [PushDevice.Snapshot] {
        registry.withLock { Array($0.devices.values) }.filter { $0.owner.container == container }.map(\.snapshot)
    }

    /// How many devices the hub holds a queue for (connected or recently away), and how many of
    /// them are connected.
    var deviceCounts: (queued: Int, connected: Int) {
        let devices = registry.withLock { Array($0.devices.values) }
        return (devices.count, devices.count(where: \.isConnected))
    }

    /// Every minute, forgets devices away for longer than `pushRetentionSeconds`.
    private func pruneAwayDevices() async {
        while !Task.isCancelled {
            try? await Task.sleep(for: .seconds(60))
            let cutoff = configuration.clock.milliseconds - configuration.pushRetentionSeconds * 1000
            registry.withLock { registry in
                for (hash, device) in registry.devices where device.isAway(since: cutoff) {
                    registry.devices[hash] = nil
                    registry.byOwner[device.owner]?.remove(hash)
                    if registry.byOwner[device.owner]?.isEmpty == true { registry.byOwner[device.owner] = nil }
                }
            }
        }
    }
}
