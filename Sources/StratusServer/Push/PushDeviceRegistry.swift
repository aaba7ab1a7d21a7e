import NIOCore
import StratusModel
import Synchronization

/// The devices this instance holds a notification queue for, by push token and by owner, and the
/// connections that take from those queues (WebSockets and web-courier long polls).
///
/// It is also the first ``PushTransport``: a notification for a user goes into the queue of each
/// of their devices here, which a WebSocket writes as soon as it can and a long poll answers with.
final class PushDeviceRegistry: PushTransport {
    private struct Devices {
        var byToken: [String: PushDevice] = [:]
        var byOwner: [PushDevice.Owner: Set<String>] = [:]
    }

    private let configuration: ServerConfiguration
    private let devices = Mutex(Devices())

    init(configuration: ServerConfiguration) {
        self.configuration = configuration
    }

    /// Connects a device: its queue (kept from an earlier connection of this process, or new),
    /// the connection's ID, and whether notifications may have been missed.
    func connect(
        tokenHash: String, owner: PushDevice.Owner, deviceID: String?, sessionHash: String?, sink: (any PushSink)? = nil
    ) -> (device: PushDevice, connection: UInt64, missedNotifications: Bool) {
        let device = devices.withLock { devices -> PushDevice in
            if let known = devices.byToken[tokenHash], known.owner == owner, known.deviceID == deviceID { return known }
            if let previous = devices.byToken[tokenHash] { devices.byOwner[previous.owner]?.remove(tokenHash) }
            let device = PushDevice(
                tokenHash: tokenHash, owner: owner, deviceID: deviceID, limit: configuration.pushQueueLimit,
                clock: configuration.clock, metrics: configuration.metrics)
            devices.byToken[tokenHash] = device
            devices.byOwner[owner, default: []].insert(tokenHash)
            return device
        }
        let (connection, missed) = device.attach(sessionHash: sessionHash, sink: sink)
        return (device, connection, missed)
    }

    // MARK: PushTransport

    func deliver(
        _ notifications: [PushNotificationDictionary], to owner: PushDevice.Owner, skippingDevice skipped: String?,
        originatedHere: Bool
    ) {
        let recipients = devices.withLock { devices in
            (devices.byOwner[owner] ?? []).compactMap { devices.byToken[$0] }
        }.filter { skipped == nil || $0.deviceID != skipped }
        guard !recipients.isEmpty else { return }
        let now = configuration.clock.milliseconds
        let entries = notifications.map { notification in
            PushDevice.Entry(
                key: [
                    notification.databaseScope.rawValue, notification.subscriptionID, notification.zoneID?.zoneName ?? "",
                    notification.zoneID?.ownerRecordName ?? "",
                ].joined(separator: "\u{0}"),
                frame: ByteBuffer(bytes: PushMessage.notification(notification).jsonBytes), payload: notification,
                queuedAt: now)
        }
        for device in recipients { device.enqueue(entries) }
    }

    func notificationsMayHaveBeenMissed() {
        for device in all { device.enqueue([], missed: true) }
    }

    // MARK: Connections

    private var all: [PushDevice] { devices.withLock { Array($0.byToken.values) } }

    /// Ends every connection, so that devices see the server go and reconnect elsewhere.
    func disconnectAll() {
        for device in all { device.disconnect() }
    }

    /// Ends the connections signed in with the sessions that ended; when all of a user's ended,
    /// every push connection of theirs, bare web courier polls included (their push tokens were
    /// deleted with their sessions).
    func closeConnections(of revocation: CredentialRevocation) {
        for device in all {
            if let user = revocation.userRecordName, device.owner.container == revocation.container,
                device.owner.userRecordName == user
            {
                device.disconnect()
            } else {
                for hash in revocation.sessionHashes { device.disconnect(sessionHash: hash) }
            }
        }
    }

    /// Forgets the devices away since before `cutoff` (milliseconds since 1970).
    func forgetDevices(awaySince cutoff: Int64) {
        devices.withLock { devices in
            for (hash, device) in devices.byToken where device.isAway(since: cutoff) {
                devices.byToken[hash] = nil
                devices.byOwner[device.owner]?.remove(hash)
                if devices.byOwner[device.owner]?.isEmpty == true { devices.byOwner[device.owner] = nil }
            }
        }
    }

    /// The devices of a container this instance holds a queue for, connected or recently away.
    func snapshots(container: String) -> [PushDevice.Snapshot] {
        all.filter { $0.owner.container == container }.map(\.snapshot)
    }

    /// How many devices hold a queue here (connected or recently away), and how many of them are
    /// connected.
    var counts: (queued: Int, connected: Int) {
        let devices = all
        return (devices.count, devices.count(where: \.isConnected))
    }
}
