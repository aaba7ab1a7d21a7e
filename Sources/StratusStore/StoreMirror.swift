import Foundation
import GRDB
import Stratus
import StratusSync
import Synchronization

/// Mirrors a store's synced tables to one database through a ``SyncEngine``: the store's outbox is
/// what to send (rebuilt into the engine at every start, and followed after every commit), fetched
/// records are applied in one transaction per page as the author ``StratusStore/importAuthor``, and
/// a row changed on both sides is decided by the merge policy against the server record this device
/// last agreed on.
actor StoreMirror: SyncEngineDelegate {
    /// What went into a send, to settle when the server answers.
    private struct Sent {
        var entry: PendingChange
        /// The values sent, for a save: the server holds them once it saved the record.
        var values: [String: DatabaseValue]?
    }

    private let pool: DatabasePool
    private let model: StoreModel
    private let capture: ChangeCapture
    private let configuration: StratusStore.Mirroring
    private let mapping: RecordMapping
    private let tablesByRecordType: [String: StoreTable]
    private var engine: SyncEngine!
    private var inFlight: [Stratus.Record.ID: Sent] = [:]
    /// The highest outbox version handed to the engine.
    private var lastQueuedVersion: Int64 = 0
    private var zoneSaved = false
    private var lastCompleteFetch: Date?
    private var lastError: CloudError?
    private var runningEvents: [StoreEvent.Kind: StoreEvent] = [:]
    private var fetchError: CloudError?
    /// Why a fetched page could not be applied (the disk is full, the file is read-only…): from then
    /// on the engine's state is no longer persisted, so the page is fetched again at the next start.
    private var importFailure: CloudError?
    let remoteChanges = Broadcast<StoreRemoteChange>()
    let events = Broadcast<StoreEvent>()

    static let zone = RecordZone(zoneID: RecordZone.ID(zoneName: RecordMapping.zoneName))
    private static let engineStateKey = "engine_state"
    private static let zoneSavedKey = "zone_saved"

    init(pool: DatabasePool, model: StoreModel, capture: ChangeCapture, configuration: StratusStore.Mirroring) async throws {
        guard configuration.database.databaseScope == .private else {
            throw CloudError(
                .invalidArguments,
                "StratusStore mirrors the private database; the \(configuration.database.databaseScope.rawValue) database is not supported yet")
        }
        self.pool = pool
        self.model = model
        self.capture = capture
        self.configuration = configuration
        mapping = RecordMapping(assetThreshold: configuration.assetThreshold, assetDirectory: configuration.assetDirectory)
        var byType: [String: StoreTable] = [:]
        for table in model.syncedTables {
            if case .synced(let recordType) = table.configuration { byType[recordType] = table }
        }
        tablesByRecordType = byType
        let (state, zoneSaved) = try await pool.write { db in
            try StoreMetadata.create(in: db)
            let state = try StoreMetadata.value(Self.engineStateKey, in: db).flatMap(Data.fromDatabaseValue).map {
                try JSONDecoder().decode(SyncEngine.State.Serialization.self, from: $0)
            }
            return (state, try StoreMetadata.value(Self.zoneSavedKey, in: db).flatMap(Bool.fromDatabaseValue) ?? false)
        }
        self.zoneSaved = zoneSaved
        let setup = StoreEvent(kind: .setup)
        events.yield(setup)
        runningEvents[.setup] = setup
        engine = try SyncEngine(
            SyncEngine.Configuration(
                database: configuration.database, stateSerialization: state, delegate: self,
                automaticallySync: configuration.automaticallySync))
        if zoneSaved {
            end(.setup)
        } else {
            engine.state.add(pendingDatabaseChanges: [.saveZone(Self.zone)])
        }
        // The outbox is the truth: what the engine's saved state lists beyond it is settled.
        let outbox = try await pool.read { db in try StoreMetadata.outbox(after: 0, in: db) }
        let queued = Set(outbox.map { Self.change(for: $0) })
        engine.state.remove(pendingRecordZoneChanges: engine.state.pendingRecordZoneChanges.filter { !queued.contains($0) })
        queue(outbox)
        capture.afterCapturedCommit.withLock { action in
            action = { [weak self] in Task { try? await self?.queueNewOutboxEntries() } }
        }
    }

    /// Sends what is pending, then fetches what changed on the server.
    func sync() async throws {
        try await queueNewOutboxEntries()
        do {
            try await engine.sendChanges()
        } catch let error as CloudError where error.code == .partialFailure {
            // Each item's failure was handled as it was reported.
        }
        try await engine.fetchChanges(Self.fetchOptions)
    }

    /// Fetches read the store's zone alone: other zones of the database belong to other code.
    private static let fetchOptions = SyncEngine.FetchChangesOptions(scope: .zoneIDs([zone.zoneID]))

    /// Where mirroring stands.
    func status() async throws -> StoreSyncStatus {
        let pending = try await pool.read { db in try StoreMetadata.outboxCount(in: db) }
        let serverAhead = engine.state.zoneIDsWithUnfetchedServerChanges.contains(Self.zone.zoneID)
            || !engine.state.pendingDatabaseChanges.isEmpty
        return StoreSyncStatus(
            pendingChanges: pending, lastCompleteImport: lastCompleteFetch, lastError: lastError,
            isUpToDate: pending == 0 && lastCompleteFetch != nil && !serverAhead && zoneSaved)
    }

    /// Syncs, then compares the digest of the local rows with the server's digest of the zone at a
    /// moment the server held still: read before and after the local digest at the same token.
    func verify() async throws -> StoreVerification {
        let zoneID = Self.zone.zoneID
        for _ in 0..<3 {
            try await sync()
            let (server, changeToken) = try await configuration.database.zoneDigest(inZoneWith: zoneID)
            try await engine.fetchChanges(Self.fetchOptions)
            let (local, pending) = try await pool.read { [model, mapping] db in
                let records = try model.syncedTables.flatMap { try mapping.records(of: $0, in: db) }
                return (try ZoneDigest(records: records), try StoreMetadata.outboxCount(in: db))
            }
            let (_, laterToken) = try await configuration.database.zoneDigest(inZoneWith: zoneID)
            if pending > 0, let lastError {
                // A change the server refuses stays in the outbox: the copies cannot be equal.
                throw lastError
            }
            guard laterToken == changeToken, pending == 0 else { continue }
            return StoreVerification(local: local, server: server)
        }
        throw CloudError(
            .serviceUnavailable, "the store or its zone kept changing while it was verified; verify again when it is quiet")
    }

    /// Writes the model's record types into the development schema by saving a representative
    /// record of each synced table in a zone of its own, then deleting the zone; returns the schema
    /// in CloudKit's schema language.
    func initializeSchema() async throws -> String {
        let database = configuration.database
        guard database.container.environment == .development else {
            throw CloudError(
                .invalidArguments,
                "initializeSchema() writes the development schema; this store's container is in production, whose "
                    + "schema changes only by deploying development's")
        }
        let zoneID = RecordZone.ID(zoneName: RecordMapping.zoneName + ".schema")
        try FileManager.default.createDirectory(at: configuration.assetDirectory, withIntermediateDirectories: true)
        let assetFile = configuration.assetDirectory.appendingPathComponent("schema-\(UUID().uuidString)")
        try Data([0]).write(to: assetFile)
        defer { try? FileManager.default.removeItem(at: assetFile) }
        let (schema, records) = try await pool.read { [model] db in
            (try StoreSchema.schema(of: model, in: db),
             try StoreSchema.representativeRecords(of: model, zoneID: zoneID, assetFile: assetFile, in: db))
        }
        _ = try await database.save(RecordZone(zoneID: zoneID))
        do {
            if let failure = try await database.modifyRecords(saving: records, deleting: []).partialFailure { throw failure }
        } catch {
            _ = try? await database.deleteRecordZone(withID: zoneID)
            throw error
        }
        _ = try await database.deleteRecordZone(withID: zoneID)
        return schema.text
    }

    // MARK: - The outbox into the engine

    private static func change(for entry: PendingChange) -> SyncEngine.PendingRecordZoneChange {
        let recordID = RecordMapping.recordID(entry.rowID)
        return entry.operation == .save ? .saveRecord(recordID) : .deleteRecord(recordID)
    }

    private func queue(_ entries: [PendingChange]) {
        guard !entries.isEmpty else { return }
        engine.state.add(pendingRecordZoneChanges: entries.map(Self.change(for:)))
        lastQueuedVersion = max(lastQueuedVersion, entries.map(\.version).max() ?? 0)
    }

    private func queueNewOutboxEntries() async throws {
        let version = lastQueuedVersion
        queue(try await pool.read { db in try StoreMetadata.outbox(after: version, in: db) })
    }

    // MARK: - SyncEngineDelegate

    func nextRecordZoneChangeBatch(
        _ context: SyncEngine.SendChangesContext, syncEngine: SyncEngine
    ) async -> SyncEngine.RecordZoneChangeBatch? {
        let pending = syncEngine.state.pendingRecordZoneChanges.filter { context.options.scope.contains($0) }
        guard !pending.isEmpty else { return nil }
        do {
            // Rows are read a request's worth at a time, from the front of the queue, until a request
            // is full: a long outbox costs each batch one request's reads, not the whole outbox's.
            var sent: [Stratus.Record.ID: Sent] = [:]
            var records: [Stratus.Record.ID: Stratus.Record] = [:]
            var settled: [SyncEngine.PendingRecordZoneChange] = []
            var scanned = 0
            while scanned < pending.count, sent.count < Self.operationsPerRequest {
                let chunk = Array(pending[scanned..<min(scanned + Self.operationsPerRequest, pending.count)])
                scanned += chunk.count
                let (chunkSent, chunkRecords) = try await pool.read { [model, mapping] db in
                    try Self.changesToSend(chunk, model: model, mapping: mapping, in: db)
                }
                // Each change is sent as the outbox has it now; one the outbox no longer lists is settled.
                settled += chunk.filter { chunkSent[$0.recordID] == nil }
                sent.merge(chunkSent) { $1 }
                records.merge(chunkRecords) { $1 }
            }
            try await unqueue(settled)
            let toSave = records
            let batch = await SyncEngine.RecordZoneChangeBatch(
                pendingChanges: pending[..<scanned].filter { sent[$0.recordID] != nil }
            ) { toSave[$0] }
            for recordID in (batch?.recordsToSave.map(\.recordID) ?? []) + (batch?.recordIDsToDelete ?? []) {
                inFlight[recordID] = sent[recordID]
            }
            return batch
        } catch {
            lastError = Self.cloudError(error)
            return nil
        }
    }

    /// The server's default operations per request: how many changes a batch is read for.
    private static let operationsPerRequest = 200

    /// What to send for `changes`, as the outbox and the rows have it now: the outbox entry and
    /// values of each change the outbox still lists, and the records of its saves.
    private static func changesToSend(
        _ changes: [SyncEngine.PendingRecordZoneChange], model: StoreModel, mapping: RecordMapping, in db: GRDB.Database
    ) throws -> ([Stratus.Record.ID: Sent], [Stratus.Record.ID: Stratus.Record]) {
        var sent: [Stratus.Record.ID: Sent] = [:]
        var columns: [String: StoreColumns] = [:]
        for change in changes {
            guard let rowID = UUID(uuidString: change.recordID.recordName),
                let entry = try StoreMetadata.outboxEntry(rowID: rowID, in: db), Self.change(for: entry) == change,
                let table = model.table(named: entry.table)
            else { continue }
            if entry.operation == .delete {
                sent[change.recordID] = Sent(entry: entry)
                continue
            }
            let tableColumns = try columns[table.name] ?? StoreColumns(table, in: db)
            columns[table.name] = tableColumns
            guard let values = try mapping.columnValues(of: table, rowID: rowID, columns: tableColumns, in: db)
            else { continue }
            sent[change.recordID] = Sent(entry: entry, values: values)
        }
        return (sent, try records(for: sent, model: model, mapping: mapping, columns: columns, in: db))
    }

    /// The records to save: each based on the server's record this device last knew (so the save
    /// sends what changed since, removals included), holding the row's values.
    private static func records(
        for sent: [Stratus.Record.ID: Sent], model: StoreModel, mapping: RecordMapping, columns: [String: StoreColumns],
        in db: GRDB.Database
    ) throws -> [Stratus.Record.ID: Stratus.Record] {
        var records: [Stratus.Record.ID: Stratus.Record] = [:]
        for (recordID, item) in sent {
            guard let values = item.values, let table = model.table(named: item.entry.table),
                let tableColumns = columns[table.name], case .synced(let recordType) = table.configuration
            else { continue }
            let rowID = item.entry.rowID
            var record: Stratus.Record
            if let server = try StoreMetadata.serverRecord(table: table.name, rowID: rowID, in: db) {
                record = try Stratus.Record(
                    systemFieldsData: server.systemFields,
                    serverValues: mapping.fields(of: server.values, table: table, rowID: rowID, columns: tableColumns))
            } else {
                record = Stratus.Record(recordType: recordType, recordID: recordID)
            }
            let fields = try mapping.fields(of: values, table: table, rowID: rowID, columns: tableColumns)
            for column in tableColumns.fields {
                for key in [column, RecordMapping.assetKey(column)] { record.setFieldValue(fields[key], forKey: key) }
            }
            records[recordID] = record
        }
        return records
    }

    func handleEvent(_ event: SyncEngine.Event, syncEngine: SyncEngine) async {
        do {
            switch event {
            case .stateUpdate(let update):
                // After a page failed to apply, the state (whose token is past it) is not kept: the
                // next start fetches from the last state that followed only applied pages.
                guard importFailure == nil else { break }
                let data = try JSONEncoder().encode(update.stateSerialization)
                try await pool.write { db in try StoreMetadata.setValue(data, for: Self.engineStateKey, in: db) }
            case .accountChange(let change):
                switch change.changeType {
                case .signIn:
                    // What was written while nobody was signed in is in the outbox, and goes to this account.
                    syncEngine.state.add(pendingDatabaseChanges: [.saveZone(Self.zone)])
                    try await queueAllOutboxEntries()
                case .signOut, .switchAccounts:
                    // The rows were the previous account's: they go, as Core Data's mirror purges them.
                    try await purge()
                }
            case .fetchedDatabaseChanges(let changes):
                if changes.deletions.contains(where: { $0.zoneID.zoneName == RecordMapping.zoneName }) {
                    try await purge()
                }
            case .fetchedRecordZoneChanges(let changes):
                do {
                    try await importChanges(changes)
                } catch {
                    importFailure = Self.cloudError(error)
                    throw error
                }
            case .sentDatabaseChanges(let sent):
                if sent.savedZones.contains(where: { $0.zoneID.zoneName == RecordMapping.zoneName }) {
                    zoneSaved = true
                    try await pool.write { db in try StoreMetadata.setValue(true, for: Self.zoneSavedKey, in: db) }
                    end(.setup)
                } else if let failure = sent.failedZoneSaves.first, !failure.error.keepsChangesPending {
                    lastError = failure.error
                    end(.setup, error: failure.error)
                }
            case .sentRecordZoneChanges(let sent):
                try await settle(sent)
            case .willFetchRecordZoneChanges:
                break
            case .willFetchChanges:
                fetchError = nil
                begin(.import)
            case .didFetchRecordZoneChanges(let fetched):
                if let error = fetched.error { fetchError = error }
            case .didFetchChanges:
                if fetchError == nil { lastCompleteFetch = Date() }
                end(.import, error: fetchError)
            case .willSendChanges:
                begin(.export)
            case .didSendChanges:
                end(.export, error: runningEvents[.export]?.error)
            }
        } catch {
            let error = Self.cloudError(error)
            lastError = error
            fetchError = fetchError ?? error
        }
    }

    // MARK: - Import

    /// Applies a page of fetched changes in one transaction, as the author `import`.
    private func importChanges(_ changes: SyncEngine.Event.FetchedRecordZoneChanges) async throws {
        let (outcome, transaction) = try await writeAsImport { [self] db in
            var merger = Merger(mirror: self, db: db)
            for modification in changes.modifications {
                let record = modification.record
                try merger.applyReadable(server: record, recordID: record.recordID, recordType: record.recordType)
            }
            for deletion in changes.deletions {
                try merger.applyReadable(server: nil, recordID: deletion.recordID, recordType: deletion.recordType)
            }
            return (merger.outcome, capture.capturedTransaction())
        }
        try await hand(outcome)
        if let transaction { remoteChanges.yield(StoreRemoteChange(historyToken: HistoryToken(transaction: transaction))) }
    }

    /// What merges changed in the outbox, for the engine.
    private struct MergeOutcome: Sendable {
        /// Changes the merges queued (the server needs the local side).
        var requeued: [SyncEngine.PendingRecordZoneChange] = []
        /// Changes a merge made unnecessary (the server holds the result).
        var settled: [SyncEngine.PendingRecordZoneChange] = []
        /// Records skipped because no row can hold them (a field of another type, a name not a UUID).
        var unreadable: [StoreMappingError] = []
    }

    /// Decides rows against the server's records, within one write.
    private struct Merger {
        let mirror: StoreMirror
        let db: GRDB.Database
        var columns: [String: StoreColumns] = [:]
        /// What the merges changed, to hand to the engine after the commit.
        var outcome = MergeOutcome()

        init(mirror: StoreMirror, db: GRDB.Database) {
            self.mirror = mirror
            self.db = db
        }

        /// ``apply(server:recordID:recordType:)``, skipping (and keeping the reason of) a record no row
        /// can hold: one written by a newer app version must not stop every other record.
        mutating func applyReadable(server record: Stratus.Record?, recordID: Stratus.Record.ID, recordType: String) throws {
            // Mapping the record to column values is the one step that refuses a record, and it
            // comes before any write of `apply`: a refused record leaves nothing behind.
            do {
                try apply(server: record, recordID: recordID, recordType: recordType)
            } catch let error as StoreMappingError {
                outcome.unreadable.append(error)
            }
        }

        /// Makes the row of `recordID` what the server's record says (`nil`: deleted), merging
        /// with a local change the server has not received.
        mutating func apply(server record: Stratus.Record?, recordID: Stratus.Record.ID, recordType: String) throws {
            guard recordID.zoneID.zoneName == RecordMapping.zoneName, let table = mirror.tablesByRecordType[recordType],
                let rowID = UUID(uuidString: recordID.recordName)
            else { return }
            // A record this device already holds at this version (its own save, coming back in the
            // feed) changes nothing.
            if let tag = record?.recordChangeTag, try StoreMetadata.changeTag(table: table.name, rowID: rowID, in: db) == tag {
                return
            }
            let tableColumns = try columns[table.name] ?? StoreColumns(table, in: db)
            columns[table.name] = tableColumns
            let server = try record.map { try mirror.mapping.columnValues(of: $0, table: table, columns: tableColumns) }
            var result = server
            if let entry = try StoreMetadata.outboxEntry(rowID: rowID, in: db) {
                let known = try StoreMetadata.serverRecord(table: table.name, rowID: rowID, in: db)
                if server == known?.values {
                    // The server's record is the one this device last agreed on (its own save coming
                    // back, with a new tag): the local change stands, based on it.
                    try remember(record, values: server, table: table, rowID: rowID)
                    return
                }
                let local = entry.operation == .delete
                    ? nil : try mirror.mapping.columnValues(of: table, rowID: rowID, columns: tableColumns, in: db)
                let conflict = StoreConflict(table: table.name, rowID: rowID, ancestor: known?.values, local: local, server: server)
                result = mirror.configuration.customMerges[table.name]?(conflict) ?? mirror.configuration.mergePolicy.resolve(conflict)
                let recordID = RecordMapping.recordID(rowID)
                switch (result, server) {
                case (nil, nil), (_?, _?) where result == server:
                    try StoreMetadata.dropOutboxEntry(table: table.name, rowID: rowID, in: db)
                    outcome.settled.append(entry.operation == .save ? .saveRecord(recordID) : .deleteRecord(recordID))
                case (nil, _?):
                    try StoreMetadata.requeue(.delete, table: table.name, rowID: rowID, in: db)
                    outcome.requeued.append(.deleteRecord(recordID))
                case (_?, _):
                    try StoreMetadata.requeue(.save, table: table.name, rowID: rowID, in: db)
                    outcome.requeued.append(.saveRecord(recordID))
                }
            }
            if let result {
                try mirror.mapping.write(result, rowID: rowID, to: table, columns: tableColumns, in: db)
            } else {
                try mirror.mapping.delete(rowID: rowID, from: table, columns: tableColumns, in: db)
            }
            try remember(record, values: server, table: table, rowID: rowID)
        }

        /// Keeps the server's record of a row as the ancestor of later merges; `nil`: it is gone.
        private func remember(_ record: Stratus.Record?, values: [String: DatabaseValue]?, table: StoreTable, rowID: UUID) throws {
            try StoreMetadata.setServerRecord(record, values: values ?? [:], table: table.name, rowID: rowID, in: db)
        }
    }

    /// Hands the engine what a merger changed in the outbox, after its transaction committed.
    private func hand(_ outcome: MergeOutcome) async throws {
        try await unqueue(outcome.settled)
        if !outcome.requeued.isEmpty { engine.state.add(pendingRecordZoneChanges: outcome.requeued) }
        if let unreadable = outcome.unreadable.last { lastError = CloudError(.invalidArguments, unreadable.reason) }
    }

    /// Takes `changes` out of the engine, then queues again what the outbox lists for their rows:
    /// a local write that landed meanwhile (and was queued under the same record ID) is not taken
    /// out with them.
    private func unqueue(_ changes: [SyncEngine.PendingRecordZoneChange]) async throws {
        guard !changes.isEmpty else { return }
        engine.state.remove(pendingRecordZoneChanges: changes)
        let rowIDs = changes.compactMap { UUID(uuidString: $0.recordID.recordName) }
        queue(try await pool.read { db in try rowIDs.compactMap { try StoreMetadata.outboxEntry(rowID: $0, in: db) } })
    }

    // MARK: - Export

    /// Keeps what the server saved and deleted, and decides what it refused.
    private func settle(_ sent: SyncEngine.Event.SentRecordZoneChanges) async throws {
        let answered = sent.savedRecords.map(\.recordID) + sent.deletedRecordIDs + sent.failedRecordSaves.map(\.record.recordID)
            + Array(sent.failedRecordDeletes.keys)
        let sentNow = answered.reduce(into: [Stratus.Record.ID: Sent]()) { $0[$1] = inFlight.removeValue(forKey: $1) }
        let (outcome, zoneMissing, refused) = try await writeAsImport { [self] db in
            var merger = Merger(mirror: self, db: db)
            var zoneMissing = false
            var refused: CloudError?
            for record in sent.savedRecords {
                guard let item = sentNow[record.recordID], let values = item.values else { continue }
                try StoreMetadata.confirm(item.entry, in: db)
                try StoreMetadata.setServerRecord(
                    record, values: values, table: item.entry.table, rowID: item.entry.rowID, in: db)
            }
            for recordID in sent.deletedRecordIDs {
                guard let item = sentNow[recordID] else { continue }
                try StoreMetadata.confirm(item.entry, in: db)
                try StoreMetadata.setServerRecord(nil, values: [:], table: item.entry.table, rowID: item.entry.rowID, in: db)
            }
            for failure in sent.failedRecordSaves {
                guard let item = sentNow[failure.record.recordID], let table = model.table(named: item.entry.table),
                    case .synced(let recordType) = table.configuration
                else { continue }
                switch failure.error.code {
                case .serverRecordChanged:
                    // Someone else saved first: merge with their record, as a fetch would have.
                    if let server = failure.error.serverRecord {
                        try merger.apply(server: server, recordID: server.recordID, recordType: recordType)
                    }
                case .unknownItem:
                    // Deleted on the server since this device last fetched it.
                    try merger.apply(server: nil, recordID: failure.record.recordID, recordType: recordType)
                case .zoneNotFound:
                    zoneMissing = true
                    try StoreMetadata.setServerRecord(nil, values: [:], table: table.name, rowID: item.entry.rowID, in: db)
                    merger.outcome.requeued.append(.saveRecord(failure.record.recordID))
                default:
                    if !failure.error.keepsChangesPending { refused = failure.error }
                }
            }
            for (recordID, error) in sent.failedRecordDeletes {
                guard let item = sentNow[recordID] else { continue }
                if error.code == .unknownItem || error.code == .zoneNotFound {
                    // Already gone: what the delete wanted.
                    try StoreMetadata.confirm(item.entry, in: db)
                    try StoreMetadata.setServerRecord(nil, values: [:], table: item.entry.table, rowID: item.entry.rowID, in: db)
                } else if !error.keepsChangesPending {
                    refused = error
                }
            }
            return (merger.outcome, zoneMissing, refused)
        }
        if zoneMissing {
            zoneSaved = false
            engine.state.add(pendingDatabaseChanges: [.saveZone(Self.zone)])
        }
        try await hand(outcome)
        if let refused {
            lastError = refused
            runningEvents[.export]?.error = refused
        }
    }

    // MARK: - Purging

    /// Removes every synced row and what the mirror knew of them, as the author `import`.
    private func purge() async throws {
        try await writeAsImport { [model] db in
            for table in model.syncedTables { try db.execute(sql: "DELETE FROM \(table.name.quotedDatabaseIdentifier)") }
            try db.execute(
                sql: """
                    DELETE FROM stratusstore_outbox; DELETE FROM stratusstore_records; DELETE FROM stratusstore_ancestors;
                    DELETE FROM stratusstore_mirror WHERE key = '\(Self.zoneSavedKey)';
                    """)
        }
        zoneSaved = false
        engine.state.remove(pendingRecordZoneChanges: engine.state.pendingRecordZoneChanges)
        remoteChanges.yield(StoreRemoteChange(historyToken: try await pool.read { db in
            HistoryToken(transaction: try Int64.fetchOne(db, sql: "SELECT coalesce(max(id), 0) FROM stratusstore_transactions") ?? 0)
        }))
    }

    private func queueAllOutboxEntries() async throws {
        queue(try await pool.read { db in try StoreMetadata.outbox(after: 0, in: db) })
    }

    // MARK: - Helpers

    private func writeAsImport<T: Sendable>(_ body: @escaping @Sendable (GRDB.Database) throws -> T) async throws -> T {
        try await pool.write { [capture] db in
            try capture.writing(as: StratusStore.importAuthor) { try body(db) }
        }
    }

    private func begin(_ kind: StoreEvent.Kind) {
        let event = StoreEvent(kind: kind)
        runningEvents[kind] = event
        events.yield(event)
    }

    private func end(_ kind: StoreEvent.Kind, error: CloudError? = nil) {
        guard var event = runningEvents.removeValue(forKey: kind) else { return }
        event.endDate = Date()
        event.error = error
        event.succeeded = error == nil
        events.yield(event)
    }

    private static func cloudError(_ error: any Error) -> CloudError {
        error as? CloudError ?? CloudError(.internalError, "\(error)")
    }
}
