import Foundation
import GRDB
import Stratus
import StratusSync

/// What merges changed in the outbox, for the engine.
struct MergeOutcome: Sendable {
    /// Changes the merges queued (the server needs the local side).
    var requeued: [SyncEngine.PendingRecordZoneChange] = []
    /// Changes a merge made unnecessary (the server holds the result).
    var settled: [SyncEngine.PendingRecordZoneChange] = []
    /// Records skipped because no row can hold them (a field of another type, a name not a UUID).
    var unreadable: [StoreMappingError] = []
}

/// Decides rows against the server's records, within one write transaction as the author
/// ``StratusStore/importAuthor`` whose start folded the app's changes into the outbox, so entries
/// are read from the outbox table alone.
struct StoreMerger {
    let layout: MirrorLayout
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

    init(layout: MirrorLayout, db: GRDB.Database) throws {
        self.layout = layout
        self.db = db
        outboxMayHoldEntries = try StoreMetadata.hasFoldedOutboxEntries(in: db)
        rowsMayLiveElsewhere = try StoreMetadata.hasRowsInOtherZones(in: db)
    }

    /// Applies a page of records saved and deleted on the server; a share record sets what the
    /// signed-in user may do in its zone.
    mutating func apply(page records: [Stratus.Record], deletions: [(recordID: Stratus.Record.ID, recordType: String)]) throws {
        try readAhead(of: records)
        for record in records {
            if let share = Share(record) {
                try StoreMetadata.setSharePermission(
                    share.currentUserParticipant?.role == .owner ? .readWrite : share.currentUserParticipant?.permission,
                    zone: record.recordID.zoneID, in: db)
                continue
            }
            try applyReadable(server: record, recordID: record.recordID, recordType: record.recordType)
        }
        for deletion in deletions {
            try applyReadable(server: nil, recordID: deletion.recordID, recordType: deletion.recordType)
        }
    }

