import Foundation
public import Stratus

extension SyncEngine {
    /// Sends the pending zone changes, then the delegate's record batches, reporting each.
    func send(_ context: SendChangesContext) async throws {
        guard let delegate else { return }
        guard await checkAccount(delegate) else { throw Self.notSignedIn }
        let scope = context.options.scope
        let hasWork = state.withSnapshot { snapshot in
            snapshot.hasPendingUntrackedChanges || snapshot.recordZoneChanges.contains { scope.contains($0) }
                || snapshot.databaseChanges.contains { scope.covers($0.zoneID) }
        }
        guard hasWork else { return }
        await emit(.willSendChanges(.init(context: context)), to: delegate)
        let failures: [CloudError.ItemID: CloudError]
        do {
            failures = try await sendPendingChanges(context, delegate: delegate)
        } catch {
            if let error = error as? CloudError, error.keepsChangesPending { retrySendIfNotAsked(after: error) }
            state.withSnapshot { snapshot in
                snapshot.recordZoneChanges.resetInFlight()
                snapshot.databaseChanges.resetInFlight()
            }
            await emitStateUpdate(to: delegate)
            await emit(.didSendChanges(.init(context: context)), to: delegate)
            throw error
        }
        await emitStateUpdate(to: delegate)
        await emit(.didSendChanges(.init(context: context)), to: delegate)
        if !failures.isEmpty {
            var error = CloudError(
                .partialFailure,
                "\(failures.count) change(s) failed; the sentRecordZoneChanges and sentDatabaseChanges events said why")
            error.partialErrorsByItemID = failures
            throw error
        }
    }

    /// Saves and deletes zones; returns the zones that failed. A zone change that failed for a
    /// passing reason ends the send (the records of its zone would fail too) and is retried.
    private func sendDatabaseChanges(
        _ changes: [PendingDatabaseChange], delegate: any SyncEngineDelegate
    ) async throws -> [CloudError.ItemID: CloudError] {
        let version = state.withSnapshot { snapshot in
            for change in changes { snapshot.databaseChanges.markInFlight(change) }
            return snapshot.version
        }
        var zonesToSave: [RecordZone] = []
        var zoneIDsToDelete: [RecordZone.ID] = []
        for change in changes {
            switch change {
            case .saveZone(let zone): zonesToSave.append(zone)
            case .deleteZone(let zoneID): zoneIDsToDelete.append(zoneID)
            }
        }
        let answer = await Answer {
            try await transport.modifyRecordZones(saving: zonesToSave, deleting: zoneIDsToDelete)
        }
        var settling = Settling(engine: self)
        var savedZones: [RecordZone] = []
        var failedZoneSaves: [Event.SentDatabaseChanges.FailedZoneSave] = []
        var deletedZoneIDs: [RecordZone.ID] = []
        var failedZoneDeletes: [RecordZone.ID: CloudError] = [:]
        for zone in zonesToSave {
            let change = PendingDatabaseChange.saveZone(zone)
            switch answer.saveResult(zone.zoneID) {
            case .success(let saved):
                state.withSnapshot { $0.databaseChanges.confirm(change, sentAt: version) }
                savedZones.append(saved)
            case .failure(let error):
                let disposition = settling.disposition(for: error)
                state.withSnapshot { $0.databaseChanges.settle(change, failedWith: error, disposition, sentAt: version) }
                failedZoneSaves.append(.init(zone: zone, error: error))
            }
        }
        for zoneID in zoneIDsToDelete {
            let change = PendingDatabaseChange.deleteZone(zoneID)
            // A zone already gone is as good as deleted.
            if case .failure(let error) = answer.deleteResult(zoneID), error.code != .zoneNotFound {
                let disposition = settling.disposition(for: error)
                state.withSnapshot { $0.databaseChanges.settle(change, failedWith: error, disposition, sentAt: version) }
                failedZoneDeletes[zoneID] = error
            } else {
                state.withSnapshot { snapshot in
                    snapshot.databaseChanges.confirm(change, sentAt: version)
                    snapshot.forgetZone(zoneID)
                }
                deletedZoneIDs.append(zoneID)
            }
        }
        await emit(
            .sentDatabaseChanges(
                .init(
                    savedZones: savedZones, failedZoneSaves: failedZoneSaves, deletedZoneIDs: deletedZoneIDs,
                    failedZoneDeletes: failedZoneDeletes)),
            to: delegate)
        try settling.finish()
        var failures = failedZoneDeletes.mapKeys(CloudError.ItemID.zone)
        for failure in failedZoneSaves { failures[.zone(failure.zone.zoneID)] = failure.error }
        return failures
    }

