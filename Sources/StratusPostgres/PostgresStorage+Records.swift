import Foundation
import Logging
import NIOCore
import PostgresNIO
import StratusModel
public import StratusStorage

/// The ``RecordStorage`` role (the type conforms through ``StratusStorage``).
extension PostgresStorage {
    // MARK: Databases and zones

    /// The database's storage identifier, or `nil` before its first write.
    func existingDatabase(_ connection: PostgresConnection, _ locator: DatabaseLocator) async throws -> Int64? {
        try await connection.run(
            """
            SELECT id FROM databases WHERE container_id = \(locator.container)
                AND environment = \(locator.environment.rawValue) AND scope = \(locator.scope.rawValue)
                AND owner = \(locator.owner)
            """, logger: logger
        ).decode(Int64.self).collect().first
    }

    /// The database's storage identifier, creating the database and its default zone on first use.
    /// Two instances creating it at once are ordered by the unique key: one inserts, the other waits
    /// for it and finds the row.
    func ensureDatabase(_ connection: PostgresConnection, _ locator: DatabaseLocator) async throws -> Int64 {
        if let id = try await existingDatabase(connection, locator) { return id }
        let inserted = try await connection.run(
            """
            INSERT INTO databases (container_id, environment, scope, owner)
            VALUES (\(locator.container), \(locator.environment.rawValue), \(locator.scope.rawValue), \(locator.owner))
            ON CONFLICT (container_id, environment, scope, owner) DO NOTHING RETURNING id
            """, logger: logger
        ).decode(Int64.self).collect().first
        guard let id = inserted else { return try await existingDatabase(connection, locator)! }
        try await lockSchema(connection, container: locator.container, environment: locator.environment, shared: true)
        try await connection.run(
            """
            INSERT INTO zones (database_id, name, change_seq, created_ms, changed_ms)
            VALUES (\(id), \(ZoneID.defaultZoneName), 0, 0, 0)
            """, logger: logger)
        return id
    }

    /// Runs `body` with the database's identifier: on a plain connection when the database exists,
    /// otherwise in a transaction that creates it first.
    func withDatabase<T: Sendable>(
        _ locator: DatabaseLocator, _ body: (PostgresConnection, Int64) async throws -> T
    ) async throws -> T {
        let existing = try await read { connection -> T? in
            guard let id = try await existingDatabase(connection, locator) else { return nil }
            return try await body(connection, id)
        }
        if let existing { return existing }
        return try await transaction { connection in try await body(connection, try await ensureDatabase(connection, locator)) }
    }

    static let zoneColumns = "id, name, seq, purged_seq, deleted"

    static func zoneStates(_ rows: PostgresRowSequence) async throws -> [ZoneState] {
        try await rows.decode((Int64, String, Int64, Int64, Bool).self).collect().map {
            ZoneState(name: $0.1, id: $0.0, sequence: $0.2, purgedSequence: $0.3, deleted: $0.4)
        }
    }

    /// A live zone by name; with `lock`, its row stays locked until the transaction ends, which is
    /// how writers of a zone take turns.
    func liveZone(
        _ connection: PostgresConnection, _ databaseID: Int64, _ name: String, lock: Bool = false
    ) async throws -> ZoneState? {
        try await Self.zoneStates(
            connection.run(
                PostgresQuery(
                    unsafeSQL: """
                        SELECT \(Self.zoneColumns) FROM zones WHERE database_id = $1 AND name = $2 AND NOT deleted
                        \(lock ? "FOR UPDATE" : "")
                        """, binds: Self.binds(databaseID, name)), logger: logger)
        ).first
    }

    func requireZone(
        _ connection: PostgresConnection, _ databaseID: Int64, _ name: String, lock: Bool = false
    ) async throws -> ZoneState {
        guard let zone = try await liveZone(connection, databaseID, name, lock: lock) else {
            throw StratusError(.zoneNotFound, "zone '\(name)' does not exist")
        }
        return zone
    }

    /// Takes the database's next sequence number, which orders zone changes; the row stays locked
    /// until commit, so zone changes commit in sequence order.
    func nextDatabaseSequence(_ connection: PostgresConnection, _ databaseID: Int64) async throws -> Int64 {
        try await connection.run(
            "UPDATE databases SET seq = seq + 1 WHERE id = \(databaseID) RETURNING seq", logger: logger
        ).decode(Int64.self).collect()[0]
    }

    static func binds(_ values: any PostgresDynamicTypeEncodable...) -> PostgresBindings {
        var binds = PostgresBindings(capacity: values.count)
        for value in values { binds.append(value) }
        return binds
    }