    /// Reads the change tags and stored keys of the rows `records` stand for, a few statements
    /// per table, before they are applied.
    private mutating func readAhead(of records: [Stratus.Record]) throws {
        var rows: [String: (table: StoreTable, rows: [(rowID: UUID, changeTag: String?)])] = [:]
        for record in records where layout.ownsZone(record.recordID.zoneID) {
            guard let table = layout.tablesByRecordType[record.recordType], let rowID = UUID(text: record.recordID.recordName)
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
            try layout.mapping.delete(rowID: rowID, from: table, columns: columns, in: db)
            knownKeys[table.name]?.updateValue(nil, forKey: rowID)
            return
        }
        let storedKey: DatabaseValue?
        if let known = knownKeys[table.name]?[rowID] {
            storedKey = known
        } else {
            storedKey = try columns.storedKey(of: rowID, in: db)
        }
        try layout.mapping.write(values, rowID: rowID, storedKey: storedKey, to: table, columns: columns, in: db)
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
    private mutating func applyReadable(server record: Stratus.Record?, recordID: Stratus.Record.ID, recordType: String) throws {
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
        guard layout.ownsZone(recordID.zoneID), let table = layout.tablesByRecordType[recordType],
            let rowID = UUID(text: recordID.recordName)
        else { return }
        // The delete of the record a row left when it moved into a share (from another device)
        // is not the row's.
        if record == nil, let zoneID = try StoreMetadata.zone(ofRow: rowID, in: db) ?? layout.defaultZoneID,
            zoneID != recordID.zoneID
        {
            return
        }
        if let record {
            // That record itself, fetched before its deletion went out: the row lives in its share
            // now. An edit another device made there, not having heard of the move, is merged
            // into the row in its share rather than lost.
            if let moved = try StoreMetadata.movedRecord(recordID, in: db) {
                if record.recordChangeTag != moved.changeTag {
                    try mergeEditLeftBehind(record, moved: moved, table: table, rowID: rowID)
                }
                return
            }
            // A record of the row in a zone the row no longer lives in (the left-behind record the
            // server would not delete, read again from the start) does not take the row back.
            if let rowZone = try StoreMetadata.zone(ofRow: rowID, in: db), rowZone != recordID.zoneID { return }
        }
        // A record this device already holds at this version (its own save, coming back in the
        // feed) changes nothing.
        if let tag = record?.recordChangeTag, try changeTag(table: table.name, rowID: rowID) == tag {
            return
        }
        let tableColumns = try columns(of: table)
        // A record of the public database marked deleted is a deletion; its system fields are
        // kept, to base a later save of the same row on.
        let live = record.flatMap { RecordMapping.isMarkedDeleted($0) ? nil : $0 }
        let server = try live.map { try layout.mapping.columnValues(of: $0, table: table, columns: tableColumns) }
        var result = server
        if let entry = try outboxEntry(rowID: rowID) {
            let known = try StoreMetadata.serverRecord(table: table.name, rowID: rowID, in: db)
            let local = entry.operation == .delete
                ? nil : try layout.mapping.columnValues(of: table, rowID: rowID, columns: tableColumns, in: db)
            let ancestor = known.map { AncestorEncoding.resolved($0.values, against: [server, local]) }
            if server == ancestor {
                // The server's record is the one this device last agreed on (its own save coming
                // back, with a new tag, or another device's save of the same values): the local
                // change stands, based on it, and is queued again, since a save the server
                // refused for its old tag is no longer pending in the engine.
                try remember(record, values: server, table: table, rowID: rowID)
                outcome.requeued.append(entry.operation == .save ? .saveRecord(recordID) : .deleteRecord(recordID))
                return
            }
            let conflict = StoreConflict(table: table.name, rowID: rowID, ancestor: ancestor, local: local, server: server)
            result = layout.resolve(conflict)
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

    /// Puts the row of `recordID` back as the server last had it, when the app chose so for a
    /// change the server refused (``StratusStore/resolveRefusedChange(_:_:)``): the server's
    /// values, or no row when the server has none; its outbox entry goes.
    /// `server` is the server's record when the app fetched it, because this device no longer
    /// holds all of the version it knew (``needsServerRecordToRevert(table:rowID:)``); `nil`: the
    /// version it knew, or none when `fetched` says the server has none.
    mutating func revert(
        _ recordID: Stratus.Record.ID, table: StoreTable, rowID: UUID, fetched: (server: Stratus.Record?, done: Bool) = (nil, false)
    ) throws {
        let tableColumns = try columns(of: table)
        if fetched.done {
            let values = try fetched.server.map { try layout.mapping.columnValues(of: $0, table: table, columns: tableColumns) }
            try write(values, table: table, rowID: rowID, columns: tableColumns)
            try remember(fetched.server, values: values, table: table, rowID: rowID)
        } else {
            let known = try StoreMetadata.serverRecord(table: table.name, rowID: rowID, in: db)
            let local = try layout.mapping.columnValues(of: table, rowID: rowID, columns: tableColumns, in: db)
            try write(known.map { AncestorEncoding.resolved($0.values, against: [local]) }, table: table, rowID: rowID, columns: tableColumns)
        }
        if let entry = try outboxEntry(rowID: rowID) {
            try StoreMetadata.dropOutboxEntry(table: table.name, rowID: rowID, in: db)
            outcome.settled.append(entry.operation == .save ? .saveRecord(recordID) : .deleteRecord(recordID))
        }
    }

    /// Whether going back to the version of the row this device knew needs the server's record: a
    /// large BLOB it knew by its digest alone, which the row no longer holds.
    func needsServerRecordToRevert(table: StoreTable, rowID: UUID) throws -> Bool {
        guard let known = try StoreMetadata.serverRecord(table: table.name, rowID: rowID, in: db) else { return false }
        let local = try layout.mapping.columnValues(of: table, rowID: rowID, columns: try StoreColumns(table, in: db), in: db)
        return AncestorEncoding.holdsDigests(AncestorEncoding.resolved(known.values, against: [local]))
    }

    /// Merges into a moved row, in its share, the edit another device made to the record the row
    /// left behind: the columns it changed since this device last knew that record, by the merge
    /// policy against the row as it is here. The row's save to its share is queued again, and the
    /// left-behind record is known at its new version (its deletion still goes out).
    private mutating func mergeEditLeftBehind(
        _ record: Stratus.Record, moved: StoreMetadata.MovedRecord, table: StoreTable, rowID: UUID
    ) throws {
        let tableColumns = try columns(of: table)
        let edited = try layout.mapping.columnValues(of: record, table: table, columns: tableColumns)
        let local = try layout.mapping.columnValues(of: table, rowID: rowID, columns: tableColumns, in: db)
        try StoreMetadata.addMoved(record.recordID, changeTag: record.recordChangeTag, values: edited, in: db)
        // A row deleted here since stays deleted: its delete goes to its share.
        guard let local else { return }
        let ancestor = AncestorEncoding.resolved(moved.values, against: [local, edited])
        let merged = layout.resolve(StoreConflict(table: table.name, rowID: rowID, ancestor: ancestor, local: local, server: edited))
        guard let merged, merged != local else { return }
        try write(merged, table: table, rowID: rowID, columns: tableColumns)
        try StoreMetadata.requeue(.save, table: table.name, rowID: rowID, in: db)
        outboxMayHoldEntries = true
        if let zoneID = try StoreMetadata.zone(ofRow: rowID, in: db) {
            outcome.requeued.append(.saveRecord(RecordMapping.recordID(rowID, zoneID: zoneID)))
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
        let elsewhere = zoneID == layout.defaultZoneID ? nil : zoneID
        guard elsewhere != nil || rowsMayLiveElsewhere else { return }
        try StoreMetadata.setZone(elsewhere, table: table.name, rowID: rowID, in: db)
        if elsewhere != nil { rowsMayLiveElsewhere = true }
    }
}