    /// Sends the pending zone changes, then asks the delegate for batches and sends them until it
    /// has none, or a request fails for a passing reason. Zone changes added meanwhile (a zone to
    /// create after `zoneNotFound`) go out before the next batch. A record or zone is sent at most
    /// twice in one send (once more after its failure was resolved), so that a delegate that keeps
    /// handing the same refused change cannot loop. Returns what failed.
    ///
    /// One request is on the way at a time, and the delegate works while it is: it prepares the next
    /// batch then (the records on the way left out), and when an answer holds no failure the next
    /// batch goes out before the delegate hears of that answer, so that the delegate's reading and
    /// keeping of rows overlaps the server's writes instead of adding to them. After a failure the
    /// send goes one request at a time, as the failure's handling may add a zone to create first,
    /// or end the send.
    private func sendPendingChanges(
        _ context: SendChangesContext, delegate: any SyncEngineDelegate
    ) async throws -> [CloudError.ItemID: CloudError] {
        let limits = try await transport.serverLimits()
        let rules = BatchRules(
            operations: limits.maxOperationsPerRequest,
            // Leave room for the request's envelope and the records' JSON beyond their values.
            bytes: limits.maxRequestBodyBytes / 2)
        let scope = context.options.scope
        var attempts: [CloudError.ItemID: Int] = [:]
        var failures: [CloudError.ItemID: CloudError] = [:]
        /// Counts a batch's changes as attempted; `false` when every one was attempted twice already.
        func attempt(_ batch: PreparedBatch) -> Bool {
            let itemIDs = batch.recordIDs.map(CloudError.ItemID.record)
            guard itemIDs.contains(where: { attempts[$0, default: 0] < 2 }) else { return false }
            for itemID in itemIDs { attempts[itemID, default: 0] += 1 }
            return true
        }
        func pendingZoneChanges() -> [PendingDatabaseChange] {
            state.withSnapshot { snapshot in
                snapshot.databaseChanges.changes.filter { scope.covers($0.zoneID) && attempts[.zone($0.zoneID), default: 0] < 2 }
            }
        }
        var onTheWay: RecordRequest?
        var ahead: PreparedBatch?
        while true {
            if onTheWay == nil {
                try Task.checkCancellation()
                try await requireSameAccount(delegate)
                let zoneChanges = pendingZoneChanges()
                if !zoneChanges.isEmpty {
                    for change in zoneChanges { attempts[.zone(change.zoneID), default: 0] += 1 }
                    failures.merge(try await sendDatabaseChanges(zoneChanges, delegate: delegate)) { $1 }
                }
                var prepared = ahead
                ahead = nil
                let versionAsked = state.withSnapshot { $0.version }
                if prepared == nil { prepared = await prepareBatch(context, rules: rules, delegate: delegate) }
                guard let prepared else {
                    // Untracked changes are all sent, unless the app said it has more while the
                    // delegate was being asked (then the next send asks again).
                    if scope == .all {
                        state.withSnapshot { if $0.version == versionAsked { $0.hasPendingUntrackedChanges = false } }
                    }
                    return failures
                }
                guard attempt(prepared) else { return failures }
                try await requireSameAccount(delegate)
                onTheWay = startRequest(prepared)
            }
            guard let request = onTheWay else { continue }
            if ahead == nil {
                var rulesMeanwhile = rules
                rulesMeanwhile.recordIDsOnTheWay = Set(request.batch.recordIDs)
                ahead = await prepareBatch(context, rules: rulesMeanwhile, delegate: delegate)
            }
            let outcome = settle(request.batch, answer: await request.answer())
            onTheWay = nil
            if outcome.failures.isEmpty, let next = ahead, pendingZoneChanges().isEmpty,
                transport.signedInUserRecordName == state.withSnapshot({ $0.userRecordName }), attempt(next)
            {
                // Nothing failed, so nothing stops the send: the next batch goes out now.
                ahead = nil
                onTheWay = startRequest(next)
            }
            await emit(.sentRecordZoneChanges(outcome.event), to: delegate)
            // Throws only for a failure, and after one no request is on the way.
            try outcome.settling.finish()
            failures.merge(outcome.failures) { $1 }
        }
    }

    /// A batch the delegate prepared, and the state's version before it was asked.
    private struct PreparedBatch: Sendable {
        var batch: RecordZoneChangeBatch
        var version: UInt64

        var recordIDs: [Record.ID] { batch.recordsToSave.map(\.recordID) + batch.recordIDsToDelete }
    }

