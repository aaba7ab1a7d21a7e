import StratusModel
import StratusStorage

/// How the endpoints write records and zones: each committed change goes to push from here, the one
/// place that does, from the write's outcome (``ModifyRecordsOutcome/changes``), with the device
/// that made it (``PushHub/Origin``) so that it is not told of its own change.
///
/// Endpoints never call the storage's `modifyRecords`, `createZone` or `deleteZone` themselves, so
/// no write can be committed without its notifications, and none is published twice.
struct ChangeWriter: Sendable {
    let storage: any RecordStorage & ShareStorage & AccountStorage
    let hub: PushHub

    /// Applies writes to one zone (``RecordStorage/modifyRecords(_:zone:in:atomic:context:)``) and
    /// publishes what committed.
    func modifyRecords(
        _ writes: [RecordWrite], zone: String, in database: DatabaseLocator, atomic: Bool, context: WriteContext
    ) async throws -> ModifyRecordsOutcome {
        let outcome = try await storage.modifyRecords(writes, zone: zone, in: database, atomic: atomic, context: context)
        if !outcome.changes.isEmpty {
            hub.publish(.records(database, zone: zone, changes: outcome.changes, origin: PushHub.Origin(context)))
        }
        return outcome
    }

    /// Creates a custom zone, or finds the live one of that name; a zone created is published.
    func createZone(
        named name: String, in database: DatabaseLocator, timestamp: Int64, origin: PushHub.Origin?
    ) async throws -> (zone: ZoneState, created: Bool) {
        let (zone, created) = try await storage.createZone(named: name, in: database, timestamp: timestamp)
        if created { hub.publish(.zone(database, name: name, deleted: false, origin: origin)) }
        return (zone, created)
    }

    /// Deletes a custom zone and its records; `false` when there is no such zone. Who had accepted
    /// its shares is read first (their share rows go with it), so that they hear it went.
    func deleteZone(named name: String, in database: DatabaseLocator, timestamp: Int64, origin: PushHub.Origin?) async throws -> Bool {
        let participants = database.scope == .private ? try await storage.acceptedParticipants(zone: name, in: database) : []
        guard try await storage.deleteZone(named: name, in: database, timestamp: timestamp) else { return false }
        hub.publish(.zone(database, name: name, deleted: true, participants: participants, origin: origin))
        return true
    }
}
