import StratusModel

/// A way notifications reach a user's devices. The hub decides who hears of a change and which
/// subscriptions it fires; each transport only carries the notifications to the devices it knows
/// of (``PushDeviceRegistry`` queues them for WebSockets and web-courier polls).
///
/// A transport is called on the hub's event loop, once per user per event, with every notification
/// that event brings that user, so that a device never sees half of an event. It must return
/// quickly: one that talks to an outside service queues the work and sends from a task of its own.
protocol PushTransport: Sendable {
    /// Carries `notifications` to the devices of `owner` this transport reaches, except the one
    /// whose ``PushDevice/deviceID`` is `skippingDevice` (the device that made the change).
    ///
    /// Every instance is called for every event; `originatedHere` says whether the event happened
    /// on this one. A transport of devices connected here delivers either way; one that reaches
    /// devices wherever they are (a platform's push service) delivers only what originated here,
    /// so that each push goes out once.
    func deliver(
        _ notifications: [PushNotificationDictionary], to owner: PushDevice.Owner, skippingDevice: String?,
        originatedHere: Bool)

    /// Notifications may have been lost (an event failed, or messages of other instances were):
    /// every device is told to fetch with its change tokens.
    func notificationsMayHaveBeenMissed()
}