    /// Asks the delegate for the next batch within `rules`; `nil` when it has none now. Records on
    /// the way that the delegate put in the batch anyway are left for a later one: built before
    /// their answer was kept, they would be sent with a change tag that answer replaces.
    private func prepareBatch(
        _ context: SendChangesContext, rules: BatchRules, delegate: any SyncEngineDelegate
    ) async -> PreparedBatch? {
        let version = state.withSnapshot { $0.version }
        guard var batch = await Self.$batchRules.withValue(rules, operation: {
            await delegate.nextRecordZoneChangeBatch(context, syncEngine: self)
        }) else { return nil }
        if !rules.recordIDsOnTheWay.isEmpty {
            batch.recordsToSave.removeAll { rules.recordIDsOnTheWay.contains($0.recordID) }
            batch.recordIDsToDelete.removeAll { rules.recordIDsOnTheWay.contains($0) }
        }
        guard !batch.recordsToSave.isEmpty || !batch.recordIDsToDelete.isEmpty else { return nil }
        return PreparedBatch(batch: batch, version: version)
    }

    /// A batch on its way to the server.
    private struct RecordRequest {
        let batch: PreparedBatch
        let task: Task<Answer<Record.ID, Record>, Never>

        /// The server's answer; cancelling the waiting task cancels the request.
        func answer() async -> Answer<Record.ID, Record> {
            await withTaskCancellationHandler { await task.value } onCancel: { task.cancel() }
        }
    }

    /// Marks a batch's changes in flight and sends it. Changes in zones shared read-only with the
    /// signed-in user (as the zone's share was last fetched) are refused here, as the server would
    /// refuse them, and not sent.
    private func startRequest(_ prepared: PreparedBatch) -> RecordRequest {
        let batch = prepared.batch
        let refused = state.withSnapshot { snapshot in
            for record in batch.recordsToSave { snapshot.recordZoneChanges.markInFlight(.saveRecord(record.recordID)) }
            for recordID in batch.recordIDsToDelete { snapshot.recordZoneChanges.markInFlight(.deleteRecord(recordID)) }
            return snapshot.refusalsOfReadOnlyZones(batch)
        }
        let saving = batch.recordsToSave.filter { refused[$0.recordID] == nil }
        let deleting = batch.recordIDsToDelete.filter { refused[$0] == nil }
        let transport = transport
        let task = Task {
            guard !saving.isEmpty || !deleting.isEmpty else { return Answer<Record.ID, Record>(refused: refused) }
            var answer = await Answer {
                try await transport.modifyRecords(
                    saving: saving, deleting: deleting, deletionChangeTags: batch.deletionChangeTags,
                    savePolicy: .ifServerRecordUnchanged, atomically: batch.atomicByZone)
            }
            answer.refused = refused
            return answer
        }
        return RecordRequest(batch: prepared, task: task)
    }

    /// What became of a batch: the event that tells the delegate, what failed, and how the send goes on.
    private struct BatchOutcome {
        var event: Event.SentRecordZoneChanges
        var failures: [CloudError.ItemID: CloudError]
        var settling: Settling
    }

    /// Keeps in the state what became of each change of a batch.
    private func settle(_ prepared: PreparedBatch, answer: Answer<Record.ID, Record>) -> BatchOutcome {
        let (batch, version) = (prepared.batch, prepared.version)
        var settling = Settling(engine: self)
        var savedRecords: [Record] = []
        var failedRecordSaves: [Event.SentRecordZoneChanges.FailedRecordSave] = []
        var deletedRecordIDs: [Record.ID] = []
        var failedRecordDeletes: [Record.ID: CloudError] = [:]
        for record in batch.recordsToSave {
            let change = PendingRecordZoneChange.saveRecord(record.recordID)
            switch answer.saveResult(record.recordID) {
            case .success(let saved):
                state.withSnapshot { $0.recordZoneChanges.confirm(change, sentAt: version) }
                savedRecords.append(saved)
            case .failure(let error):
                if error.code == .serverRecordChanged, let server = error.serverRecord, server.holdsSameValues(as: record) {
                    // This save already reached the server: its answer was lost, or the process
                    // died before the confirmation was persisted.
                    state.withSnapshot { $0.recordZoneChanges.confirm(change, sentAt: version) }
                    savedRecords.append(server)
                } else {
                    let disposition = settling.disposition(for: error)
                    state.withSnapshot { $0.recordZoneChanges.settle(change, failedWith: error, disposition, sentAt: version) }
                    failedRecordSaves.append(.init(record: record, error: error))
                }
            }
        }
        for recordID in batch.recordIDsToDelete {
            let change = PendingRecordZoneChange.deleteRecord(recordID)
            // A record already gone is as good as deleted.
            if case .failure(let error) = answer.deleteResult(recordID), error.code != .unknownItem {
                let disposition = settling.disposition(for: error)
                state.withSnapshot { $0.recordZoneChanges.settle(change, failedWith: error, disposition, sentAt: version) }
                failedRecordDeletes[recordID] = error
            } else {
                state.withSnapshot { $0.recordZoneChanges.confirm(change, sentAt: version) }
                deletedRecordIDs.append(recordID)
            }
        }
        var failures = failedRecordDeletes.mapKeys(CloudError.ItemID.record)
        for failure in failedRecordSaves { failures[.record(failure.record.recordID)] = failure.error }
        return BatchOutcome(
            event: .init(
                savedRecords: savedRecords, failedRecordSaves: failedRecordSaves, deletedRecordIDs: deletedRecordIDs,
                failedRecordDeletes: failedRecordDeletes),
            failures: failures, settling: settling)
    }

