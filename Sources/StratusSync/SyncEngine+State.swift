import Foundation
import Logging
public import Stratus
import Synchronization

extension SyncEngine {
    /// What the engine knows and has to do (CloudKit's `CKSyncEngine.State`): the changes to send,
    /// the change tokens, the signed-in user, the subscription; and beyond CloudKit, where each
    /// change stands (``trackedRecordZoneChanges``).
    ///
    /// Adding a change the engine already has does not duplicate it, and a change replaces the other
    /// change of the same record or zone: a save then a delete leaves the delete, a delete then a
    /// save leaves the save. With ``Configuration/journalURL``, every add and remove is on disk
    /// when the call returns.
    public final class State: Sendable {
        private let storage: Mutex<Storage>
        /// Called after the app adds pending changes, to schedule a send.
        private let onAdd: Mutex<(@Sendable () -> Void)?> = Mutex(nil)
        private let logger: Logger

        init(serialization: Serialization?, journalURL: URL?, logger: Logger) throws {
            var snapshot = serialization?.snapshot ?? Snapshot()
            var journal: PendingChangeJournal?
            var unpersisted: [PendingChangeJournal.Entry] = []
            if let journalURL {
                let opened = try PendingChangeJournal(url: journalURL)
                let entries = try opened.entries()
                unpersisted = entries.filter { $0.sequence > snapshot.journalSequence }
                for entry in unpersisted { snapshot.apply(entry.operation, version: 0) }
                snapshot.journalSequence = max(snapshot.journalSequence, unpersisted.last?.sequence ?? 0)
                if unpersisted.count < entries.count { try opened.rewrite(keeping: unpersisted) }
                journal = opened
            }
            storage = Mutex(Storage(snapshot: snapshot, journal: journal, unpersisted: unpersisted))
            self.logger = logger
        }

        /// The records to save and delete, in the order they were added.
        public var pendingRecordZoneChanges: [PendingRecordZoneChange] {
            storage.withLock { $0.snapshot.recordZoneChanges.changes }
        }

        /// The first `limit` records to save or delete within `scope`, in the order they were added:
        /// what one batch is made from. It costs time in proportion to `limit`, where
        /// ``pendingRecordZoneChanges`` copies every pending change, which a delegate that reads it
        /// for each batch pays once per batch: a send of a long queue then grows with its square.
        /// Ask for more than one request holds when the record provider may skip changes. Asked
        /// while the engine prepares a batch, it leaves out the records of the request on the way to
        /// the server (the engine prepares the next batch while one is on the way): they go in a
        /// later batch, once their answer is kept.
        public func pendingRecordZoneChanges(in scope: SendChangesOptions.Scope, limit: Int) -> [PendingRecordZoneChange] {
            let onTheWay = SyncEngine.batchRules.recordIDsOnTheWay
            return storage.withLock {
                $0.snapshot.recordZoneChanges.prefix(limit) { scope.contains($0) && !onTheWay.contains($0.recordID) }
            }
        }

        /// The zones to save and delete, in the order they were added.
        public var pendingDatabaseChanges: [PendingDatabaseChange] {
            storage.withLock { $0.snapshot.databaseChanges.changes }
        }

        /// Whether the app has changes to send that it does not list as pending: the engine then
        /// asks the delegate for batches even when nothing is pending. The engine sets it back to
        /// `false` after a send in which the delegate ran out of batches.
        public var hasPendingUntrackedChanges: Bool {
            get { storage.withLock { $0.snapshot.hasPendingUntrackedChanges } }
            set {
                record(.setHasPendingUntrackedChanges(newValue))
                if newValue { onAdd.withLock { $0 }?() }
            }
        }

        /// Zones the server reported changed that the engine has not fetched yet.
        public var zoneIDsWithUnfetchedServerChanges: [RecordZone.ID] {
            storage.withLock { $0.snapshot.unfetchedZoneIDs }
        }

        /// Every record change pending, in flight, waiting to be retried or refused by the server,
        /// with why it failed: what the engine still has to do, and what it gave up on.
        public var trackedRecordZoneChanges: [TrackedChange<PendingRecordZoneChange>] {
            storage.withLock { $0.snapshot.recordZoneChanges.tracked }
        }

        /// Every zone change pending, in flight, waiting to be retried or refused by the server.
        public var trackedDatabaseChanges: [TrackedChange<PendingDatabaseChange>] {
            storage.withLock { $0.snapshot.databaseChanges.tracked }
        }

        /// Where `change` stands; `nil` when the engine neither has it pending nor saw it refused.
        public func status(of change: PendingRecordZoneChange) -> ChangeStatus? {
            storage.withLock { $0.snapshot.recordZoneChanges.status(of: change) }
        }

