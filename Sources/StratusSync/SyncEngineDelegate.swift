public import Stratus

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

    /// The records of `zoneID` the app holds as the server last had them, with their record types.
    ///
    /// The engine asks when the server no longer knows what changed in the zone since the engine's
    /// token (`changeTokenExpired`: tombstones were purged, or the zone was deleted and made again)
    /// and the zone is read again from the beginning. That read names no deletion, so the engine
    /// hands the delegate, with its last changes, a deletion of each record answered here that the
    /// read did not return. By default nothing is answered, and records deleted on the server
    /// while the token aged stay in the app.
    func recordsHeld(inZone zoneID: RecordZone.ID, syncEngine: SyncEngine) async -> [Record.ID: String]
}

extension SyncEngineDelegate {
    public func recordsHeld(inZone zoneID: RecordZone.ID, syncEngine: SyncEngine) async -> [Record.ID: String] {
        [:]
    }

    public func nextFetchChangesOptions(
        _ context: SyncEngine.FetchChangesContext, syncEngine: SyncEngine
    ) async -> SyncEngine.FetchChangesOptions {
        context.options
    }
}
