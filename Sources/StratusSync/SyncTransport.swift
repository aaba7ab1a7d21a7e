public import Logging
public import Stratus

/// What the sync engine asks of the server: the handful of calls it makes. The engine's logic is
/// written against this seam rather than against the SDK's `Database`, which conforms; another
/// transport (a recording one in a test, another SDK) can stand in for it.
public protocol SyncTransport: Sendable {
    /// The container whose database is synced (`iCloud.com.example.notes`).
    var containerIdentifier: String { get }
    /// The database synced: private, shared or public.
    var databaseScope: Database.Scope { get }
    /// How the engine backs off after passing failures.
    var retryPolicy: RetryPolicy { get }
    /// Where the engine logs.
    var logger: Logger { get }
    /// The signed-in user, or `nil`: the engine notices account changes through it.
    var signedInUserRecordName: String? { get }
    /// Saves the database subscription the engine follows.
    func saveSubscription(_ subscription: Subscription) async throws
    /// The zones changed since a token.
    func databaseChanges(since changeToken: ServerChangeToken?) async throws -> DatabaseChanges
    /// A zone's changes since a token, page by page.
    func recordZoneChangePages(inZoneWith zoneID: RecordZone.ID, since changeToken: ServerChangeToken?)
        -> RecordZoneChangePages
    /// Saves and deletes zones.
    func modifyRecordZones(
        saving zonesToSave: [RecordZone], deleting zoneIDsToDelete: [RecordZone.ID]
    ) async throws -> ModifyResults<RecordZone.ID, RecordZone>
    /// Saves and deletes records.
    func modifyRecords(
        saving recordsToSave: [Record], deleting recordIDsToDelete: [Record.ID], deletionChangeTags: [Record.ID: String],
        savePolicy: RecordSavePolicy, atomically: Bool
    ) async throws -> ModifyResults<Record.ID, Record>
    /// The server's limits, which batches stay within.
    func serverLimits() async throws -> ServerLimits
    /// The push channel's events.
    func notifications() -> AsyncThrowingStream<PushEvent, any Error>
}

extension Database: SyncTransport {
    /// The container's identifier.
    public var containerIdentifier: String { container.containerIdentifier }
    /// The container's retry policy.
    public var retryPolicy: RetryPolicy { container.configuration.retryPolicy }
    /// The container's logger.
    public var logger: Logger { container.configuration.logger }
    /// The container's signed-in user.
    public var signedInUserRecordName: String? { container.session?.userRecordName }

    /// Saves a subscription, discarding the saved copy.
    public func saveSubscription(_ subscription: Subscription) async throws {
        _ = try await save(subscription)
    }

    /// Zone changes since a token, in pages of the server's size.
    public func databaseChanges(since changeToken: ServerChangeToken?) async throws -> DatabaseChanges {
        try await databaseChanges(since: changeToken, resultsLimit: nil)
    }

    /// A zone's changes since a token, all fields, pages of the server's size.
    public func recordZoneChangePages(
        inZoneWith zoneID: RecordZone.ID, since changeToken: ServerChangeToken?
    ) -> RecordZoneChangePages {
        recordZoneChangePages(inZoneWith: zoneID, since: changeToken, desiredKeys: nil, resultsLimit: nil)
    }

    /// The container's server limits.
    public func serverLimits() async throws -> ServerLimits {
        try await container.serverLimits()
    }

    /// The container's push channel.
    public func notifications() -> AsyncThrowingStream<PushEvent, any Error> {
        container.notifications()
    }
}