        /// Where `change` stands; `nil` when the engine neither has it pending nor saw it refused.
        public func status(of change: PendingDatabaseChange) -> ChangeStatus? {
            storage.withLock { $0.snapshot.databaseChanges.status(of: change) }
        }

        /// The record changes of `user` (a user who signed out on this device) that were not sent,
        /// which the engine keeps for them: they are pending again when `user` signs in.
        public func parkedRecordZoneChanges(ofUser user: Record.ID) -> [PendingRecordZoneChange] {
            storage.withLock { $0.snapshot.parkedChanges?[user.recordName]?.recordZoneChanges ?? [] }
        }

        /// Forgets the changes parked for `user` (the app discards them, after handing their
        /// records to its user): they are not sent when `user` signs in again. Kept on disk with
        /// the next `stateUpdate`.
        public func discardParkedChanges(ofUser user: Record.ID) {
            storage.withLock { storage in
                storage.snapshot.parkedChanges?[user.recordName] = nil
                if storage.snapshot.parkedChanges?.isEmpty == true { storage.snapshot.parkedChanges = nil }
            }
        }

        /// Makes the next fetch read every zone the engine fetched from its start, as after an
        /// expired token: an app upgraded to keep fields it ignored until now needs again the
        /// records it already holds. What the delegate holds
        /// (``SyncEngineDelegate/recordsHeld(inZone:syncEngine:)``) and the read does not return is
        /// reported deleted. A zone stays to read again until its read reached the end; kept on disk
        /// with the next `stateUpdate`.
        public func refetchAllZones() {
            storage.withLock { storage in
                let zoneIDs = Array(storage.snapshot.zoneChangeTokens.keys)
                guard !zoneIDs.isEmpty else { return }
                storage.snapshot.zonesToReadAgain = Array(Set(zoneIDs + (storage.snapshot.zonesToReadAgain ?? [])))
                storage.snapshot.markUnfetched(zoneIDs)
            }
        }

        /// The signed-in user's permission in a shared zone, from the zone's share as the engine
        /// last fetched it; `nil` when it fetched none (the zone is the user's own, or not fetched
        /// yet). The engine refuses, before sending, a change in a zone whose permission is not
        /// `readWrite`, with the error the server would give: check it before offering an edit.
        public func sharePermission(in zoneID: RecordZone.ID) -> Share.ParticipantPermission? {
            storage.withLock { $0.snapshot.sharePermissions?[zoneID].flatMap(Share.ParticipantPermission.init(rawValue:)) }
        }

        /// Adds records to save or delete. Call it before the local edit is committed: once it
        /// returns, the change survives the process dying (with a journal).
        public func add(pendingRecordZoneChanges changes: [PendingRecordZoneChange]) {
            guard !changes.isEmpty else { return }
            record(.addRecordZoneChanges(changes))
            onAdd.withLock { $0 }?()
        }

        /// Removes pending record changes, and forgets their failures.
        public func remove(pendingRecordZoneChanges changes: [PendingRecordZoneChange]) {
            guard !changes.isEmpty else { return }
            record(.removeRecordZoneChanges(changes))
        }

        /// Adds zones to save or delete.
        public func add(pendingDatabaseChanges changes: [PendingDatabaseChange]) {
            guard !changes.isEmpty else { return }
            record(.addDatabaseChanges(changes))
            onAdd.withLock { $0 }?()
        }

        /// Removes pending zone changes, and forgets their failures.
        public func remove(pendingDatabaseChanges changes: [PendingDatabaseChange]) {
            guard !changes.isEmpty else { return }
            record(.removeDatabaseChanges(changes))
        }

        /// Applies an operation of the app, writing it to the journal first.
        private func record(_ operation: PendingChangeJournal.Entry.Operation) {
            storage.withLock { storage in
                storage.snapshot.version += 1
                storage.snapshot.apply(operation, version: storage.snapshot.version)
                guard let journal = storage.journal else { return }
                storage.snapshot.journalSequence += 1
                let entry = PendingChangeJournal.Entry(sequence: storage.snapshot.journalSequence, operation: operation)
                storage.unpersisted.append(entry)
                do {
                    try journal.append(entry)
                } catch {
                    logger.error(
                        "sync engine: the journal could not be written; the change is pending but not yet on disk",
                        metadata: ["stratus.journal": "\(journal.url.path)", "stratus.error": "\(error)"])
                }
            }
        }

        // MARK: - The engine's side

        /// Makes a new state, which no user owns yet, `user`'s: the user signed in when the engine
        /// first started, whose changes the app adds from then on (journaled, so that a change
        /// made before the first persisted state stays theirs if another user signs in next).
        func adopt(user: String) {
            guard storage.withLock({ $0.snapshot.userRecordName == nil && $0.snapshot.adoptedUserRecordName == nil }) else { return }
            record(.adoptUser(user))
        }

        func setOnAdd(_ action: @escaping @Sendable () -> Void) {
            onAdd.withLock { $0 = action }
        }