    public func zones(in database: DatabaseLocator) async throws -> [ZoneState] {
        try await withDatabase(database) { connection, databaseID in
            try await Self.zoneStates(
                connection.run(
                    """
                    SELECT \(unescaped: Self.zoneColumns) FROM zones WHERE database_id = \(databaseID) AND NOT deleted
                    ORDER BY name != \(ZoneID.defaultZoneName), name
                    """, logger: logger))
        }
    }

    public func zone(named name: String, in database: DatabaseLocator) async throws -> ZoneState? {
        try await withDatabase(database) { connection, databaseID in try await liveZone(connection, databaseID, name) }
    }

    public func createZone(
        named name: String, in database: DatabaseLocator, timestamp: Int64
    ) async throws -> (zone: ZoneState, created: Bool) {
        try await transaction { connection in
            let databaseID = try await ensureDatabase(connection, database)
            if let zone = try await liveZone(connection, databaseID, name) { return (zone, false) }
            try await lockSchema(connection, container: database.container, environment: database.environment, shared: true)
            // Taking the database's sequence locks its row: a concurrent creation of the same name
            // waits here, then finds the zone.
            let changeSequence = try await nextDatabaseSequence(connection, databaseID)
            if let zone = try await liveZone(connection, databaseID, name) { return (zone, false) }
            let zone = try await Self.zoneStates(
                connection.run(
                    """
                    INSERT INTO zones (database_id, name, change_seq, created_ms, changed_ms)
                    VALUES (\(databaseID), \(name), \(changeSequence), \(timestamp), \(timestamp))
                    RETURNING \(unescaped: Self.zoneColumns)
                    """, logger: logger))[0]
            return (zone, true)
        }
    }

    public func deleteZone(named name: String, in database: DatabaseLocator, timestamp: Int64) async throws -> Bool {
        precondition(name != ZoneID.defaultZoneName, "the default zone cannot be deleted")
        return try await transaction { connection in
            let databaseID = try await ensureDatabase(connection, database)
            guard let zone = try await liveZone(connection, databaseID, name, lock: true) else { return false }
            try await deleteContents(ofZones: "$1", binds: Self.binds(zone.id), connection)
            let changeSequence = try await nextDatabaseSequence(connection, databaseID)
            try await connection.run(
                """
                UPDATE zones SET deleted = true, change_seq = \(changeSequence), changed_ms = \(timestamp)
                WHERE id = \(zone.id)
                """, logger: logger)
            return true
        }
    }

    /// The tables that hold what is in a zone, by `zone_id`: its records with their query index,
    /// reference, asset and share rows, and what each account holds in it.
    static let zoneContentTables = [
        "records", "record_references", "record_index", "record_assets", "shares", "share_participants",
        "account_usage",
    ]

    /// Deletes what is in the zones whose IDs `zones` (SQL taking `binds`) selects: their records and
    /// every row that goes with them (``zoneContentTables``). Assets the records held are then held
    /// by no record of theirs, and ``collectAssets(registeredBefore:)`` collects those no other
    /// record holds.
    func deleteContents(ofZones zones: String, binds: PostgresBindings, _ connection: PostgresConnection) async throws {
        for table in Self.zoneContentTables {
            try await connection.run(
                PostgresQuery(unsafeSQL: "DELETE FROM \(table) WHERE zone_id IN (\(zones))", binds: binds), logger: logger)
        }
    }

    // MARK: Records

    static let recordColumns = """
        name, record_type, change_tag, fields, created_ms, created_by, created_device, modified_ms, modified_by,
        modified_device, seq, deleted
        """

    /// Decodes rows of ``recordColumns``.
    static func storedRecords(_ rows: PostgresRowSequence) async throws -> [StoredRecord] {
        var records: [StoredRecord] = []
        for try await row in rows {
            records.append(
                storedRecord(
                    try row.decode(
                        (String, String, String, ByteBuffer, Int64, String, String?, Int64, String, String?, Int64, Bool)
                            .self)))
        }
        return records
    }

