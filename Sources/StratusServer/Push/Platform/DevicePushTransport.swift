import AsyncHTTPClient
import Logging
import ServiceLifecycle
import StratusModel
import StratusStorage
import Synchronization

/// The ``PushTransport`` that wakes devices through their platform's push service: APNs for Apple
/// devices, FCM for Android, Web Push for browsers, to the endpoints users registered with
/// `tokens/register`, with the container's ``PushCredentials``.
///
/// It never delays the hub or a save: ``deliver(_:to:skippingDevice:originatedHere:)`` only queues,
/// and `run()` reads the user's endpoints and sends from tasks of its own. Only the instance that
/// handled a change sends its pushes (every instance hears every change), so each goes out once.
///
/// Per device and subscription, at most one push is in flight and one waits: a newer notification
/// replaces the waiting one (a silent push only says "fetch"). A push the service could not take
/// (429, 5xx, no answer) is tried again after ``PushServiceConfiguration/retryDelay``, doubling with
/// jitter, up to ``PushServiceConfiguration/maxAttempts``, then dropped and counted: the device's
/// next fetch recovers. An endpoint the service says is gone is deleted; credentials it refuses
/// make the channel rest (``PushCredentialStore``) rather than fail every push.
final class DevicePushTransport: PushTransport, Service {
    /// One event's notifications for one user.
    private struct Job: Sendable {
        var owner: PushDevice.Owner
        var notifications: [PushNotificationDictionary]
        var skippedDevice: String?
    }

    /// A push to make: the notification, to whom and where.
    private struct Push: Sendable {
        var notification: PushNotificationDictionary
        var owner: PushDevice.Owner
        var endpoint: PushEndpointInfo
    }

    /// What one endpoint heard last, for the console.
    struct LastResult: Sendable, Equatable {
        var outcome: String
        var reason: String?
        var at: Int64
    }

    private let storage: any SubscriptionStorage
    let credentials: PushCredentialStore
    private let configuration: ServerConfiguration
    private let logger: Logger
    private let jobs: AsyncStream<Job>
    private let jobsContinuation: AsyncStream<Job>.Continuation
    /// Per device and subscription with a push in flight: the one waiting behind it, if any.
    private let inFlight = Mutex<[String: Push?]>([:])
    private let lastResults = Mutex<[String: LastResult]>([:])

    /// How many users' notifications wait to be sent at most; more are dropped and counted.
    static let queueLimit = 100_000
    /// How many devices' pushes are being sent at once at most; the queue waits beyond.
    static let maxConcurrentSends = 256
    /// How many devices' last results are kept for the console at most.
    static let lastResultsLimit = 100_000

    init(
        storage: any SubscriptionStorage, credentials: PushCredentialStore, configuration: ServerConfiguration,
        logger: Logger
    ) {
        self.storage = storage
        self.credentials = credentials
        self.configuration = configuration
        self.logger = logger
        (jobs, jobsContinuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingOldest(Self.queueLimit))
    }

    // MARK: PushTransport

    func deliver(
        _ notifications: [PushNotificationDictionary], to owner: PushDevice.Owner, skippingDevice: String?,
        originatedHere: Bool
    ) {
        guard originatedHere else { return }
        if case .dropped = jobsContinuation.yield(Job(owner: owner, notifications: notifications, skippedDevice: skippingDevice)) {
            configuration.metrics.devicePushDropped(channel: "any", reason: "overloaded")
        }
    }

    /// Devices woken by their platform fetch when the app next runs; a silent push to every device
    /// for a lost event would cost more than it saves.
    func notificationsMayHaveBeenMissed() {}

    // MARK: Sending

    /// The service clients, over one HTTP client made when sending starts and shut down when it ends.
    private typealias Clients = [PushEndpointInfo.Channel: any PushServiceClient]

    func run() async throws {
        let services = configuration.pushServices
        let http = try PushHTTP.makeClient(services)
        let apns = APNsClient(http: http, configuration: services, clock: configuration.clock)
        let clients: Clients = [
            .apnsDevelopment: apns, .apnsProduction: apns,
            .fcm: FCMClient(http: http, configuration: services, clock: configuration.clock),
            .webPush: WebPushClient(http: http, clock: configuration.clock),
        ]
        await cancelWhenGracefulShutdown {
            await withTaskGroup(of: Void.self) { group in
                var running = 0
                for await job in self.jobs {
                    for push in await self.pushes(of: job) {
                        guard let key = self.begin(push) else { continue }
                        if running >= Self.maxConcurrentSends {
                            await group.next()
                            running -= 1
                        }
                        group.addTask { await self.drain(key, first: push, clients: clients) }
                        running += 1
                    }
                }
            }
        }
        try await http.shutdown()
    }

    /// The pushes `job` brings: each notification to each of the user's endpoints whose channel
    /// the container has credentials for, but the device that made the change.
    private func pushes(of job: Job) async -> [Push] {
        let owner = job.owner
        do {
            let credentials = try await credentials.credentials(container: owner.container)
            guard !credentials.isEmpty else { return [] }
            let endpoints = try await storage.pushEndpoints(
                container: owner.container, environment: owner.environment, userRecordName: owner.userRecordName)
            var pushes: [Push] = []
            for endpoint in endpoints where job.skippedDevice == nil || endpoint.deviceID != job.skippedDevice {
                guard credentials.configures(endpoint.channel) else {
                    configuration.metrics.devicePushDropped(channel: endpoint.channel.rawValue, reason: "unconfigured")
                    continue
                }
                pushes += job.notifications.map { Push(notification: $0, owner: owner, endpoint: endpoint) }
            }
            return pushes
        } catch {
            logger.error(
                "push: the devices of a user could not be read", metadata: ["user": "\(owner.userRecordName)", "error": "\(error)"])
            configuration.metrics.devicePushDropped(channel: "any", reason: "failed")
            return []
        }
    }

