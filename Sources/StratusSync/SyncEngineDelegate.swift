/// What a ``SyncEngine`` asks of the app (CloudKit's `CKSyncEngineDelegate`).
///
/// The engine calls these one at a time: it never calls `handleEvent` again before the previous
/// call returned, and it waits for each call before going on, so that fetched changes are applied
/// before their change token is handed over for persisting. Make the delegate an actor, and do
/// not call `fetchChanges` or `sendChanges` from inside these methods.
public protocol SyncEngineDelegate: AnyObject, Sendable {
    /// Handles an event: changes fetched, changes sent (or refused), state to persist, account
    /// changes, and the start and end of each fetch and send.
    func handleEvent(_ event: SyncEngine.Event, syncEngine: SyncEngine) async

    /// The next records to save and delete, or `nil` when there are none. Called repeatedly during a
    /// send until it returns `nil`. ``SyncEngine/RecordZoneChangeBatch/init(pendingChanges:recordProvider:)``
    /// fills a batch from the pending changes within the server's limits.
    func nextRecordZoneChangeBatch(
        _ context: SyncEngine.SendChangesContext, syncEngine: SyncEngine
    ) async -> SyncEngine.RecordZoneChangeBatch?

    /// The options of the next fetch request; by default the options the fetch was called with.
    func nextFetchChangesOptions(
        _ context: SyncEngine.FetchChangesContext, syncEngine: SyncEngine
    ) async -> SyncEngine.FetchChangesOptions
}

extension SyncEngineDelegate {
    public func nextFetchChangesOptions(
        _ context: SyncEngine.FetchChangesContext, syncEngine: SyncEngine
    ) async -> SyncEngine.FetchChangesOptions {
        context.options
    }
}
