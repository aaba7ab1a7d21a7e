import Foundation
import GRDB
import Stratus
import StratusSync
import Synchronization

/// Mirrors a store's synced tables to one database through a ``SyncEngine``: the store's outbox is
/// what to send (rebuilt into the engine at every start, and followed after every commit), fetched
/// records are applied in one transaction per fetched event as the author ``StratusStore/importAuthor``, and
/// a row changed on both sides is decided by the merge policy against the server record this device
/// last agreed on.
actor StoreMirror: SyncEngineDelegate {
    /// Whether a task to queue new outbox entries is about to start.
    private nonisolated let queueingScheduled = Atomic<Bool>(false)
    /// What went into a send, to settle when the server answers.
    private struct Sent {
        /// The outbox entry sent; `nil` for the delete of a record a row left when it moved to a share.
        var entry: PendingChange?
        /// The values sent, for a save: the server holds them once it saved the record.
        var values: [String: DatabaseValue]?
    }

    private let pool: DatabasePool
    private let model: StoreModel
    private let capture: ChangeCapture
    private let configuration: StratusStore.Mirroring
    private let mapping: RecordMapping
    private let tablesByRecordType: [String: StoreTable]
    /// The zone of rows not placed elsewhere: the store's zone in the private database; none in the
    /// shared one, where every row lives in the zone of a share.
    private let defaultZoneID: RecordZone.ID?
    /// The database's scope: private, shared or public.
    private let scope: Stratus.Database.Scope
    /// Polls the public database while the store syncs by itself.
    private var poller: Task<Void, Never>?
    private var engine: SyncEngine!
    private var inFlight: [Stratus.Record.ID: Sent] = [:]
    /// The highest outbox version handed to the engine.
    private var lastQueuedVersion: Int64 = 0
    private var zoneSaved = false
    private var lastCompleteFetch: Date?
    private var lastError: CloudError?
    /// Why a row's change waits for good: the server refused it, or it cannot be sent (in no share,
    /// unreadable for sending). By row, so that ``verify()`` reports what holds a pending row rather
    /// than an older failure of a row since sent.
    private var refusals: [UUID: CloudError] = [:]
    private var runningEvents: [StoreEvent.Kind: StoreEvent] = [:]
    private var fetchError: CloudError?
    /// Why fetched changes could not be applied (the disk is full, the file is read-only…): from then
    /// on the engine's state is no longer persisted, so they are fetched again at the next start.
    private var importFailure: CloudError?
    let remoteChanges = Broadcast<StoreRemoteChange>()
    let events = Broadcast<StoreEvent>()

    static let zone = RecordZone(zoneID: RecordZone.ID(zoneName: RecordMapping.zoneName))
    /// The start of the name of each zone the store makes to share rows (Core Data's is
    /// `com.apple.coredata.cloudkit.share.`).
    static let shareZonePrefix = RecordMapping.zoneName + ".share."
    private static let engineStateKey = "engine_state"
    private static let zoneSavedKey = "zone_saved"

    init(pool: DatabasePool, model: StoreModel, capture: ChangeCapture, configuration: StratusStore.Mirroring) async throws {
        let scope = configuration.database.databaseScope
        self.scope = scope
        defaultZoneID = switch scope {
        case .private: Self.zone.zoneID
        case .shared: nil
        case .public: RecordZone.ID()
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
            // Rows written before their table was mirrored were never captured: they go out now, in
            // the private database (in the public one they would become this user's records for
            // everyone; in the shared one, rows of no share).
            try StoreMetadata.adoptUncapturedRows(of: model, in: db, sending: scope == .private)
            let state = try StoreMetadata.value(Self.engineStateKey, in: db).flatMap(Data.fromDatabaseValue).map {
                try JSONDecoder().decode(SyncEngine.State.Serialization.self, from: $0)
            }
            return (state, try StoreMetadata.value(Self.zoneSavedKey, in: db).flatMap(Bool.fromDatabaseValue) ?? false)
        }
        // A store of the shared database makes no zone (its zones are the shares it accepted), nor
        // one of the public database (its records are in the default zone).
        self.zoneSaved = zoneSaved || scope != .private
        let setup = StoreEvent(kind: .setup)
        events.yield(setup)
        runningEvents[.setup] = setup
        engine = try SyncEngine(
            SyncEngine.Configuration(
                database: configuration.database, stateSerialization: state, delegate: self,
                // The public database has no change feed to fetch nor subscription to push: the
                // store sends and polls by itself.
                automaticallySync: configuration.automaticallySync && scope != .public))
        if self.zoneSaved {
            end(.setup)
        } else {
            engine.state.add(pendingDatabaseChanges: [.saveZone(Self.zone)])
        }
        // The outbox (and the records moved rows left) is the truth: what the engine's saved state
        // lists beyond it is settled.
        let (outbox, moved) = try await pool.read { db in
            (try StoreMetadata.outbox(after: 0, in: db), try StoreMetadata.moved(in: db))
        }
        let placed = try await placeNewRows(outbox)
        let queued = Set(placed.compactMap(change(for:)) + moved.map { .deleteRecord($0) })
        engine.state.remove(pendingRecordZoneChanges: engine.state.pendingRecordZoneChanges.filter { !queued.contains($0) })
        queue(placed, isWholeOutboxAfterMark: true)
        engine.state.add(pendingRecordZoneChanges: moved.map { .deleteRecord($0) })
        // An engine that syncs by itself is handed each commit's changes soon after it, so that it
        // schedules a send. Otherwise nothing sends before the app syncs, and the changes of every
        // commit since are handed over then, in one read of the outbox, off the app's writes.
        // Commits that come while a queueing is waiting to start are queued by it: one task at a
        // time, however fast the app commits.
        if scope == .public, configuration.automaticallySync { startPolling() }
        guard configuration.automaticallySync, scope != .public else { return }
        capture.afterCapturedCommit.withLock { action in
            action = { [weak self] in
                guard let self, self.queueingScheduled.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
                else { return }
                Task {
                    self.queueingScheduled.store(false, ordering: .releasing)
                    try? await self.queueNewOutboxEntries()
                }
            }
        }
    }

    deinit {
        poller?.cancel()
    }

    /// Sends what is pending, then fetches what changed on the server (polls, in the public database).
    func sync() async throws {
        try await queueNewOutboxEntries()
        do {
            try await engine.sendChanges()
        } catch let error as CloudError where error.code == .partialFailure {
            // Each item's failure was handled as it was reported.
        }
        if scope == .public {
            // A poll's merges must not land between a send and its answer (a second `sync()` while
            // automatic sync sends): the answer's confirmation would settle the change they requeued.
            try await engine.performExclusively { [self] in try await poll() }
        } else {
            try await engine.fetchChanges()
        }
    }

    /// Whether `zoneID` holds rows of the store: its own zone and the zones it shares rows in (in
    /// the private database; other zones there belong to other code), every zone of the shared one.
    nonisolated private func ownsZone(_ zoneID: RecordZone.ID) -> Bool {
        guard let defaultZoneID else { return true }
        return zoneID == defaultZoneID
            || (zoneID.ownerName == defaultZoneID.ownerName && zoneID.zoneName.hasPrefix(Self.shareZonePrefix))
    }

    /// Fetches read the store's zones alone, the zones of shares first: a row moved into a share by
    /// another device then arrives in its new zone before its delete from the zone it left.
    func nextFetchChangesOptions(
        _ context: SyncEngine.FetchChangesContext, syncEngine: SyncEngine
    ) async -> SyncEngine.FetchChangesOptions {
        let zoneIDs = syncEngine.state.zoneIDsWithUnfetchedServerChanges.filter(ownsZone)
        return SyncEngine.FetchChangesOptions(scope: .zoneIDs(zoneIDs), prioritizedZoneIDs: zoneIDs.filter { $0 != defaultZoneID })
    }

    /// Where mirroring stands.
    func status() async throws -> StoreSyncStatus {
        let pending = try await pool.read { db in try StoreMetadata.outboxCount(in: db) }
        let serverAhead = engine.state.zoneIDsWithUnfetchedServerChanges.contains(where: ownsZone)
            || !engine.state.pendingDatabaseChanges.isEmpty
        // After a page failed to apply, its changes are fetched again only at the next start.
        return StoreSyncStatus(
            pendingChanges: pending, lastCompleteImport: lastCompleteFetch, lastError: importFailure ?? lastError,
            isUpToDate: pending == 0 && lastCompleteFetch != nil && !serverAhead && zoneSaved && importFailure == nil)
    }

    /// Syncs, then compares the digest of the local rows with the server's digest of each of the
    /// store's zones at a moment the server held still: read before and after the local digests at
    /// the same tokens.
    func verify() async throws -> StoreVerification {
        let database = configuration.database
        guard scope != .public else {
            throw CloudError(
                .invalidArguments,
                "verify() compares zone digests, which come from change feeds; the public database has none")
        }
        for _ in 0..<3 {
            try await sync()
            var server: [RecordZone.ID: ZoneDigest] = [:]
            var tokens: [RecordZone.ID: ServerChangeToken] = [:]
            for zone in try await database.allRecordZones() where ownsZone(zone.zoneID) {
                (server[zone.zoneID], tokens[zone.zoneID]) = try await database.zoneDigest(inZoneWith: zone.zoneID)
            }
            try await engine.fetchChanges()
            let (local, pendingRows) = try await pool.read { [model, mapping, defaultZoneID] db in
                let zones = try StoreMetadata.rowZones(in: db)
                var records: [RecordZone.ID: [Stratus.Record]] = [:]
                for table in model.syncedTables {
                    for record in try mapping.records(of: table, in: db) {
                        // A row of the shared database placed in no share yet is in the outbox.
                        guard let zoneID = UUID(text: record.recordID.recordName).flatMap({ zones[$0] }) ?? defaultZoneID
                        else { continue }
                        records[zoneID, default: []].append(record)
                    }
                }
                return (try records.mapValues { try ZoneDigest(records: $0) }, try StoreMetadata.outbox(after: -1, in: db).map(\.rowID))
            }
            var moved = false
            for (zoneID, token) in tokens where try await database.zoneDigest(inZoneWith: zoneID).changeToken != token {
                moved = true
            }
            if let refusal = pendingRows.lazy.compactMap({ self.refusals[$0] }).first {
                // A change the server refuses stays in the outbox: the copies cannot be equal.
                throw refusal
            }
            guard !moved, pendingRows.isEmpty else { continue }
            // A zone of the server with no rows here counts as empty here.
            let empty = try ZoneDigest(records: [])
            return StoreVerification(
                local: local.merging(server.keys.map { ($0, empty) }) { here, _ in here }, server: server)
        }
        throw CloudError(
            .serviceUnavailable, "the store or its zones kept changing while it was verified; verify again when it is quiet")
    }

    /// Writes the model's record types into the development schema by saving a representative
    /// record of each synced table in a zone of its own, then deleting the zone; returns the schema
    /// in CloudKit's schema language.
    func initializeSchema() async throws -> String {
        // The schema is the container's, whatever the database: the records go to a zone of the
        // private database, which every user has.
        let database = configuration.database.container.privateCloudDatabase
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
        let softDeletes = scope == .public
        let (schema, records) = try await pool.read { [model] db in
            (try StoreSchema.schema(of: model, softDeletes: softDeletes, in: db),
             try StoreSchema.representativeRecords(of: model, softDeletes: softDeletes, zoneID: zoneID, assetFile: assetFile, in: db))
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

    /// The change the engine sends for an outbox entry, in the zone of its row; `nil` for a row of
    /// the shared database that is in no share.
    nonisolated private func change(for entry: PendingChange) -> SyncEngine.PendingRecordZoneChange? {
        guard let zoneID = entry.zoneID ?? defaultZoneID else { return nil }
        let recordID = RecordMapping.recordID(entry.rowID, zoneID: zoneID)
        // In the public database a deleted row's record stays, marked deleted.
        return entry.operation == .save || scope == .public ? .saveRecord(recordID) : .deleteRecord(recordID)
    }

    /// Hands `entries` to the engine. When they are every outbox entry above `lastQueuedVersion`
    /// (`isWholeOutboxAfterMark`), the next queueing reads only what came after them; entries of
    /// some rows alone leave the mark, so that a change of another row between the two versions is
    /// still read.
    private func queue(_ entries: [PendingChange], isWholeOutboxAfterMark: Bool = false) {
        if isWholeOutboxAfterMark { lastQueuedVersion = max(lastQueuedVersion, entries.map(\.version).max() ?? 0) }
        guard !entries.isEmpty else { return }
        var changes: [SyncEngine.PendingRecordZoneChange] = []
        for entry in entries {
            if let change = change(for: entry) {
                changes.append(change)
            } else {
                let refusal = CloudError(
                    .invalidArguments,
                    "row \(entry.rowID) of '\(entry.table)' is in no share: a row written to a store of the shared database "
                        + "must reference a shared row, whose share it joins")
                lastError = refusal
                refusals[entry.rowID] = refusal
            }
        }
        engine.state.add(pendingRecordZoneChanges: changes)
    }

    private func queueNewOutboxEntries() async throws {
        let version = lastQueuedVersion
        queue(try await placeNewRows(try await pool.read { db in try StoreMetadata.outbox(after: version, in: db) }), isWholeOutboxAfterMark: true)
    }

    /// Places each new row that references a row of a share in that share's zone (as a to-do added
    /// to a shared list joins its share): a row the server never held, saved, with no zone yet.
    /// Returns `entries` with the zones found. In the shared database, where every record is in a
    /// share's zone, a row deleted before it joined one was never on the server: its deletion is
    /// settled here, and left out.
    private func placeNewRows(_ entries: [PendingChange]) async throws -> [PendingChange] {
        var entries = entries
        let neverSent = { (entry: PendingChange) in entry.zoneID == nil && entry.operation == .delete }
        if defaultZoneID == nil, entries.contains(where: neverSent) {
            let settled = entries.filter(neverSent)
            try await pool.write { db in
                try StoreMetadata.fold(in: db)
                for entry in settled { try StoreMetadata.confirm(entry, in: db) }
            }
            entries.removeAll(where: neverSent)
        }
        let unplaced = entries.filter { $0.zoneID == nil && $0.operation == .save }
        // Rows are placed in shares only where some row is in one (asked without taking the writer).
        guard !unplaced.isEmpty, try await pool.read(StoreMetadata.hasRowsInOtherZones) else { return entries }
        let placed = try await pool.write { [model, mapping] db -> [UUID: RecordZone.ID] in
            guard try StoreMetadata.hasRowsInOtherZones(in: db) else { return [:] }
            var placed: [UUID: RecordZone.ID] = [:]
            for entry in unplaced {
                guard let table = model.table(named: entry.table), !table.relationships.isEmpty,
                    try StoreMetadata.changeTag(table: table.name, rowID: entry.rowID, in: db) == nil,
                    let values = try mapping.columnValues(of: table, rowID: entry.rowID, columns: StoreColumns(table, in: db), in: db)
                else { continue }
                for relationship in table.relationships {
                    guard let related = values[relationship.column].flatMap(UUID.init(databaseKey:)),
                        let zoneID = try StoreMetadata.zone(ofRow: related, in: db)
                    else { continue }
                    try StoreMetadata.setZone(zoneID, table: table.name, rowID: entry.rowID, in: db)
                    placed[entry.rowID] = zoneID
                    break
                }
            }
            return placed
        }
        return entries.map { entry in
            var entry = entry
            entry.zoneID = entry.zoneID ?? placed[entry.rowID]
            return entry
        }
    }

    // MARK: - SyncEngineDelegate

    func nextRecordZoneChangeBatch(
        _ context: SyncEngine.SendChangesContext, syncEngine: SyncEngine
    ) async -> SyncEngine.RecordZoneChangeBatch? {
        // The front of the queue, a request's worth at a time (the whole queue would cost each batch
        // a copy of everything pending).
        var pending = syncEngine.state.pendingRecordZoneChanges(in: context.options.scope, limit: Self.operationsPerRequest)
        guard !pending.isEmpty else { return nil }
        do {
            // Rows are read a request's worth at a time, from the front of the queue, until a request
            // is full: a long outbox costs each batch one request's reads, not the whole outbox's.
            var sent: [Stratus.Record.ID: Sent] = [:]
            var records: [Stratus.Record.ID: Stratus.Record] = [:]
            var settled: [SyncEngine.PendingRecordZoneChange] = []
            var scanned = 0
            while sent.count < Self.operationsPerRequest {
                if scanned == pending.count {
                    // Changes the outbox settled or could not send left room: read further along.
                    pending = syncEngine.state.pendingRecordZoneChanges(
                        in: context.options.scope, limit: scanned + Self.operationsPerRequest)
                    guard scanned < pending.count else { break }
                }
                let chunk = Array(pending[scanned..<min(scanned + Self.operationsPerRequest, pending.count)])
                scanned += chunk.count
                // On the writer: the app's changes are folded into the outbox here, off the app's
                // writes, so that the batch reads each row's entry by key; and the writer's cache
                // holds the outbox, rows and records the last batches read and kept, where a
                // reader's starts empty after every commit (a pool's readers drop their caches when
                // the file changed), and read each page from the file again.
                let (chunkSent, chunkRecords, unsendable) = try await pool.write { db in
                    try StoreMetadata.fold(in: db)
                    return try self.changesToSend(chunk, in: db)
                }
                // Each change is sent as the outbox has it now; one the outbox no longer lists is
                // settled. A row that cannot be read for sending stays queued, and the rest go.
                settled += chunk.filter { chunkSent[$0.recordID] == nil && unsendable[$0.recordID] == nil }
                if let failure = unsendable.values.first { lastError = failure }
                for (recordID, failure) in unsendable {
                    if let rowID = UUID(text: recordID.recordName) { refusals[rowID] = failure }
                }
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
    /// values of each change the outbox still lists, and the records of its saves; the deletes of
    /// records that moved rows left. The entries, the rows of each table and the server's records
    /// are read a statement per hundred changes, not one per change.
    nonisolated private func changesToSend(
        _ changes: [SyncEngine.PendingRecordZoneChange], in db: GRDB.Database
    ) throws -> ([Stratus.Record.ID: Sent], [Stratus.Record.ID: Stratus.Record], unsendable: [Stratus.Record.ID: CloudError]) {
        var sent: [Stratus.Record.ID: Sent] = [:]
        var columns: [String: StoreColumns] = [:]
        let entries = try StoreMetadata.outboxEntries(rowIDs: changes.compactMap { UUID(text: $0.recordID.recordName) }, in: db)
        // The saves whose rows are read, by table.
        var saves: [String: [(recordID: Stratus.Record.ID, entry: PendingChange)]] = [:]
        for change in changes {
            if case .deleteRecord(let recordID) = change, try StoreMetadata.isMoved(recordID, in: db) {
                sent[recordID] = Sent()
                continue
            }
            guard let rowID = UUID(text: change.recordID.recordName),
                let entry = entries[rowID], self.change(for: entry) == change,
                let table = model.table(named: entry.table)
            else { continue }
            if entry.operation == .delete, scope != .public {
                sent[change.recordID] = Sent(entry: entry)
                continue
            }
            if columns[table.name] == nil { columns[table.name] = try StoreColumns(table, in: db) }
            if entry.operation == .delete {
                // A deletion in the public database is the save of a record with no values, marked deleted.
                sent[change.recordID] = Sent(entry: entry, values: [:])
            } else {
                saves[table.name, default: []].append((change.recordID, entry))
            }
        }
        for (table, tableSaves) in saves {
            guard let tableColumns = columns[table] else { continue }
            // A row deleted since its change was queued is not sent.
            let values = try mapping.columnValues(
                ofRows: tableSaves.map(\.entry.rowID),
                storedKeys: Dictionary(tableSaves.map { ($0.entry.rowID, $0.entry.storedKey) }) { first, _ in first },
                columns: tableColumns, in: db)
            for (recordID, entry) in tableSaves {
                if let rowValues = values[entry.rowID] { sent[recordID] = Sent(entry: entry, values: rowValues) }
            }
        }
        // The server's records the saves are based on, by table.
        var serverRecords: [String: [UUID: StoreMetadata.ServerRecord]] = [:]
        for (table, items) in Dictionary(grouping: sent.values.compactMap { $0.values == nil ? nil : $0.entry }, by: \.table) {
            serverRecords[table] = try StoreMetadata.serverRecords(table: table, rowIDs: items.map(\.rowID), in: db)
        }
        var records: [Stratus.Record.ID: Stratus.Record] = [:]
        var unsendable: [Stratus.Record.ID: CloudError] = [:]
        for (recordID, item) in sent {
            do {
                records[recordID] = try record(for: item, recordID: recordID, columns: columns, serverRecords: serverRecords)
            } catch {
                // An asset file that cannot be written, say: this row waits, the others go.
                sent[recordID] = nil
                unsendable[recordID] = CloudError(
                    .internalError, "row \(recordID.recordName) could not be prepared for sending; it waits: \(error)")
            }
        }
        return (sent, records, unsendable)
    }

    /// The record to save for a sent save: based on the server's record this device last knew
    /// (among `serverRecords`, by table and row; so the save sends what changed since, removals
    /// included), holding the row's values.
    nonisolated private func record(
        for item: Sent, recordID: Stratus.Record.ID, columns: [String: StoreColumns],
        serverRecords: [String: [UUID: StoreMetadata.ServerRecord]]
    ) throws -> Stratus.Record? {
        guard let values = item.values, let entry = item.entry, let table = model.table(named: entry.table),
            let tableColumns = columns[table.name], case .synced(let recordType) = table.configuration
        else { return nil }
        let rowID = entry.rowID
        var record: Stratus.Record
        if let server = serverRecords[table.name]?[rowID] {
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
        if scope == .public {
            record.setFieldValue(.int64(entry.operation == .delete ? 1 : 0), forKey: RecordMapping.deletedKey)
        }
        return record
    }

    /// The records of `zoneID` the store holds as the server had them, by the IDs in their system
    /// fields (another client may name a row's record in another case than this store would): after
    /// the zone's token expired, the engine hands back as deleted those the new full read does not
    /// return. Read on that rare occasion only, so each record's system fields are decoded.
    func recordsHeld(inZone zoneID: RecordZone.ID, syncEngine: SyncEngine) async -> [Stratus.Record.ID: String] {
        guard ownsZone(zoneID) else { return [:] }
        do {
            let systemFields = try await pool.read { [defaultZoneID] db in
                try StoreMetadata.systemFieldsOfServerRecords(inZone: zoneID == defaultZoneID ? nil : zoneID, in: db)
            }
            var held: [Stratus.Record.ID: String] = [:]
            for data in systemFields {
                let record = try Stratus.Record(systemFieldsData: data)
                // Named as the fetch names the zone's records.
                held[Stratus.Record.ID(recordName: record.recordID.recordName, zoneID: zoneID)] = record.recordType
            }
            return held
        } catch {
            lastError = Self.cloudError(error)
            return [:]
        }
    }

    func handleEvent(_ event: SyncEngine.Event, syncEngine: SyncEngine) async {
        do {
            switch event {
            case .stateUpdate(let update):
                // After a page failed to apply, the state (whose token is past it) is not kept: the
                // next start fetches from the last state that followed only applied pages.
                guard importFailure == nil else { break }
                // The outbox, not the engine's state, keeps what is left to send: every start
                // queues it again.
                let data = try JSONEncoder().encode(update.stateSerialization.withoutPendingRecordZoneChanges())
                try await pool.write { db in try StoreMetadata.setValue(data, for: Self.engineStateKey, in: db) }
            case .accountChange(let change):
                switch change.changeType {
                case .signIn:
                    // What was written while nobody was signed in is in the outbox, and goes to this account.
                    if scope == .private { syncEngine.state.add(pendingDatabaseChanges: [.saveZone(Self.zone)]) }
                    try await queueAllOutboxEntries()
                case .signOut, .switchAccounts:
                    // The rows were the previous account's: they go, as Core Data's mirror purges them.
                    try await purge()
                }
            case .fetchedDatabaseChanges(let changes):
                for deletion in changes.deletions where ownsZone(deletion.zoneID) {
                    // The store's own zone gone resets the store; a share's zone gone (sharing
                    // stopped, the participant left) takes its rows.
                    if deletion.zoneID == defaultZoneID { try await purge() } else { try await purge(zone: deletion.zoneID) }
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
        try await importRecords(
            changes.modifications.map(\.record), deletions: changes.deletions.map { ($0.recordID, $0.recordType) })
    }

    /// Applies records saved and deleted on the server in one transaction, as the author `import`,
    /// with `alsoWrite` (the position a poll reached) in the same transaction.
    private func importRecords(
        _ records: [Stratus.Record], deletions: [(recordID: Stratus.Record.ID, recordType: String)] = [],
        alsoWrite: (@Sendable (GRDB.Database) throws -> Void)? = nil
    ) async throws {
        let (outcome, transaction) = try await writeAsImport { [self] db in
            var merger = try Merger(mirror: self, db: db)
            try merger.readAhead(of: records)
            for record in records {
                if let share = Share(record) {
                    try StoreMetadata.setSharePermission(
                        share.currentUserParticipant?.role == .owner ? .readWrite : share.currentUserParticipant?.permission,
                        zone: record.recordID.zoneID, in: db)
                    continue
                }
                try merger.applyReadable(server: record, recordID: record.recordID, recordType: record.recordType)
            }
            for deletion in deletions {
                try merger.applyReadable(server: nil, recordID: deletion.recordID, recordType: deletion.recordType)
            }
            try alsoWrite?(db)
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

    /// Decides rows against the server's records, within one write of ``writeAsImport(_:)``: the
    /// app's changes are folded into the outbox when it starts, so entries are read from the outbox
    /// table alone.
    private struct Merger {
        let mirror: StoreMirror
        let db: GRDB.Database
        /// Each table's columns, read once per transaction.
        private var columnsByTable: [String: StoreColumns] = [:]
        /// What the merges changed, to hand to the engine after the commit.
        var outcome = MergeOutcome()
        /// Whether the outbox may hold an entry: read once (a device that only receives has none,
        /// and its records then skip the lookup), set again when a merge queues one.
        private var outboxMayHoldEntries: Bool
        /// Whether a row may live outside the store's own zone: read once (most stores keep every
        /// row in it, and their records then skip forgetting a placement they never had), set again
        /// when a record places one elsewhere.
        private var rowsMayLiveElsewhere: Bool
        /// Change tags read ahead for a batch of fetched records, by table and row (`nil`: no
        /// record known), kept up to date as the batch's records are remembered.
        private var knownChangeTags: [String: [UUID: String?]] = [:]
        /// Keys as stored, read ahead for the same batch (`nil`: no row), kept up to date as the
        /// batch's rows are written and deleted.
        private var knownKeys: [String: [UUID: DatabaseValue?]] = [:]

        init(mirror: StoreMirror, db: GRDB.Database) throws {
            self.mirror = mirror
            self.db = db
            outboxMayHoldEntries = try StoreMetadata.hasFoldedOutboxEntries(in: db)
            rowsMayLiveElsewhere = try StoreMetadata.hasRowsInOtherZones(in: db)
        }

        /// Reads the change tags and stored keys of the rows `records` stand for, a few statements
        /// per table, before they are applied.
        mutating func readAhead(of records: [Stratus.Record]) throws {
            var rows: [String: (table: StoreTable, rows: [(rowID: UUID, changeTag: String?)])] = [:]
            for record in records where mirror.ownsZone(record.recordID.zoneID) {
                guard let table = mirror.tablesByRecordType[record.recordType], let rowID = UUID(text: record.recordID.recordName)
                else { continue }
                rows[table.name, default: (table, [])].rows.append((rowID, record.recordChangeTag))
            }
            for (name, (table, rows)) in rows {
                let rowIDs = rows.map(\.rowID)
                let tags = try StoreMetadata.changeTags(table: name, rowIDs: rowIDs, in: db)
                knownChangeTags[name] = Dictionary(rowIDs.map { ($0, tags[$0]) }, uniquingKeysWith: { first, _ in first })
                // A record this device holds at the fetched version (its own save coming back) is
                // skipped before its row is looked for.
                let changed = rows.filter { $0.changeTag == nil || tags[$0.rowID] != $0.changeTag }.map(\.rowID)
                let keys = try columns(of: table).storedKeys(of: changed, in: db)
                knownKeys[name] = Dictionary(changed.map { ($0, keys[$0]) }, uniquingKeysWith: { first, _ in first })
            }
        }

        /// The table's columns as the mapping uses them.
        private mutating func columns(of table: StoreTable) throws -> StoreColumns {
            if let known = columnsByTable[table.name] { return known }
            let read = try StoreColumns(table, in: db)
            columnsByTable[table.name] = read
            return read
        }

        /// Writes the row of `rowID` (`values`) or deletes it (`nil`), keeping the known keys up to date.
        private mutating func write(_ values: [String: DatabaseValue]?, table: StoreTable, rowID: UUID, columns: StoreColumns) throws {
            guard let values else {
                try mirror.mapping.delete(rowID: rowID, from: table, columns: columns, in: db)
                knownKeys[table.name]?.updateValue(nil, forKey: rowID)
                return
            }
            let storedKey: DatabaseValue?
            if let known = knownKeys[table.name]?[rowID] {
                storedKey = known
            } else {
                storedKey = try columns.storedKey(of: rowID, in: db)
            }
            try mirror.mapping.write(values, rowID: rowID, storedKey: storedKey, to: table, columns: columns, in: db)
            // A new row's key is written in the form the mapping chooses.
            knownKeys[table.name]?.updateValue(storedKey ?? Optional(columns.keyValue(rowID)), forKey: rowID)
        }

        /// The change tag of the server's record of a row as last known.
        private func changeTag(table: String, rowID: UUID) throws -> String? {
            if let known = knownChangeTags[table]?[rowID] { return known }
            return try StoreMetadata.changeTag(table: table, rowID: rowID, in: db)
        }

        /// The outbox entry of a row, when the outbox may hold one.
        private func outboxEntry(rowID: UUID) throws -> PendingChange? {
            outboxMayHoldEntries ? try StoreMetadata.foldedOutboxEntry(rowID: rowID, in: db) : nil
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
            guard mirror.ownsZone(recordID.zoneID), let table = mirror.tablesByRecordType[recordType],
                let rowID = UUID(text: recordID.recordName)
            else { return }
            // The delete of the record a row left when it moved into a share (from another device)
            // is not the row's.
            if record == nil, let zoneID = try StoreMetadata.zone(ofRow: rowID, in: db) ?? mirror.defaultZoneID,
                zoneID != recordID.zoneID
            {
                return
            }
            // Nor is that record itself, fetched before its deletion went out (a fetch that read the
            // row's first save after this device moved it): the row lives in its share now.
            if record != nil, try StoreMetadata.isMoved(recordID, in: db) { return }
            // A record this device already holds at this version (its own save, coming back in the
            // feed) changes nothing.
            if let tag = record?.recordChangeTag, try changeTag(table: table.name, rowID: rowID) == tag {
                return
            }
            let tableColumns = try columns(of: table)
            // A record of the public database marked deleted is a deletion; its system fields are
            // kept, to base a later save of the same row on.
            let live = record.flatMap { RecordMapping.isMarkedDeleted($0) ? nil : $0 }
            let server = try live.map { try mirror.mapping.columnValues(of: $0, table: table, columns: tableColumns) }
            var result = server
            if let entry = try outboxEntry(rowID: rowID) {
                let known = try StoreMetadata.serverRecord(table: table.name, rowID: rowID, in: db)
                if server == known?.values {
                    // The server's record is the one this device last agreed on (its own save coming
                    // back, with a new tag, or another device's save of the same values): the local
                    // change stands, based on it, and is queued again, since a save the server
                    // refused for its old tag is no longer pending in the engine.
                    try remember(record, values: server, table: table, rowID: rowID)
                    outcome.requeued.append(entry.operation == .save ? .saveRecord(recordID) : .deleteRecord(recordID))
                    return
                }
                let local = entry.operation == .delete
                    ? nil : try mirror.mapping.columnValues(of: table, rowID: rowID, columns: tableColumns, in: db)
                let conflict = StoreConflict(table: table.name, rowID: rowID, ancestor: known?.values, local: local, server: server)
                result = mirror.configuration.customMerges[table.name]?(conflict) ?? mirror.configuration.mergePolicy.resolve(conflict)
                switch (result, server) {
                case (nil, nil),
                    (_?, _?) where result == server:
                    try StoreMetadata.dropOutboxEntry(table: table.name, rowID: rowID, in: db)
                    outcome.settled.append(entry.operation == .save ? .saveRecord(recordID) : .deleteRecord(recordID))
                case (nil, _?):
                    try StoreMetadata.requeue(.delete, table: table.name, rowID: rowID, in: db)
                    outboxMayHoldEntries = true
                    outcome.requeued.append(.deleteRecord(recordID))
                case (_?, _):
                    try StoreMetadata.requeue(.save, table: table.name, rowID: rowID, in: db)
                    outboxMayHoldEntries = true
                    outcome.requeued.append(.saveRecord(recordID))
                }
            }
            try write(result, table: table, rowID: rowID, columns: tableColumns)
            try remember(record, values: server, table: table, rowID: rowID)
        }

        /// Puts the row of `recordID` back as the server last had it (a change it refused: a
        /// participant's who may only read): the server's values, or no row when the server has none.
        mutating func rollBack(_ recordID: Stratus.Record.ID, table: StoreTable, rowID: UUID) throws {
            let known = try StoreMetadata.serverRecord(table: table.name, rowID: rowID, in: db)
            try write(known?.values, table: table, rowID: rowID, columns: columns(of: table))
            if let entry = try outboxEntry(rowID: rowID) {
                try StoreMetadata.dropOutboxEntry(table: table.name, rowID: rowID, in: db)
                outcome.settled.append(entry.operation == .save ? .saveRecord(recordID) : .deleteRecord(recordID))
            }
        }

        /// Keeps the server's record of a row as the ancestor of later merges, and the zone it
        /// lives in; `nil`: it is gone.
        private mutating func remember(
            _ record: Stratus.Record?, values: [String: DatabaseValue]?, table: StoreTable, rowID: UUID
        ) throws {
            try StoreMetadata.setServerRecord(record, values: values ?? [:], table: table.name, rowID: rowID, in: db)
            knownChangeTags[table.name]?.updateValue(record?.recordChangeTag, forKey: rowID)
            guard let zoneID = record?.recordID.zoneID else { return }
            let elsewhere = zoneID == mirror.defaultZoneID ? nil : zoneID
            guard elsewhere != nil || rowsMayLiveElsewhere else { return }
            try StoreMetadata.setZone(elsewhere, table: table.name, rowID: rowID, in: db)
            if elsewhere != nil { rowsMayLiveElsewhere = true }
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
        let rowIDs = changes.compactMap { UUID(text: $0.recordID.recordName) }
        queue(try await pool.read { db in try rowIDs.compactMap { try StoreMetadata.outboxEntry(rowID: $0, in: db) } })
    }

    // MARK: - Export

    /// Keeps what the server saved and deleted, and decides what it refused.
    private func settle(_ sent: SyncEngine.Event.SentRecordZoneChanges) async throws {
        let answered = sent.savedRecords.map(\.recordID) + sent.deletedRecordIDs + sent.failedRecordSaves.map(\.record.recordID)
            + Array(sent.failedRecordDeletes.keys)
        let sentNow = answered.reduce(into: [Stratus.Record.ID: Sent]()) { $0[$1] = inFlight.removeValue(forKey: $1) }
        let (outcome, zonesGone, refused, refusedRows, transaction) = try await writeAsImport { [self] db in
            var merger = try Merger(mirror: self, db: db)
            var zonesGone: Set<RecordZone.ID> = []
            var refused: CloudError?
            var refusedRows: [UUID: CloudError] = [:]
            for record in sent.savedRecords {
                guard let item = sentNow[record.recordID], let entry = item.entry, let values = item.values else { continue }
                try StoreMetadata.confirm(entry, in: db)
                try StoreMetadata.setServerRecord(record, values: values, table: entry.table, rowID: entry.rowID, in: db)
            }
            for recordID in sent.deletedRecordIDs {
                guard let item = sentNow[recordID] else { continue }
                try settleDelete(recordID, entry: item.entry, in: db)
            }
            for failure in sent.failedRecordSaves {
                let recordID = failure.record.recordID
                guard let entry = sentNow[recordID]?.entry, let table = model.table(named: entry.table),
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
                    try merger.apply(server: nil, recordID: recordID, recordType: recordType)
                case .zoneNotFound where recordID.zoneID == defaultZoneID:
                    try StoreMetadata.setServerRecord(nil, values: [:], table: table.name, rowID: entry.rowID, in: db)
                    merger.outcome.requeued.append(.saveRecord(recordID))
                    zonesGone.insert(recordID.zoneID)
                case .zoneNotFound:
                    // A share's zone is gone (sharing stopped): its rows go with it.
                    zonesGone.insert(recordID.zoneID)
                case .permissionFailure:
                    // A participant who may only read: the row goes back to the server's.
                    try merger.rollBack(recordID, table: table, rowID: entry.rowID)
                    refused = failure.error
                default:
                    if !failure.error.keepsChangesPending {
                        refused = failure.error
                        refusedRows[entry.rowID] = failure.error
                    }
                }
            }
            for (recordID, error) in sent.failedRecordDeletes {
                guard let item = sentNow[recordID] else { continue }
                if error.code == .unknownItem || error.code == .zoneNotFound {
                    // Already gone: what the delete wanted.
                    try settleDelete(recordID, entry: item.entry, in: db)
                } else if error.code == .permissionFailure, let entry = item.entry, let table = model.table(named: entry.table) {
                    try merger.rollBack(recordID, table: table, rowID: entry.rowID)
                    refused = error
                } else if !error.keepsChangesPending {
                    refused = error
                    if let entry = item.entry { refusedRows[entry.rowID] = error }
                    // A left-behind record the server will not delete stays; the row lives on in its share.
                    if item.entry == nil { try StoreMetadata.removeMoved(recordID, in: db) }
                }
            }
            return (merger.outcome, zonesGone, refused, refusedRows, capture.capturedTransaction())
        }
        refusals.merge(refusedRows) { $1 }
        for zoneID in zonesGone {
            if zoneID == defaultZoneID {
                zoneSaved = false
                engine.state.add(pendingDatabaseChanges: [.saveZone(Self.zone)])
            } else {
                try await purge(zone: zoneID)
            }
        }
        try await hand(outcome)
        // A merge after a conflict, or a rollback of a refused change, rewrote rows.
        if let transaction { remoteChanges.yield(StoreRemoteChange(historyToken: HistoryToken(transaction: transaction))) }
        if let refused {
            lastError = refused
            runningEvents[.export]?.error = refused
        }
    }

    /// Keeps that `recordID` is deleted: the outbox entry sent is settled, or the record a moved row
    /// left is.
    nonisolated private func settleDelete(_ recordID: Stratus.Record.ID, entry: PendingChange?, in db: GRDB.Database) throws {
        guard let entry else { return try StoreMetadata.removeMoved(recordID, in: db) }
        try StoreMetadata.confirm(entry, in: db)
        try StoreMetadata.setServerRecord(nil, values: [:], table: entry.table, rowID: entry.rowID, in: db)
    }

    // MARK: - Polling the public database

    /// How far before the last modification a poll saw the next poll starts: a save stamped earlier
    /// but committed after that poll read is still found (records already held are skipped by
    /// their change tag).
    private static let pollOverlap: TimeInterval = 60

    /// Sends, then polls, every `pollInterval`, until the store is dropped.
    private func startPolling() {
        let interval = configuration.pollInterval
        poller = Task { [weak self] in
            while !Task.isCancelled {
                try? await self?.sync()
                try? await Task.sleep(for: interval)
            }
        }
    }

    /// Reads what changed in the public database since the last poll, record type by record type,
    /// by modification time (the public database has no change feed), and applies each page in one
    /// transaction with the position it reached.
    private func poll() async throws {
        fetchError = nil
        begin(.import)
        do {
            for table in model.syncedTables {
                guard case .synced(let recordType) = table.configuration else { continue }
                try await poll(recordType)
            }
            lastCompleteFetch = Date()
            end(.import)
        } catch {
            let error = Self.cloudError(error)
            lastError = error
            end(.import, error: error)
            throw error
        }
    }

    /// The mirror keys of the public database's poll positions, one per record type; a purge
    /// removes them, so that the next poll reads every row again.
    private static let pollPositionPrefix = "poll_position."

    private func poll(_ recordType: String) async throws {
        let database = configuration.database
        let positionKey = Self.pollPositionPrefix + recordType
        let position = try await pool.read { db in try StoreMetadata.value(positionKey, in: db).flatMap(Double.fromDatabaseValue) }
        let since = position.map { Date(timeIntervalSince1970: $0 - Self.pollOverlap) }
        let query = Query(
            recordType: recordType, predicate: since.map { .greaterThanOrEquals("___modTime", $0) } ?? .all,
            sortDescriptors: [Query.SortDescriptor(key: "___modTime")])
        var page: (matchResults: [(Stratus.Record.ID, Result<Stratus.Record, CloudError>)], queryCursor: Query.Cursor?)
        do {
            page = try await database.records(matching: query, inZoneWith: defaultZoneID)
        } catch let error as CloudError where error.code == .unknownItem {
            // No record of this type was ever saved: the schema does not know it yet.
            return
        }
        while true {
            let records = page.matchResults.compactMap { try? $0.1.get() }
            if let reached = records.compactMap(\.modificationDate).max() {
                let seconds = max(position ?? 0, reached.timeIntervalSince1970)
                try await importRecords(records) { db in try StoreMetadata.setValue(seconds, for: positionKey, in: db) }
            }
            guard let cursor = page.queryCursor else { return }
            page = try await database.records(continuingMatchFrom: cursor)
        }
    }

    // MARK: - Sharing

    /// Shares a row of the private database and the rows below it (Core Data's `share(_:to:)`): the
    /// first time, in a zone of their own with a zone-wide share that `configure` prepares, moving
    /// them there (each saved in the new zone and deleted from the one it left, through the
    /// outbox); a row already shared gives its share, configured and saved again.
    func share(_ rowID: UUID, configure: @Sendable (inout Share) -> Void) async throws -> Share {
        guard scope == .private, let defaultZoneID else {
            throw CloudError(
                .invalidArguments,
                "rows are shared by their owner's store, which mirrors the private database; this store mirrors the \(scope.rawValue) one")
        }
        let database = configuration.database
        let (zoneID, table) = try await pool.read { db in
            (try StoreMetadata.zone(ofRow: rowID, in: db), try self.table(holding: rowID, in: db))
        }
        guard table != nil else { throw CloudError(.unknownItem, "no synced table of the store has a row \(rowID)") }
        if let zoneID {
            var share = try await existingShare(in: zoneID) ?? Share(recordZoneID: zoneID)
            configure(&share)
            return try await database.save(share)
        }
        let shareZoneID = RecordZone.ID(zoneName: Self.shareZonePrefix + UUID().uuidString.lowercased())
        _ = try await database.save(RecordZone(zoneID: shareZoneID))
        var share = Share(recordZoneID: shareZoneID)
        configure(&share)
        share = try await database.save(share)
        // The rows are gathered in the transaction that moves them: a row added below them
        // meanwhile moves too. The move waits for a send in flight, whose answer would otherwise
        // settle a moved row's entry as sent (to the zone it left) or remember its record there.
        let (leftBehind, entries) = try await engine.performExclusively { [pool] in try await pool.write { db in
            try StoreMetadata.fold(in: db)
            var leftBehind: [Stratus.Record.ID] = []
            var entries: [PendingChange] = []
            for (table, row) in try self.rowsToShare(from: rowID, in: db) {
                if try StoreMetadata.serverRecord(table: table.name, rowID: row, in: db) != nil {
                    let old = RecordMapping.recordID(row, zoneID: defaultZoneID)
                    try StoreMetadata.addMoved(old, in: db)
                    leftBehind.append(old)
                    try StoreMetadata.setServerRecord(nil, values: [:], table: table.name, rowID: row, in: db)
                }
                try StoreMetadata.setZone(shareZoneID, table: table.name, rowID: row, in: db)
                try StoreMetadata.requeue(.save, table: table.name, rowID: row, in: db)
                if let entry = try StoreMetadata.outboxEntry(rowID: row, in: db) { entries.append(entry) }
            }
            try StoreMetadata.setSharePermission(.readWrite, zone: shareZoneID, in: db)
            return (leftBehind, entries)
        } }
        queue(entries)
        engine.state.add(pendingRecordZoneChanges: leftBehind.map { .deleteRecord($0) })
        do {
            try await engine.sendChanges()
        } catch let error as CloudError where error.code == .partialFailure || error.keepsChangesPending {
            // What was not sent stays in the outbox for the next send.
        }
        return share
    }

    /// The share of the zone a row is in; `nil` for a row that is not shared.
    func share(of rowID: UUID) async throws -> Share? {
        guard let zoneID = try await pool.read({ db in try StoreMetadata.zone(ofRow: rowID, in: db) }) else { return nil }
        return try await existingShare(in: zoneID)
    }

    private func existingShare(in zoneID: RecordZone.ID) async throws -> Share? {
        do {
            return Share(try await configuration.database.record(for: Share(recordZoneID: zoneID).recordID))
        } catch let error as CloudError where error.code == .unknownItem {
            return nil
        }
    }

    /// Ends the sharing of a row's share: its owner stops sharing (the rows stay, in their zone); a
    /// participant leaves, and the share's rows leave this device.
    func stopSharing(_ rowID: UUID) async throws {
        guard let zoneID = try await pool.read({ db in try StoreMetadata.zone(ofRow: rowID, in: db) }) else {
            throw CloudError(.invalidArguments, "row \(rowID) is not shared")
        }
        do {
            _ = try await configuration.database.deleteRecord(withID: Share(recordZoneID: zoneID).recordID)
        } catch let error as CloudError where error.code == .unknownItem || error.code == .zoneNotFound {
            // Already stopped.
        }
        if scope == .shared {
            try await purge(zone: zoneID)
        } else {
            try await pool.write { db in try StoreMetadata.setSharePermission(nil, zone: zoneID, in: db) }
        }
    }

    /// Accepts a share into a store of the shared database, then fetches its rows.
    func accept(_ metadata: Share.Metadata) async throws {
        guard scope == .shared else {
            throw CloudError(
                .invalidArguments,
                "shares are accepted into a store of the shared database (container.sharedCloudDatabase); this one mirrors the \(scope.rawValue) one")
        }
        try await configuration.database.container.accept(metadata)
        try await sync()
    }

    /// Whether the signed-in user may change and delete a row: always in their own database; in
    /// the shared one, where the row's share gives them read-and-write permission.
    func canWrite(_ rowID: UUID) async throws -> Bool {
        switch scope {
        case .private:
            return true
        case .shared:
            return try await pool.read { db in
                guard let zoneID = try StoreMetadata.zone(ofRow: rowID, in: db) else { return false }
                return try StoreMetadata.sharePermission(zone: zoneID, in: db) == .readWrite
            }
        case .public:
            let creator = try await pool.read { db -> Stratus.Record.ID? in
                guard let table = try self.table(holding: rowID, in: db),
                    let known = try StoreMetadata.serverRecord(table: table.name, rowID: rowID, in: db)
                else { return nil }
                return try Stratus.Record(systemFieldsData: known.systemFields).creatorUserRecordID
            }
            guard let creator else { return true }
            return creator.recordName == (try await configuration.database.container.userRecordID()).recordName
        }
    }

    /// The synced table with a row keyed `rowID`.
    nonisolated private func table(holding rowID: UUID, in db: GRDB.Database) throws -> StoreTable? {
        for table in model.syncedTables {
            let columns = try StoreColumns(table, in: db)
            let found = try Bool.fetchOne(
                db,
                sql: """
                    SELECT EXISTS (SELECT 1 FROM \(table.name.quotedDatabaseIdentifier)
                    WHERE \(columns.key.quotedDatabaseIdentifier) IN (?, ?, ?))
                    """, arguments: StatementArguments(databaseValues: StoreColumns.keyForms(rowID)))
            if found == true { return table }
        }
        return nil
    }

    /// A row and every row below it: the rows that reference it through a relationship, and theirs
    /// (a list and its items), leaving out rows already in a share.
    nonisolated private func rowsToShare(from rowID: UUID, in db: GRDB.Database) throws -> [(StoreTable, UUID)] {
        guard let root = try table(holding: rowID, in: db) else { return [] }
        var rows: [(StoreTable, UUID)] = [(root, rowID)]
        var seen: Set<UUID> = [rowID]
        var next = 0
        while next < rows.count {
            let (parent, parentID) = rows[next]
            next += 1
            for table in model.syncedTables {
                for relationship in table.relationships where relationship.destination == parent.name {
                    let columns = try StoreColumns(table, in: db)
                    let children = try DatabaseValue.fetchAll(
                        db,
                        sql: """
                            SELECT \(columns.key.quotedDatabaseIdentifier) FROM \(table.name.quotedDatabaseIdentifier)
                            WHERE \(relationship.column.quotedDatabaseIdentifier) IN (?, ?, ?)
                            """, arguments: StatementArguments(databaseValues: StoreColumns.keyForms(parentID)))
                    for child in children.compactMap(UUID.init(databaseKey:)) where seen.insert(child).inserted {
                        guard try StoreMetadata.zone(ofRow: child, in: db) == nil else { continue }
                        rows.append((table, child))
                    }
                }
            }
        }
        return rows
    }

    // MARK: - Purging

    /// Removes every synced row and what the mirror knew of them, as the author `import`.
    private func purge() async throws {
        try await writeAsImport { [model] db in
            try StoreMetadata.clearOutbox(in: db)
            for table in model.syncedTables { try db.execute(sql: "DELETE FROM \(table.name.quotedDatabaseIdentifier)") }
            try db.execute(
                sql: """
                    DELETE FROM stratusstore_records;
                    DELETE FROM stratusstore_row_zones; DELETE FROM stratusstore_moved; DELETE FROM stratusstore_shares;
                    DELETE FROM stratusstore_mirror WHERE key = '\(Self.zoneSavedKey)' OR key LIKE '\(Self.pollPositionPrefix)%';
                    """)
        }
        zoneSaved = scope != .private
        engine.state.remove(pendingRecordZoneChanges: engine.state.pendingRecordZoneChanges)
        try await announcePurge()
    }

    /// Removes the rows of a share's zone and what the mirror knew of them, as the author `import`:
    /// the zone is gone (its owner stopped sharing, this participant left).
    func purge(zone zoneID: RecordZone.ID) async throws {
        try await writeAsImport { [model, mapping] db in
            for (tableName, rowID) in try StoreMetadata.rows(inZone: zoneID, in: db) {
                guard let table = model.table(named: tableName) else { continue }
                try mapping.delete(rowID: rowID, from: table, columns: StoreColumns(table, in: db), in: db)
            }
            try StoreMetadata.forgetZone(zoneID, in: db)
        }
        engine.state.remove(pendingRecordZoneChanges: engine.state.pendingRecordZoneChanges.filter { $0.recordID.zoneID == zoneID })
        try await announcePurge()
    }

    private func announcePurge() async throws {
        remoteChanges.yield(StoreRemoteChange(historyToken: try await pool.read { db in
            HistoryToken(transaction: try Int64.fetchOne(db, sql: "SELECT coalesce(max(id), 0) FROM stratusstore_transactions") ?? 0)
        }))
    }

    private func queueAllOutboxEntries() async throws {
        queue(try await placeNewRows(try await pool.read { db in try StoreMetadata.outbox(after: 0, in: db) }), isWholeOutboxAfterMark: true)
    }

    // MARK: - Helpers

    /// Writes as the author `import`, the outbox folded first (merges read it row by row).
    private func writeAsImport<T: Sendable>(_ body: @escaping @Sendable (GRDB.Database) throws -> T) async throws -> T {
        try await pool.write { [capture] db in
            try StoreMetadata.fold(in: db)
            return try capture.writing(as: StratusStore.importAuthor) { try body(db) }
        }
    }

    private func begin(_ kind: StoreEvent.Kind) {
        let event = StoreEvent(kind: kind)
        runningEvents[kind] = event
        events.yield(event)
        capture.checkpointer?.syncing = isSyncing
    }

    /// Whether an import or an export is running.
    private var isSyncing: Bool { runningEvents[.import] != nil || runningEvents[.export] != nil }

    private func end(_ kind: StoreEvent.Kind, error: CloudError? = nil) {
        guard var event = runningEvents.removeValue(forKey: kind) else { return }
        event.endDate = Date()
        event.error = error
        event.succeeded = error == nil
        events.yield(event)
        capture.checkpointer?.syncing = isSyncing
    }

    private static func cloudError(_ error: any Error) -> CloudError {
        error as? CloudError ?? CloudError(.internalError, "\(error)")
    }
}
