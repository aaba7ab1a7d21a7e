import StratusModel

/// How a save treats the server's copy of a record (CloudKit's `CKModifyRecordsOperation.RecordSavePolicy`).
public enum RecordSavePolicy: Int, Sendable, Hashable {
    /// Save only if the server's record is still the version this record was fetched as (its
    /// change tag matches); otherwise fail with ``CloudError/Code/serverRecordChanged``. Sends the
    /// changed fields. A record never saved is created, and fails the same way if it exists.
    case ifServerRecordUnchanged = 0
    /// Write the changed fields whatever the server holds; creates a missing record.
    case changedKeys = 1
    /// Write every field of this record whatever the server holds; fields only the server has are
    /// kept. Creates a missing record.
    case allKeys = 2
}

extension Database {
    // MARK: Fetching

    /// The record with `recordID` (CloudKit's `record(for:)`).
    ///
    /// - Throws: ``CloudError`` `unknownItem` when it does not exist, `zoneNotFound` when its zone
    ///   does not.
    public func record(for recordID: Record.ID) async throws -> Record {
        guard let result = try await records(for: [recordID])[recordID] else {
            throw CloudError(.internalError, "the server did not answer for record \(recordID)")
        }
        return try result.get()
    }

    /// The records with `recordIDs`, each found or failed on its own (CloudKit's
    /// `records(for:desiredKeys:)`). `desiredKeys` limits the fields fetched; `nil` fetches all.
    ///
    /// Records in several zones, or more than the server answers at once, take several requests.
    public func records(
        for recordIDs: [Record.ID], desiredKeys: [String]? = nil
    ) async throws -> [Record.ID: Result<Record, CloudError>] {
        let limits = try await connection.limits()
        var results: [Record.ID: Result<Record, CloudError>] = [:]
        var seen = Set<Record.ID>()
        let unique = recordIDs.filter { seen.insert($0).inserted }
        for (zoneID, ids) in Self.groupedByZone(unique, zone: \.zoneID) {
            for chunk in ids.chunked(into: limits.maxRecordsPerResponse) {
                let answer = try await call(
                    Endpoints.recordsLookup.erased,
                    body: LookupRecordsRequest(
                        records: chunk.map { LookupRecordsRequest.Item(recordName: $0.recordName) },
                        zoneID: wireZoneID(zoneID), desiredKeys: desiredKeys),
                    idempotent: true, as: RecordsResponse.self)
                guard answer.records.count == chunk.count else {
                    throw CloudError(
                        .serverRejectedRequest, "the server answered \(answer.records.count) items for \(chunk.count) records")
                }
                let fetched = await downloadingAssets(
                    of: answer.records.map { item in
                        item.mapError(CloudError.init).flatMap { wire in
                            Result { () throws(CloudError) in try record(wire, zoneID: zoneID) }
                        }
                    })
                for (id, result) in zip(chunk, fetched) { results[id] = result }
            }
        }
        return results
    }

    // MARK: Saving and deleting

    /// Saves one record and returns it as saved, with its new change tag (CloudKit's `save(_:)`).
    ///
    /// - Throws: ``CloudError`` `serverRecordChanged` when the server's record changed since this
    ///   one was fetched (merge into ``CloudError/serverRecord`` and save that), or the reason the
    ///   record was refused.
    @discardableResult
    public func save(_ record: Record) async throws -> Record {
        let results = try await modifyRecords(saving: [record], deleting: [])
        guard let result = results.saveResults[record.recordID] else {
            throw CloudError(.internalError, "the server did not answer for record \(record.recordID)")
        }
        return try result.get()
    }

    /// Deletes one record and returns its ID (CloudKit's `deleteRecord(withID:)`).
    ///
    /// - Throws: ``CloudError`` `unknownItem` when it does not exist, `referenceViolation` when a
    ///   `VALIDATE` reference of another record points at it.
    @discardableResult
    public func deleteRecord(withID recordID: Record.ID) async throws -> Record.ID {
        let results = try await modifyRecords(saving: [], deleting: [recordID])
        guard let result = results.deleteResults[recordID] else {
            throw CloudError(.internalError, "the server did not answer for record \(recordID)")
        }
        try result.get()
        return recordID
    }