    /// Which pushes replace one another: a silent one replaces the waiting one of its device and
    /// subscription; alerts are each shown, so each is sent.
    private static func key(of push: Push) -> String {
        let notification = push.notification
        var key = [push.endpoint.id, notification.databaseScope.rawValue, notification.subscriptionID]
        if notification.notificationInfo?.isSilent == false { key.append(notification.notificationID) }
        return key.joined(separator: "\u{0}")
    }

    /// The key to start sending under, or `nil` when a push of that key is in flight: `push` then
    /// waits behind it, replacing the one that waited.
    private func begin(_ push: Push) -> String? {
        let key = Self.key(of: push)
        return inFlight.withLock { inFlight in
            if inFlight.keys.contains(key) {
                inFlight[key] = .some(push)
                return nil
            }
            inFlight[key] = .some(nil)
            return key
        }
    }

    /// Sends `first`, then whatever waited behind it, until nothing waits.
    private func drain(_ key: String, first: Push, clients: Clients) async {
        var push = first
        while true {
            await send(push, clients: clients)
            let next = inFlight.withLock { inFlight -> Push? in
                if let waiting = inFlight[key], let waiting {
                    inFlight[key] = .some(nil)
                    return waiting
                }
                inFlight[key] = nil
                return nil
            }
            guard let next else { return }
            push = next
        }
    }

    /// Sends one push, trying again while the service asks to, and acts on its answer.
    private func send(_ push: Push, clients: Clients) async {
        let channel = push.endpoint.channel
        let container = push.owner.container
        guard let client = clients[channel] else { return }
        let services = configuration.pushServices
        var delay = services.retryDelay
        for attempt in 1...max(1, services.maxAttempts) {
            let credentials: PushCredentials
            do {
                credentials = try await self.credentials.credentials(container: container)
            } catch {
                configuration.metrics.devicePushDropped(channel: channel.rawValue, reason: "failed")
                return
            }
            guard self.credentials.maySend(container: container, channel: channel, with: credentials) else {
                configuration.metrics.devicePushDropped(channel: channel.rawValue, reason: "refused-credentials")
                return
            }
            let started = ContinuousClock.now
            let outcome = await client.send(
                push.notification, userRecordName: push.owner.userRecordName, to: push.endpoint, credentials: credentials)
            record(outcome, of: push, duration: ContinuousClock.now - started)
            switch outcome {
            case .delivered:
                self.credentials.succeeded(container: container, channel: channel)
                return
            case .gone(let reason, let certain):
                self.credentials.failed(container: container, channel: channel)
                guard certain || self.credentials.haveDelivered(container: container, channel: channel, with: credentials)
                else {
                    // Until these credentials deliver, the answer may be about them: keep the address.
                    logger.warning(
                        "push: the service refused a device the container's credentials never delivered to; check them",
                        metadata: ["channel": "\(channel.rawValue)", "reason": "\(reason)"])
                    configuration.metrics.devicePushDropped(channel: channel.rawValue, reason: "failed")
                    return
                }
                logger.info(
                    "push: the service says a device is gone; its endpoint is deleted",
                    metadata: ["channel": "\(channel.rawValue)", "reason": "\(reason)"])
                _ = try? await storage.deletePushEndpoint(id: push.endpoint.id)
                lastResults.withLock { $0[push.endpoint.id] = nil }
                return
            case .refusedCredentials(let reason):
                self.credentials.failed(container: container, channel: channel, problem: reason)
                logger.error(
                    "push: the service refused the container's credentials; the channel rests until they change",
                    metadata: ["container": "\(container)", "channel": "\(channel.rawValue)", "reason": "\(reason)"])
                configuration.metrics.devicePushDropped(channel: channel.rawValue, reason: "refused-credentials")
                return
            case .failed(let reason):
                self.credentials.failed(container: container, channel: channel)
                logger.warning(
                    "push: the service refused a push", metadata: ["channel": "\(channel.rawValue)", "reason": "\(reason)"])
                configuration.metrics.devicePushDropped(channel: channel.rawValue, reason: "failed")
                return
            case .retry(_, let after):
                self.credentials.failed(container: container, channel: channel)
                guard attempt < services.maxAttempts else { break }
                // Full jitter around the doubling delay, or the service's own Retry-After.
                let wait = after ?? delay * Double.random(in: 0.5...1.5)
                delay *= 2
                do {
                    try await Task.sleep(for: wait)
                } catch {
                    return
                }
            }
        }
        configuration.metrics.devicePushDropped(channel: channel.rawValue, reason: "retries-exhausted")
    }

    private func record(_ outcome: PushOutcome, of push: Push, duration: Duration) {
        let name =
            switch outcome {
            case .delivered: "delivered"
            case .gone: "gone"
            case .retry: "retry"
            case .refusedCredentials: "refused-credentials"
            case .failed: "failed"
            }
        configuration.metrics.devicePushAnswered(
            channel: push.endpoint.channel.rawValue, outcome: name, reason: outcome.reason, duration: duration)
        let result = LastResult(outcome: name, reason: outcome.reason, at: configuration.clock.milliseconds)
        lastResults.withLock { results in
            if results.count >= Self.lastResultsLimit, results[push.endpoint.id] == nil { results.removeAll() }
            results[push.endpoint.id] = result
        }
    }

    /// What each endpoint heard last from its service on this instance, by endpoint ID.
    func lastResult(of endpointID: String) -> LastResult? {
        lastResults.withLock { $0[endpointID] }
    }
}