    /// The server's answer to a batch: its results, or the error that failed the whole request.
    private struct Answer<ID: Hashable & Sendable, Saved: Sendable>: Sendable {
        var results: ModifyResults<ID, Saved>?
        var requestError: CloudError?
        /// The items refused before sending, with why.
        var refused: [ID: CloudError] = [:]

        /// The answer to `request`.
        init(_ request: () async throws -> ModifyResults<ID, Saved>) async {
            do {
                results = try await request()
            } catch let error as CloudError {
                requestError = error
            } catch {
                requestError = CloudError(.operationCancelled, "the send was cancelled: \(error)")
            }
        }

        /// The answer to a request that was not sent: every item was refused before.
        init(refused: [ID: CloudError]) {
            self.refused = refused
        }

        func saveResult(_ id: ID) -> Result<Saved, CloudError> {
            if let refusal = refused[id] { return .failure(refusal) }
            if let requestError { return .failure(requestError) }
            return results?.saveResults[id] ?? .failure(SyncEngine.noAnswer(for: id))
        }

        func deleteResult(_ id: ID) -> Result<Void, CloudError> {
            if let refusal = refused[id] { return .failure(refusal) }
            if let requestError { return .failure(requestError) }
            return results?.deleteResults[id] ?? .failure(SyncEngine.noAnswer(for: id))
        }
    }

    /// Decides what becomes of each change of a batch that the server did not apply, and whether
    /// the send goes on.
    private struct Settling {
        let engine: SyncEngine
        /// The first passing failure of the batch, and when the engine retries.
        var retry: (error: CloudError, date: Date)?

        init(engine: SyncEngine) {
            self.engine = engine
        }

        /// A passing failure keeps the change pending and schedules one retry for the batch; an
        /// innocent member of a failed atomic batch stays pending for the next send; anything
        /// else removes the change from the pending ones and keeps it as failed.
        mutating func disposition(for error: CloudError) -> FailureDisposition {
            if error.keepsChangesPending {
                if retry == nil { retry = (error, engine.scheduleRetry(after: error, send: true)) }
                return .retry(retry!.date)
            }
            if error.code == .batchRequestFailed {
                engine.sendAgainSoon()
                return .keepPending
            }
            return .refuse
        }

        /// Ends the send with the error that stops it: a failure that keeps changes pending.
        func finish() throws {
            if let retry { throw retry.error }
            engine.noteSuccess()
        }
    }

    static func noAnswer(for item: some Hashable) -> CloudError {
        CloudError(.internalError, "the server's answer said nothing of \(item)")
    }
}

extension CloudError {
    /// Whether the sync engine keeps a change that failed so pending, to send it again by itself:
    /// the failure passes (the network, a throttle, an unavailable server, a busy zone), the answer
    /// was lost (the engine recognises a save that did reach the server), the request was
    /// cancelled, or the session ended (the changes go out once the user signs in again). Other
    /// failures are the delegate's to resolve.
    public var keepsChangesPending: Bool {
        isTransient || [.serverResponseLost, .operationCancelled, .notAuthenticated].contains(code)
    }
}

extension Dictionary {
    /// The dictionary with each key transformed by `transform`.
    func mapKeys<NewKey: Hashable>(_ transform: (Key) -> NewKey) -> [NewKey: Value] {
        Dictionary<NewKey, Value>(map { (transform($0.key), $0.value) }) { $1 }
    }
}

extension Record {
    /// Whether the record has the same type and field values as `other`.
    func holdsSameValues(as other: Record) -> Bool {
        recordType == other.recordType && allKeys() == other.allKeys()
            && allKeys().allSatisfy { fieldValue(forKey: $0) == other.fieldValue(forKey: $0) }
    }
}