    /// Saves and deletes records, each succeeding or failing on its own unless `atomically` holds
    /// (CloudKit's `modifyRecords(saving:deleting:savePolicy:atomically:)`).
    ///
    /// Records may be in several zones; each zone's records go in their own requests, split to
    /// fit the server's limits (operations and bytes per request). Asset files are uploaded first.
    ///
    /// - Parameters:
    ///   - recordsToSave: The records to save, new or fetched and changed.
    ///   - recordIDsToDelete: The records to delete.
    ///   - deletionChangeTags: For some records to delete, the change tag they may be deleted at
    ///     (see below); the others are deleted whatever they hold.
    ///   - savePolicy: How a save meets a record changed on the server since it was fetched.
    ///   - atomically: In a custom zone, save and delete that zone's records all or none; the items
    ///     that did not fail themselves then fail with ``CloudError/Code/batchRequestFailed``. The
    ///     default zone is never atomic. An atomic zone batch must fit one request: when it cannot,
    ///     the call throws ``CloudError/Code/limitExceeded`` before anything is written.
    /// - Returns: A result per saved record (the record as saved) and per deleted ID; its
    ///   ``ModifyResults/partialFailure`` sums up the failures.
    /// - Throws: Errors of the whole call, such as `notAuthenticated`, or `invalidArguments` for a
    ///   record named twice. When a request fails as a whole after other items have results (an
    ///   earlier request was written, or items failed on their own), its items carry that error in
    ///   the results instead. In the shared database,
    ///   the records of a zone the user may not write fail with `permissionFailure` each, and the
    ///   others are written; the call throws it only when no zone may be written. A record whose
    ///   asset file is missing (`assetFileNotFound`), larger than the server takes
    ///   (`limitExceeded`) or changed while it was uploaded (`assetFileModified`) fails alone; in
    ///   an atomic zone batch, the zone's other items then fail with `batchRequestFailed`, unsent.
    ///
    /// A record of `recordIDsToDelete` with a change tag in `deletionChangeTags` is deleted only if
    /// the server's record still has that tag; otherwise its delete fails with
    /// `serverRecordChanged`, carrying the server's record (the Web Services' `delete`, beside the
    /// unconditional `forceDelete` CloudKit's delete by ID is). An app deleting a record another
    /// device may still edit merges that record, then deletes again with its tag.
    public func modifyRecords(
        saving recordsToSave: [Record], deleting recordIDsToDelete: [Record.ID], deletionChangeTags: [Record.ID: String] = [:],
        savePolicy: RecordSavePolicy = .ifServerRecordUnchanged, atomically: Bool = true
    ) async throws -> ModifyResults<Record.ID, Record> {
        var seen = Set<Record.ID>()
        for id in recordsToSave.map(\.recordID) + recordIDsToDelete where !seen.insert(id).inserted {
            throw CloudError(.invalidArguments, "record \(id) appears more than once; save or delete each record once per call")
        }
        let limits = try await connection.limits()
        let changes = recordsToSave.map(Change.save) + recordIDsToDelete.map { Change.delete($0, ifChangeTag: deletionChangeTags[$0]) }
        var zones = Self.groupedByZone(changes, zone: \.recordID.zoneID)
        var results = ModifyResults<Record.ID, Record>(itemID: CloudError.ItemID.record)
        if databaseScope == .shared {
            // A zone the user may not write fails its own items; when that is every zone, the call.
            var refused: [(changes: [Change], error: CloudError)] = []
            zones.removeAll { zoneID, changes in
                do throws(CloudError) {
                    try refuseUnpermitted(changes, in: zoneID)
                    return false
                } catch {
                    refused.append((changes, error))
                    return true
                }
            }
            if zones.isEmpty, let first = refused.first { throw first.error }
            for (changes, error) in refused {
                for change in changes { results.fail(change, with: error) }
            }
        }
        for (zoneID, changes) in zones where atomically && !zoneID.isDefault && changes.count > limits.maxOperationsPerRequest {
            throw Self.atomicBatchTooLarge(zoneID, "\(changes.count) records", limit: "\(limits.maxOperationsPerRequest) operations per request")
        }
        var plans: [ZoneBatch] = []
        for (zoneID, changes) in zones {
            plans.append(
                try await ZoneBatch(
                    zoneID: zoneID, changes: changes, policy: savePolicy,
                    atomic: atomically && !zoneID.isDefault, limits: limits, database: self))
        }
        var sentRequests = 0
        for plan in plans {
            for (change, error) in plan.failures { results.fail(change, with: error) }
            for request in plan.requests {
                let answer: RecordsResponse
                do {
                    answer = try await call(Endpoints.recordsModify.erased, body: request.body, idempotent: false, as: RecordsResponse.self)
                    guard answer.records.count == request.changes.count else {
                        throw CloudError(
                            .serverRejectedRequest,
                            "the server answered \(answer.records.count) items for \(request.changes.count) operations")
                    }
                } catch let error as CloudError {
                    guard sentRequests > 0 || results.holdsResults else { throw error }
                    for change in request.changes { results.fail(change, with: error) }
                    continue
                }
                sentRequests += 1
                for (change, item) in zip(request.changes, answer.records) {
                    switch (change, item) {
                    case (.save(let record), .success(let wire)):
                        var saved = record.withChangesCommitted
                        saved.applySystemFields(wire)
                        results.saveResults[record.recordID] = .success(saved)
                    case (.save(let record), .failure(let wire)):
                        results.saveResults[record.recordID] = .failure(await conflictError(wire, clientRecord: record, zoneID: plan.zoneID))
                    case (.delete(let id, _), .success):
                        results.deleteResults[id] = .success(())
                    case (.delete(let id, _), .failure(let wire)):
                        results.deleteResults[id] = .failure(await conflictError(wire, clientRecord: nil, zoneID: plan.zoneID))
                    }
                }
            }
        }
        return results
    }

