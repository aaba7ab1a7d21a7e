public import Stratus

extension SyncEngine {
    /// Hands the engine a notification the app received through its platform's push service, as
    /// an app hands CKSyncEngine the pushes it receives. When it concerns the engine's database, the
    /// engine (its container and database) fetches soon (when it syncs automatically; otherwise call
    /// ``fetchChanges(_:)``).
    ///
    /// ```swift
    /// // iOS: application(_:didReceiveRemoteNotification:fetchCompletionHandler:)
    /// if let notification = RemoteNotification(userInfo: userInfo) {
    ///     engine.handleRemoteNotification(notification)
    /// }
    /// ```
    ///
    /// - Returns: Whether the notification is of the engine's container and database, and a fetch
    ///   was asked for.
    @discardableResult
    public func handleRemoteNotification(_ notification: RemoteNotification) -> Bool {
        guard notification.containerIdentifier == transport.containerIdentifier,
            notification.databaseScope == transport.databaseScope
        else { return false }
        fetchRequested()
        return true
    }
}