        /// Reads and changes the state under its lock.
        func withSnapshot<Result>(_ body: (inout Snapshot) throws -> Result) rethrows -> Result {
            try storage.withLock { try body(&$0.snapshot) }
        }

        /// The state to hand to the app now.
        package func serialization() -> Serialization {
            storage.withLock { Serialization(snapshot: $0.snapshot) }
        }

        /// The app persisted `serialization`: drop the journal entries it includes.
        func persisted(_ serialization: Serialization) {
            storage.withLock { storage in
                guard let journal = storage.journal else { return }
                let persistedSequence = serialization.snapshot.journalSequence
                let before = storage.unpersisted.count
                storage.unpersisted.removeAll { $0.sequence <= persistedSequence }
                guard storage.unpersisted.count < before else { return }
                do {
                    try journal.rewrite(keeping: storage.unpersisted)
                } catch {
                    logger.warning(
                        "sync engine: the journal could not be compacted",
                        metadata: ["stratus.journal": "\(journal.url.path)", "stratus.error": "\(error)"])
                }
            }
        }

        /// Starts over for the user now signed in, `current` (after the account changed): tokens,
        /// subscription and failures are forgotten. The previous user's changes not yet sent are
        /// parked for them, and those parked for `current` at an earlier session are pending again;
        /// changes made while nobody was signed in (or by `current`, before the engine first
        /// checked the account) go to `current`. Returns the changes parked and
        /// those brought back.
        func changeUser(
            to current: String?
        ) -> (parked: [PendingRecordZoneChange], restored: [PendingRecordZoneChange]) {
            storage.withLock { storage in
                let previous = storage.snapshot
                var fresh = Snapshot()
                fresh.userRecordName = current
                fresh.journalSequence = previous.journalSequence
                fresh.version = previous.version
                var parked = previous.parkedChanges ?? [:]
                var parkedNow: [PendingRecordZoneChange] = []
                if let previousUser = previous.userRecordName ?? previous.adoptedUserRecordName, previousUser != current {
                    parkedNow = previous.recordZoneChanges.changes
                    var kept = parked[previousUser] ?? ParkedChanges()
                    kept.add(recordZoneChanges: parkedNow, databaseChanges: previous.databaseChanges.changes)
                    parked[previousUser] = kept.isEmpty ? nil : kept
                } else {
                    fresh.recordZoneChanges = previous.recordZoneChanges
                    fresh.databaseChanges = previous.databaseChanges
                    fresh.hasPendingUntrackedChanges = previous.hasPendingUntrackedChanges
                }
                var restored: [PendingRecordZoneChange] = []
                if let current, let kept = parked.removeValue(forKey: current) {
                    for change in kept.databaseChanges { fresh.databaseChanges.add(change, version: fresh.version) }
                    for change in kept.recordZoneChanges { fresh.recordZoneChanges.add(change, version: fresh.version) }
                    restored = kept.recordZoneChanges
                }
                fresh.parkedChanges = parked.isEmpty ? nil : parked
                storage.snapshot = fresh
                return (parkedNow, restored)
            }
        }

        private struct Storage {
            var snapshot: Snapshot
            var journal: PendingChangeJournal?
            /// Journal entries the app may not have persisted yet, in order.
            var unpersisted: [PendingChangeJournal.Entry]
        }

        /// The state's values: what a ``Serialization`` holds.
        struct Snapshot: Codable, Sendable {
            var userRecordName: String?
            var databaseChangeToken: ServerChangeToken?
            var zoneChangeTokens: [RecordZone.ID: ServerChangeToken] = [:]
            var unfetchedZoneIDs: [RecordZone.ID] = []
            var recordZoneChanges = ChangeQueue<PendingRecordZoneChange>()
            var databaseChanges = ChangeQueue<PendingDatabaseChange>()
            var hasPendingUntrackedChanges = false
            /// The database subscription the engine saved, once it did.
            var subscriptionID: Subscription.ID?
            /// The user signed in when the engine first started, until it first checked the account
            /// and made them ``userRecordName``.
            var adoptedUserRecordName: String?
            /// The last journal entry included.
            var journalSequence: UInt64 = 0
            /// Counts the app's operations, to tell a change added again during a send.
            var version: UInt64 = 0
            /// The changes of users who signed out before they were sent, by user record name,
            /// pending again when that user signs in; `nil` when there are none (and in a state
            /// saved before users' changes were parked).
            var parkedChanges: [String: ParkedChanges]?
            /// Zones to read from their start at their next fetch (``refetchAllZones()``).
            var zonesToReadAgain: [RecordZone.ID]?
            /// The signed-in user's permission in each shared zone, by the raw value of
            /// `Share.ParticipantPermission`, from the zone's share as last fetched.
            var sharePermissions: [RecordZone.ID: String]?