    /// Refuses, as the server would, writes to a shared zone that the signed-in user's permission
    /// there (as last heard) does not allow: any write with read-only permission, except leaving
    /// (deleting the share, alone), and any save of the share.
    private func refuseUnpermitted(_ changes: [Change], in zoneID: RecordZone.ID) throws(CloudError) {
        let leaving = changes.count == 1 && changes[0].recordID.recordName == ShareKeys.zoneWideRecordName
            && { if case .delete = changes[0] { true } else { false } }()
        if leaving { return }
        if changes.contains(where: { if case .save(let record) = $0 { Share(record) != nil } else { false } }) {
            throw CloudError(
                .permissionFailure,
                "only the owner of a share changes it; a participant leaves by deleting it, alone in a request")
        }
        if let permission = connection.sharePermission(in: zoneID), permission != .readWrite {
            throw CloudError.sharedReadOnly(zoneID)
        }
    }

    /// The error of a failed save or conditional delete: a conflict becomes
    /// ``CloudError/Code/serverRecordChanged`` carrying the server's record (with its asset files)
    /// and, for a save, the client's and its ancestor.
    private func conflictError(_ wire: ErrorDictionary, clientRecord record: Record?, zoneID: RecordZone.ID) async -> CloudError {
        var error = CloudError(wire)
        guard wire.serverErrorCode == .conflict || wire.serverErrorCode == .exists else { return error }
        error.code = .serverRecordChanged
        error.clientRecord = record
        error.ancestorRecord = record.flatMap { $0.recordChangeTag == nil ? nil : $0.ancestor }
        if let serverRecord = wire.serverRecord,
            case .success(let server)? = await downloadingAssets(
                of: [Result { () throws(CloudError) in try self.record(serverRecord, zoneID: zoneID) }]
            ).first
        {
            error.serverRecord = server
        }
        return error
    }

    static func atomicBatchTooLarge(_ zoneID: RecordZone.ID, _ size: String, limit: String) -> CloudError {
        CloudError(
            .limitExceeded,
            "the atomic batch for zone \(zoneID) has \(size), more than one request can hold (the server's limit is "
                + "\(limit)); save with atomically: false, or in smaller batches")
    }
}

/// One record to save or delete.
enum Change: Sendable {
    case save(Record)
    /// A delete, only of the record at this change tag when one is given.
    case delete(Record.ID, ifChangeTag: String?)

    var recordID: Record.ID {
        switch self {
        case .save(let record): record.recordID
        case .delete(let id, _): id
        }
    }
}

extension ModifyResults where ID == Record.ID, Saved == Record {
    /// Whether any item has a result yet.
    var holdsResults: Bool { !saveResults.isEmpty || !deleteResults.isEmpty }

    /// Records that `change` failed with `error`.
    mutating func fail(_ change: Change, with error: CloudError) {
        switch change {
        case .save(let record): saveResults[record.recordID] = .failure(error)
        case .delete(let id, _): deleteResults[id] = .failure(error)
        }
    }
}

/// A zone's share of a modify call, cut into requests that fit the server's limits.
struct ZoneBatch: Sendable {
    /// One `records/modify` request and the changes it carries, in order.
    struct Request: Sendable {
        var changes: [Change]
        var body: ModifyRecordsRequest
    }