    /// A record from the values of ``recordColumns``.
    static func storedRecord(
        _ columns: (String, String, String, ByteBuffer, Int64, String, String?, Int64, String, String?, Int64, Bool)
    ) -> StoredRecord {
        let (name, type, tag, fields, createdAt, createdBy, createdDevice, modifiedAt, modifiedBy, modifiedDevice,
             sequence, deleted) = columns
        return StoredRecord(
            name: name, recordType: type, changeTag: tag, fieldsJSON: Array(fields.readableBytesView),
            created: RecordStamp(timestamp: createdAt, userRecordName: createdBy, deviceID: createdDevice),
            modified: RecordStamp(timestamp: modifiedAt, userRecordName: modifiedBy, deviceID: modifiedDevice),
            deleted: deleted, sequence: sequence)
    }

    /// The stored rows (tombstones included) of `names` in a zone.
    func fetchRecords(
        _ connection: PostgresConnection, zoneID: Int64, names: [String]
    ) async throws -> [String: StoredRecord] {
        guard !names.isEmpty else { return [:] }
        let records = try await Self.storedRecords(
            connection.run(
                """
                SELECT \(unescaped: Self.recordColumns) FROM records WHERE zone_id = \(zoneID) AND name = ANY(\(names))
                """, logger: logger))
        return Dictionary(records.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
    }

    /// A zone locked for a write transaction.
    struct LockedZone {
        let databaseID: Int64
        let zone: ZoneState
        /// The version of the environment's schema, `nil` before the first.
        let schemaVersion: Int64?
        /// The stored rows (tombstones included) of the names asked for, read after the lock was
        /// granted; `nil` when the lock came the slow way and they are still to be read.
        let records: [String: StoredRecord]?
    }

    /// Locks a zone for a write transaction and reads the records `names` as the writer before left
    /// them: one round trip when the database exists (`stratus_lock_zone_for_writing`, migration 7).
    func lockZoneForWriting(
        _ connection: PostgresConnection, _ zone: String, in database: DatabaseLocator, reading names: [String]
    ) async throws -> LockedZone {
        var locked: LockedZone?
        var records: [String: StoredRecord] = [:]
        let rows = try await connection.run(
            """
            SELECT * FROM stratus_lock_zone_for_writing(\(database.container), \(database.environment.rawValue),
                \(database.scope.rawValue), \(database.owner), \(zone), \(names))
            """, logger: logger)
        for try await row in rows {
            let (zoneID, sequence, purgedSequence, databaseID, schemaVersion, name, type, tag, fields, createdAt, createdBy,
                 createdDevice, modifiedAt, modifiedBy, modifiedDevice, recordSequence, deleted) = try row.decode(
                    (Int64, Int64, Int64, Int64, Int64?, String?, String?, String?, ByteBuffer?, Int64?, String?, String?,
                     Int64?, String?, String?, Int64?, Bool?).self)
            locked = LockedZone(
                databaseID: databaseID,
                zone: ZoneState(name: zone, id: zoneID, sequence: sequence, purgedSequence: purgedSequence, deleted: false),
                schemaVersion: schemaVersion, records: nil)
            // A row without a record stands for the zone alone: none of the names is stored.
            if let name, let type, let tag, let fields, let createdAt, let createdBy, let modifiedAt, let modifiedBy,
                let recordSequence, let deleted
            {
                records[name] = Self.storedRecord(
                    (name, type, tag, fields, createdAt, createdBy, createdDevice, modifiedAt, modifiedBy, modifiedDevice,
                     recordSequence, deleted))
            }
        }
        if let locked {
            return LockedZone(
                databaseID: locked.databaseID, zone: locked.zone, schemaVersion: locked.schemaVersion, records: records)
        }
        // The database's first write (its default zone is made now), or no such zone.
        let databaseID = try await ensureDatabase(connection, database)
        let state = try await requireZone(connection, databaseID, zone, lock: true)
        let version = try await connection.run(
            """
            SELECT version FROM schemas
            WHERE container_id = \(database.container) AND environment = \(database.environment.rawValue)
            """, logger: logger
        ).decode(Int64.self).collect().first
        return LockedZone(databaseID: databaseID, zone: state, schemaVersion: version, records: nil)
    }

    /// The writes of one zone that commit together (``CommitGroups``).
    struct ZoneKey: Hashable, Sendable {
        let database: DatabaseLocator
        let zone: String
    }

    /// One `records/modify` call, waiting for its zone's next group.
    struct ZoneWrite: Sendable {
        let writes: [RecordWrite]
        let atomic: Bool
        let context: WriteContext
    }

    public func modifyRecords(
        _ writes: [RecordWrite], zone: String, in database: DatabaseLocator, atomic: Bool, context: WriteContext
    ) async throws -> ModifyRecordsOutcome {
        // Concurrent writes to one zone through this instance commit together: one lock, one
        // statement, one commit for the group.
        try await zoneWrites.submit(
            ZoneWrite(writes: writes, atomic: atomic, context: context), to: ZoneKey(database: database, zone: zone)
        ) { [self] key, group in
            do {
                return try await transaction { connection in
                    try await apply(group, to: key, connection).map { .success($0) }
                }
            } catch {
                // One write's failure fails the group's transaction: each runs again alone, so that
                // only those that fail alone fail.
                guard group.count > 1 else { return [.failure(error)] }
                var results: [Result<ModifyRecordsOutcome, any Error>] = []
                for write in group {
                    do {
                        results.append(.success(try await transaction { try await apply([write], to: key, $0)[0] }))
                    } catch {
                        results.append(.failure(error))
                    }
                }
                return results
            }
        }
    }

    /// Applies a group of writes to one zone in the caller's transaction, in order, each as the
    /// write executor decides it, and answers each one's outcome.
    ///
    /// The zone is locked and the group's records read in one round trip. Each write starts from
    /// the rows the ones before it left. Their rows are buffered and sent with the zone's new
    /// counters in one statement at the end; a write whose executor reads midway sends the buffer
    /// first, so the read sees every earlier write, and an atomic one takes a savepoint before its
    /// own rows reach the database, so that its failure rolls back only them.
    private func apply(
        _ group: [ZoneWrite], to key: ZoneKey, _ connection: PostgresConnection
    ) async throws -> [ModifyRecordsOutcome] {
        let database = key.database
        let locked = try await lockZoneForWriting(
            connection, key.zone, in: database, reading: Array(Set(group.flatMap { $0.writes.map(\.recordName) })))
        let zoneID = locked.zone.id
        let loaded = try await loadSchema(
            connection, container: database.container, environment: database.environment, version: locked.schemaVersion)
        var schema = loaded.schema
        var grownSchema: Schema?
        var zone = locked.zone
        var changedAt = 0 as Int64
        // The group's records as the writes before left them, while every row is known here.
        var known = locked.records
        // Rows of the writes applied, not yet sent.
        var pending = RecordBatch(zoneID: zoneID)
        // What the group's committed writes changed of each account's holdings, sent at the end.
        var usageChanges: [String: StorageUsage] = [:]
        var outcomes: [ModifyRecordsOutcome] = []
        for write in group {
            var executor = RecordWriteExecutor(
                writes: write.writes, zone: zone, database: database, schema: schema, atomic: write.atomic,
                context: write.context)
            var batch = RecordBatch(zoneID: zoneID)
            var written: [StoredRecord] = []
            var sentPending = false
            // Sends every row so far, taking the write's savepoint before its own rows when it is atomic.
            func sendRows() async throws {
                if !sentPending {
                    try await pending.flush(connection, logger: logger)
                    if write.atomic { try await connection.run("SAVEPOINT write", logger: logger) }
                    sentPending = true
                }
                try await batch.flush(connection, logger: logger)
            }
            var step = executor.start()
            if let known, case .fetchRecords(let names) = step {
                // The first step reads the records written, which the lock read.
                step = executor.resume(.records(known.filter { names.contains($0.key) }))
            }
            steps: while true {
                switch step {
                case .fetchRecords(let names):
                    try await sendRows()
                    step = executor.resume(.records(try await fetchRecords(connection, zoneID: zoneID, names: names)))
                case .checkAssets(let record, let checksums, let uploaded):
                    try await sendRows()
                    step = executor.resume(
                        .knownAssets(
                            try await knownAssets(
                                connection, zoneID: zoneID, record: record, checksums: checksums, uploaded: uploaded)))
                case .findReferrers(let target, let action):
                    try await sendRows()
                    step = executor.resume(.names(try await referrers(connection, zoneID: zoneID, target: target, action: action)))
                case .countReferrers(let target, let action, let source):
                    try await sendRows()
                    let count = try await connection.run(
                        """
                        SELECT count(*) FROM record_references
                        WHERE zone_id = \(zoneID) AND target = \(target) AND action = \(action.rawValue)
                            AND source != \(source)
                        """, logger: logger
                    ).decode(Int64.self).collect()[0]
                    step = executor.resume(.count(Int(count)))
                case .readUsage(let account):
                    // The group's writes before this one changed holdings that are not sent yet.
                    let stored = try await usage(connection, container: database.container, account: account)
                    step = executor.resume(.usage(stored + (usageChanges[account] ?? .zero)))
                case .write(let rows):
                    if batch.holds(anyOf: rows) { try await sendRows() }
                    batch.add(rows)
                    written += rows.records.map(\.record)
                    step = executor.resume(.written)
                case .finish(let completion):
                    outcomes.append(completion.outcome)
                    guard completion.commits else {
                        // A failed atomic batch: its rows go, sent or not.
                        if sentPending { try await connection.run("ROLLBACK TO SAVEPOINT write", logger: logger) }
                        break steps
                    }
                    if pending.holds(anyOf: batch) { try await pending.flush(connection, logger: logger) }
                    pending.append(batch)
                    if let grown = completion.grownSchema {
                        schema = grown
                        grownSchema = grown
                    }
                    if let sequence = completion.zoneSequence {
                        zone.sequence = sequence
                        changedAt = max(changedAt, write.context.timestamp)
                    }
                    for (account, change) in completion.usageChanges { usageChanges[account, default: .zero] += change }
                    for record in written { known?[record.name] = record }
                    break steps
                }
            }
        }
        if let grownSchema {
            // Writers of other zones may have grown the schema since it was read: then this group
            // runs again against theirs, so no type or field is lost or contradicted.
            try await lockSchema(connection, container: database.container, environment: database.environment)
            let latest = try await loadSchema(connection, container: database.container, environment: database.environment)
            guard latest.version == loaded.version else { throw RetryTransaction() }
            try await storeSchema(connection, grownSchema, container: database.container, environment: database.environment)
        }
        // The default zone has no place in the database feed, so it does not advance it.
        try await pending.flush(
            connection,
            advancing: zone.sequence > locked.zone.sequence
                ? RecordBatch.ZoneChange(
                    sequence: zone.sequence, databaseID: locked.databaseID,
                    advancesDatabase: key.zone != ZoneID.defaultZoneName, timestamp: changedAt)
                : nil,
            logger: logger)
        try await addUsage(connection, usageChanges, zoneID: zoneID)
        return outcomes
    }

    /// Which of `checksums` a record may hold: the uploaded ones the store has, the others its
    /// previous version held.
    ///
    /// The uploaded ones' rows stay share-locked until the save commits, and asset collection skips
    /// locked rows (``collectAssets(registeredBefore:)``): it cannot delete what a committing save
    /// just found; if it locked them first, this waits, and finds them deleted.
    func knownAssets(
        _ connection: PostgresConnection, zoneID: Int64, record: String, checksums: [String], uploaded: Set<String>
    ) async throws -> Set<String> {
        let held = checksums.filter { !uploaded.contains($0) }
        return Set(
            try await connection.run(
                """
                WITH stored AS (SELECT checksum FROM assets WHERE checksum = ANY(\(uploaded.sorted())) FOR SHARE)
                SELECT checksum FROM stored
                UNION ALL
                SELECT checksum FROM record_assets
                WHERE zone_id = \(zoneID) AND name = \(record) AND checksum = ANY(\(held))
                """, logger: logger
            ).decode(String.self).collect())
    }

    func referrers(
        _ connection: PostgresConnection, zoneID: Int64, target: String, action: ReferenceAction
    ) async throws -> [String] {
        try await connection.run(
            """
            SELECT source FROM record_references
            WHERE zone_id = \(zoneID) AND target = \(target) AND action = \(action.rawValue)
            """, logger: logger
        ).decode(String.self).collect()
    }

    public func lookupRecords(names: [String], zone: String, in database: DatabaseLocator) async throws
        -> [StoredRecord?]
    {
        try await withDatabase(database) { connection, databaseID in
            let zoneState = try await requireZone(connection, databaseID, zone)
            let records = try await fetchRecords(connection, zoneID: zoneState.id, names: names)
            return names.map { records[$0].flatMap { $0.deleted ? nil : $0 } }
        }
    }

    public func recordChanges(
        zone: String, in database: DatabaseLocator, after position: ChangePosition?, limit: Int,
        recordTypes: Set<String>?
    ) async throws -> RecordChangesPage {
        try await withDatabase(database) { connection, databaseID in
            let zoneState = try await requireZone(connection, databaseID, zone)
            let records = try await Self.storedRecords(
                changeFeedRows(
                    Self.recordColumns, connection, zone: zoneState, after: position, recordTypes: recordTypes,
                    limit: limit + 1))
            try await requireHorizon(
                connection, "SELECT purged_seq FROM zones WHERE id = \(zoneState.id)", after: position,
                scopeID: zoneState.id, sequence: zoneState.sequence, what: "zone '\(zone)'")
            return RecordChangesPage(zone: zoneState, fetched: records, limit: limit)
        }
    }

    public func recordChangePageEnds(
        zone: String, in database: DatabaseLocator, after position: ChangePosition?, limit: Int,
        recordTypes: Set<String>?, count: Int
    ) async throws -> [ChangePosition] {
        try await withDatabase(database) { connection, databaseID in
            let zoneState = try await requireZone(connection, databaseID, zone)
            let sequences = try await changeFeedRows(
                "seq", connection, zone: zoneState, after: position, recordTypes: recordTypes, limit: count * limit + 1
            ).decode(Int64.self).collect()
            try await requireHorizon(
                connection, "SELECT purged_seq FROM zones WHERE id = \(zoneState.id)", after: position,
                scopeID: zoneState.id, sequence: zoneState.sequence, what: "zone '\(zone)'")
            return RecordChangesPage.ends(ofSequences: sequences, limit: limit, scopeID: zoneState.id)
        }
    }

    /// A zone's changes after `position`, in change order, at most `limit` rows of `columns`;
    /// deletions and records of `recordTypes` only when given.
    private func changeFeedRows(
        _ columns: String, _ connection: PostgresConnection, zone: ZoneState, after position: ChangePosition?,
        recordTypes: Set<String>?, limit: Int
    ) async throws -> PostgresRowSequence {
        let start = try ChangePosition.start(
            after: position, scopeID: zone.id, sequence: zone.sequence, purged: zone.purgedSequence,
            what: "zone '\(zone.name)'")
        // Only changes up to the zone's sequence as read with it: a later commit may already have
        // moved records past it, and they come with the next read.
        let types = recordTypes.map { Array($0) }
        return try await connection.run(
            """
            SELECT \(unescaped: columns) FROM records
            WHERE zone_id = \(zone.id) AND seq > \(start) AND seq <= \(zone.sequence)
                AND (\(types == nil) OR deleted OR record_type = ANY(\(types ?? [])))
            ORDER BY seq LIMIT \(limit)
            """, logger: logger)
    }

    /// Checks, after a feed's rows were read, that no tombstone after `position` was purged before
    /// they were: each statement of a read sees its own snapshot, so a purge may commit between the
    /// first read of the horizon (`horizon` reads it again) and the rows', which then miss
    /// deletions; the token is then as expired as if the purge had come first.
    private func requireHorizon(
        _ connection: PostgresConnection, _ horizon: PostgresQuery, after position: ChangePosition?, scopeID: Int64,
        sequence: Int64, what: String
    ) async throws {
        guard let position, position.sequence > 0 else { return }
        // No row: the zone itself was purged, which leaves no tombstone of it either.
        let purged = try await connection.run(horizon, logger: logger).decode(Int64.self).collect().first ?? .max
        _ = try ChangePosition.start(after: position, scopeID: scopeID, sequence: sequence, purged: purged, what: what)
    }

    public func databaseChanges(
        in database: DatabaseLocator, after position: ChangePosition?, limit: Int
    ) async throws -> DatabaseChangesPage {
        try await withDatabase(database) { connection, databaseID in
            let (sequence, purged) = try await connection.run(
                "SELECT seq, purged_seq FROM databases WHERE id = \(databaseID)", logger: logger
            ).decode((Int64, Int64).self).collect()[0]
            let start = try ChangePosition.start(
                after: position, scopeID: databaseID, sequence: sequence, purged: purged, what: "database")
            let rows = try await connection.run(
                """
                SELECT \(unescaped: Self.zoneColumns), change_seq FROM zones
                WHERE database_id = \(databaseID) AND change_seq > \(start) AND change_seq <= \(sequence)
                    AND name != \(ZoneID.defaultZoneName)
                ORDER BY change_seq LIMIT \(limit + 1)
                """, logger: logger
            ).decode((Int64, String, Int64, Int64, Bool, Int64).self).collect()
            try await requireHorizon(
                connection, "SELECT purged_seq FROM databases WHERE id = \(databaseID)", after: position,
                scopeID: databaseID, sequence: sequence, what: "database")
            let moreComing = rows.count > limit
            let page = rows.prefix(limit)
            let end = moreComing ? page.last!.5 : sequence
            return DatabaseChangesPage(
                zones: page.map { ZoneState(name: $0.1, id: $0.0, sequence: $0.2, purgedSequence: $0.3, deleted: $0.4) },
                position: ChangePosition(scopeID: databaseID, sequence: end), moreComing: moreComing)
        }
    }
}