            private enum CodingKeys: String, CodingKey {
                case userRecordName, databaseChangeToken, zoneChangeTokens, unfetchedZoneIDs, recordZoneChanges
                case databaseChanges, hasPendingUntrackedChanges, subscriptionID, journalSequence, parkedChanges
                case adoptedUserRecordName, zonesToReadAgain, sharePermissions
            }

            init() {}

            mutating func apply(_ operation: PendingChangeJournal.Entry.Operation, version: UInt64) {
                switch operation {
                case .addRecordZoneChanges(let changes):
                    for change in changes { recordZoneChanges.add(change, version: version) }
                case .removeRecordZoneChanges(let changes):
                    for change in changes { recordZoneChanges.remove(change) }
                case .addDatabaseChanges(let changes):
                    for change in changes { databaseChanges.add(change, version: version) }
                case .removeDatabaseChanges(let changes):
                    for change in changes { databaseChanges.remove(change) }
                case .setHasPendingUntrackedChanges(let value):
                    hasPendingUntrackedChanges = value
                case .adoptUser(let user):
                    if userRecordName == nil { adoptedUserRecordName = user }
                }
            }

            /// Notes that `zoneIDs` have changes to fetch.
            mutating func markUnfetched(_ zoneIDs: some Sequence<RecordZone.ID>) {
                for zoneID in zoneIDs where !unfetchedZoneIDs.contains(zoneID) { unfetchedZoneIDs.append(zoneID) }
            }

            /// Forgets a zone that is gone.
            mutating func forgetZone(_ zoneID: RecordZone.ID) {
                zoneChangeTokens[zoneID] = nil
                unfetchedZoneIDs.removeAll { $0 == zoneID }
                readAgain(zoneID, done: true)
                sharePermissions?[zoneID] = nil
            }

            /// The refusals, as the server would answer them, of the changes of `batch` in zones the
            /// signed-in user may only read.
            func refusalsOfReadOnlyZones(_ batch: RecordZoneChangeBatch) -> [Record.ID: CloudError] {
                guard let sharePermissions else { return [:] }
                var refusals: [Record.ID: CloudError] = [:]
                for recordID in batch.recordsToSave.map(\.recordID) + batch.recordIDsToDelete {
                    guard let permission = sharePermissions[recordID.zoneID],
                        permission != Share.ParticipantPermission.readWrite.rawValue
                    else { continue }
                    refusals[recordID] = CloudError.sharedReadOnly(recordID.zoneID)
                }
                return refusals
            }

            /// Notes that `zoneID` was read again to its end (`done`).
            mutating func readAgain(_ zoneID: RecordZone.ID, done: Bool) {
                guard done else { return }
                zonesToReadAgain?.removeAll { $0 == zoneID }
                if zonesToReadAgain?.isEmpty == true { zonesToReadAgain = nil }
            }
        }

        /// A signed-out user's changes not yet sent, kept on the device for them.
        struct ParkedChanges: Codable, Sendable {
            var recordZoneChanges: [PendingRecordZoneChange] = []
            var databaseChanges: [PendingDatabaseChange] = []

            var isEmpty: Bool { recordZoneChanges.isEmpty && databaseChanges.isEmpty }

            /// Adds changes, each replacing an earlier one of the same record or zone.
            mutating func add(recordZoneChanges records: [PendingRecordZoneChange], databaseChanges zones: [PendingDatabaseChange]) {
                let recordIDs = Set(records.map(\.recordID))
                recordZoneChanges = recordZoneChanges.filter { !recordIDs.contains($0.recordID) } + records
                let zoneIDs = Set(zones.map(\.zoneID))
                databaseChanges = databaseChanges.filter { !zoneIDs.contains($0.zoneID) } + zones
            }
        }

        /// The engine's state, to persist on each `stateUpdate` event and pass back to
        /// ``Configuration`` at the next launch (CloudKit's `CKSyncEngine.State.Serialization`).
        /// Its encoding is the engine's business.
        public struct Serialization: Sendable, Codable {
            let snapshot: Snapshot

            init(snapshot: Snapshot) {
                self.snapshot = snapshot
            }

            public init(from decoder: any Decoder) throws {
                snapshot = try Snapshot(from: decoder)
            }

            public func encode(to encoder: any Encoder) throws {
                try snapshot.encode(to: encoder)
            }

            /// The state without its pending record zone changes, for a delegate that keeps them
            /// itself and adds them again at every launch (StratusStore's outbox): a queue of
            /// 100,000 saves encoded at each `stateUpdate` of a long send cost that send seconds.
            package func withoutPendingRecordZoneChanges() -> Serialization {
                var snapshot = snapshot
                snapshot.recordZoneChanges = ChangeQueue()
                snapshot.parkedChanges = nil
                return Serialization(snapshot: snapshot)
            }
        }
    }
}