    let zoneID: RecordZone.ID
    let requests: [Request]
    /// The changes that fail before any request: saves whose asset files could not be uploaded
    /// (``Database/uploadingAssets(of:keys:limits:)``), and in an atomic batch with such a save,
    /// every other change, with ``CloudError/Code/batchRequestFailed``.
    let failures: [(change: Change, error: CloudError)]

    /// Plans the requests: uploads the new assets of the fields to be sent, builds each operation
    /// under `policy`, and cuts them into requests of at most `maxOperationsPerRequest` operations
    /// and `maxRequestBodyBytes` bytes. An atomic batch that needs more than one request throws.
    init(
        zoneID: RecordZone.ID, changes: [Change], policy: RecordSavePolicy, atomic: Bool, limits: Limits,
        database: Database
    ) async throws {
        self.zoneID = zoneID
        let saves = changes.compactMap { if case .save(let record) = $0 { record } else { nil } }
        let keys = saves.map { Self.keysToSend($0, policy: policy) }
        var uploaded = try await database.uploadingAssets(of: saves, keys: keys, limits: limits, allOrNone: atomic)[...]
        var keysToSend = keys[...]
        var operations: [(Change, RecordOperation)] = []
        var failures: [(change: Change, error: CloudError)] = []
        for change in changes {
            switch change {
            case .save:
                let keys = keysToSend.removeFirst()
                switch uploaded.removeFirst() {
                case .success(let record):
                    operations.append((.save(record), Self.operation(for: record, keys: keys, policy: policy, database: database)))
                case .failure(let error):
                    failures.append((change, error))
                }
            case .delete(let id, let changeTag):
                operations.append(
                    (change, RecordOperation(
                        operationType: changeTag == nil ? .forceDelete : .delete,
                        record: RecordDictionary(recordName: id.recordName, recordChangeTag: changeTag))))
            }
        }
        if atomic, let first = failures.first {
            failures += operations.map { operation in
                (operation.0, CloudError(
                    .batchRequestFailed,
                    "not sent: the atomic batch for zone \(zoneID) holds record \(first.change.recordID.recordName), whose "
                        + "asset could not be uploaded"))
            }
            operations = []
        }
        self.failures = failures
        let wireZoneID = database.wireZoneID(zoneID)
        func body(_ operations: ArraySlice<(Change, RecordOperation)>) -> ModifyRecordsRequest {
            // desiredKeys [] asks for system fields only: the saved record is the one sent, with its new tag.
            ModifyRecordsRequest(operations: operations.map(\.1), zoneID: wireZoneID, atomic: atomic, desiredKeys: [])
        }
        // The envelope around the operations, and one comma per operation, fit in this margin.
        let budget = limits.maxRequestBodyBytes - body([]).jsonBytes.count - 16
        let sizes = operations.map { $0.1.jsonBytes.count + 1 }
        var requests: [Request] = []
        var start = operations.startIndex
        var bytes = 0
        for (index, size) in sizes.enumerated() {
            if index > start, index - start == limits.maxOperationsPerRequest || bytes + size > budget {
                requests.append(Request(changes: operations[start..<index].map(\.0), body: body(operations[start..<index])))
                start = index
                bytes = 0
            }
            bytes += size
        }
        if start < operations.endIndex {
            requests.append(Request(changes: operations[start...].map(\.0), body: body(operations[start...])))
        }
        if atomic, requests.count > 1 {
            throw Database.atomicBatchTooLarge(
                zoneID, "\(sizes.reduce(0, +)) bytes of operations", limit: "\(limits.maxRequestBodyBytes) bytes per request")
        }
        self.requests = requests
    }

    /// The fields a save sends: the changed ones, or every one for ``RecordSavePolicy/allKeys`` and
    /// for records never saved.
    static func keysToSend(_ record: Record, policy: RecordSavePolicy) -> [String] {
        policy == .allKeys || record.recordChangeTag == nil
            ? Array(Set(record.values.keys).union(record.originalValues.keys)).sorted()
            : record.changedKeys()
    }

    /// The operation that saves `record` under `policy`.
    static func operation(for record: Record, keys: [String], policy: RecordSavePolicy, database: Database) -> RecordOperation {
        var wire = database.wireRecord(record, keys: keys)
        let type: RecordOperationType
        switch policy {
        case .ifServerRecordUnchanged:
            type = record.recordChangeTag == nil ? .create : .update
            if type == .create { wire.removedFieldNames = [] }
        case .changedKeys, .allKeys:
            type = .forceUpdate
            wire.recordChangeTag = nil
        }
        return RecordOperation(operationType: type, record: wire)
    }
}
