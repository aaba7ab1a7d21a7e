import Foundation
import GRDB
import Stratus
import StratusSync

/// The outbox going out: the records to send for the engine's pending changes, read from the rows
/// as they are now, and what the server's answers leave in the outbox and the mirror's tables.
struct StoreExport {
    let layout: MirrorLayout

    /// What went into a send, to settle when the server answers.
    struct Sent: Sendable {
        /// The outbox entry sent; `nil` for the delete of a record a row left when it moved to a share.
        var entry: PendingChange?
        /// The values sent, for a save: the server holds them once it saved the record.
        var values: [String: DatabaseValue]?
    }

    /// What to send for some pending changes.
    struct Batch: Sendable {
        /// What each change the outbox still lists sends.
        var sent: [Stratus.Record.ID: Sent] = [:]
        /// The records of its saves.
        var records: [Stratus.Record.ID: Stratus.Record] = [:]
        /// Changes whose rows cannot be prepared for sending now (an asset file that cannot be
        /// written, say): they wait, the others go.
        var unsendable: [Stratus.Record.ID: CloudError] = [:]
        /// The change tags the deletes of left-behind records are conditional on: an edit another
        /// device made there since fails the delete, to be merged, instead of being erased.
        var deletionChangeTags: [Stratus.Record.ID: String] = [:]
    }

    /// What to send for `changes`, as the outbox and the rows have it now: the outbox entry and
    /// values of each change the outbox still lists, and the records of its saves; the deletes of
    /// records that moved rows left. The entries, the rows of each table and the server's records
    /// are read a statement per hundred changes, not one per change.
    func changesToSend(_ changes: [SyncEngine.PendingRecordZoneChange], in db: GRDB.Database) throws -> Batch {
        var batch = Batch()
        var columns: [String: StoreColumns] = [:]
        let entries = try StoreMetadata.outboxEntries(rowIDs: changes.compactMap { UUID(text: $0.recordID.recordName) }, in: db)
        // The saves whose rows are read, by table.
        var saves: [String: [(recordID: Stratus.Record.ID, entry: PendingChange)]] = [:]
        for change in changes {
            if case .deleteRecord(let recordID) = change, let moved = try StoreMetadata.movedRecord(recordID, in: db) {
                batch.sent[recordID] = Sent()
                batch.deletionChangeTags[recordID] = moved.changeTag
                continue
            }
            guard let rowID = UUID(text: change.recordID.recordName),
                let entry = entries[rowID], layout.change(for: entry) == change,
                let table = layout.model.table(named: entry.table)
            else { continue }
            if entry.operation == .delete, layout.scope != .public {
                batch.sent[change.recordID] = Sent(entry: entry)
                continue
            }
            if columns[table.name] == nil { columns[table.name] = try StoreColumns(table, in: db) }
            if entry.operation == .delete {
                // A deletion in the public database is the save of a record with no values, marked deleted.
                batch.sent[change.recordID] = Sent(entry: entry, values: [:])
            } else {
                saves[table.name, default: []].append((change.recordID, entry))
            }
        }
        for (table, tableSaves) in saves {
            guard let tableColumns = columns[table] else { continue }
            // A row deleted since its change was queued is not sent.
            let values = try layout.mapping.columnValues(
                ofRows: tableSaves.map(\.entry.rowID),
                storedKeys: Dictionary(tableSaves.map { ($0.entry.rowID, $0.entry.storedKey) }) { first, _ in first },
                columns: tableColumns, in: db)
            for (recordID, entry) in tableSaves {
                if let rowValues = values[entry.rowID] { batch.sent[recordID] = Sent(entry: entry, values: rowValues) }
            }
        }
        // The server's records the saves are based on, by table.
        var serverRecords: [String: [UUID: StoreMetadata.ServerRecord]] = [:]
        for (table, items) in Dictionary(grouping: batch.sent.values.compactMap { $0.values == nil ? nil : $0.entry }, by: \.table) {
            serverRecords[table] = try StoreMetadata.serverRecords(table: table, rowIDs: items.map(\.rowID), in: db)
        }
        for (recordID, item) in batch.sent {
            do {
                batch.records[recordID] = try record(for: item, recordID: recordID, columns: columns, serverRecords: serverRecords)
            } catch {
                batch.sent[recordID] = nil
                batch.unsendable[recordID] = CloudError(
                    .internalError, "row \(recordID.recordName) could not be prepared for sending; it waits: \(error)")
            }
        }
        return batch
    }

    /// The record to save for a sent save: based on the server's record this device last knew
    /// (among `serverRecords`, by table and row; so the save sends what changed since, removals
    /// included), holding the row's values.
    private func record(
        for item: Sent, recordID: Stratus.Record.ID, columns: [String: StoreColumns],
        serverRecords: [String: [UUID: StoreMetadata.ServerRecord]]
    ) throws -> Stratus.Record? {
        guard let values = item.values, let entry = item.entry, let table = layout.model.table(named: entry.table),
            let tableColumns = columns[table.name], case .synced(let recordType) = table.configuration
        else { return nil }
        let rowID = entry.rowID
        var record: Stratus.Record
        if let server = serverRecords[table.name]?[rowID] {
            record = try Stratus.Record(
                systemFieldsData: server.systemFields,
                // A BLOB the record holds that this row no longer does is not known here: left
                // out, the row's value goes as changed.
                serverValues: layout.mapping.fields(
                    of: AncestorEncoding.resolved(server.values, against: [values], droppingUnresolved: true), table: table,
                    rowID: rowID, columns: tableColumns))
        } else {
            record = Stratus.Record(recordType: recordType, recordID: recordID)
        }
        let fields = try layout.mapping.fields(of: values, table: table, rowID: rowID, columns: tableColumns)
        for column in tableColumns.fields {
            for key in [column, RecordMapping.assetKey(column)] { record.setFieldValue(fields[key], forKey: key) }
        }
        if layout.scope == .public {
            record.setFieldValue(.int64(entry.operation == .delete ? 1 : 0), forKey: RecordMapping.deletedKey)
        }
        return record
    }

    /// Places each new row that references a row of a share in that share's zone (as a to-do added
    /// to a shared list joins its share): a row the server never held, saved, with no zone yet.
    /// Returns the zones found, by row.
    func placeNewRows(_ unplaced: [PendingChange], in db: GRDB.Database) throws -> [UUID: RecordZone.ID] {
        guard try StoreMetadata.hasRowsInOtherZones(in: db) else { return [:] }
        var placed: [UUID: RecordZone.ID] = [:]
        for entry in unplaced {
            guard let table = layout.model.table(named: entry.table), !table.relationships.isEmpty,
                try StoreMetadata.changeTag(table: table.name, rowID: entry.rowID, in: db) == nil,
                let values = try layout.mapping.columnValues(of: table, rowID: entry.rowID, columns: StoreColumns(table, in: db), in: db)
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

    /// What the server's answer to a send left to do beyond the outbox and the mirror's tables.
    struct Settlement {
        /// Zones the server no longer has: the store's own (saved again) or a share's (its rows go).
        var zonesGone: Set<RecordZone.ID> = []
        /// The last change the server refused for good, to report.
        var refused: CloudError?
        /// Why each row refused for good is held.
        var refusedRows: [UUID: CloudError] = [:]
    }

    /// Keeps what the server saved and deleted of `sent` (what went into the send, by record) and
    /// decides what it refused, with `merger`'s transaction: a conflict merges with the server's
    /// record; a change refused for good (a read-only participant's, one over the user's quota,
    /// one the schema or a newer app version refuses) is kept as refused at `now`, the row as the
    /// user left it and its outbox entry held, until the app resolves it
    /// (``StratusStore/resolveRefusedChange(_:_:)``).
    func settle(
        _ answer: SyncEngine.Event.SentRecordZoneChanges, sent: [Stratus.Record.ID: Sent], merger: inout StoreMerger,
        at now: Date
    ) throws -> Settlement {
        let db = merger.db
        var settlement = Settlement()
        for record in answer.savedRecords {
            guard let item = sent[record.recordID], let entry = item.entry, let values = item.values else { continue }
            try StoreMetadata.confirm(entry, in: db)
            try StoreMetadata.setServerRecord(record, values: values, table: entry.table, rowID: entry.rowID, in: db)
        }
        for recordID in answer.deletedRecordIDs {
            guard let item = sent[recordID] else { continue }
            try settleDelete(recordID, entry: item.entry, in: db)
        }
        for failure in answer.failedRecordSaves {
            let recordID = failure.record.recordID
            guard let entry = sent[recordID]?.entry, let table = layout.model.table(named: entry.table),
                case .synced(let recordType) = table.configuration
            else { continue }
            switch failure.error.code {
            case .serverRecordChanged:
                // Someone else saved first: merge with their record, as a fetch would have.
                if let server = failure.error.serverRecord {
                    try merger.apply(server: server, recordID: server.recordID, recordType: recordType)
                }
            case .unknownItem where layout.scope == .private && recordID.zoneID == layout.defaultZoneID:
                // Deleted on the server since this device last fetched it, or moved into a share by
                // another device of the owner (which deleted the record it left here): the next fetch
                // says which (the deletion, or the row's record in its share, read first), and the
                // change follows it there, never into a new record here. It waits meanwhile.
                break
            case .unknownItem:
                // Deleted on the server since this device last fetched it.
                try merger.apply(server: nil, recordID: recordID, recordType: recordType)
            case .zoneNotFound where recordID.zoneID == layout.defaultZoneID:
                try StoreMetadata.setServerRecord(nil, values: [:], table: table.name, rowID: entry.rowID, in: db)
                merger.outcome.requeued.append(.saveRecord(recordID))
                settlement.zonesGone.insert(recordID.zoneID)
            case .zoneNotFound:
                // A share's zone is gone (sharing stopped): its rows go with it.
                settlement.zonesGone.insert(recordID.zoneID)
            default:
                if !failure.error.keepsChangesPending {
                    try StoreMetadata.recordRefusal(table: table.name, rowID: entry.rowID, error: failure.error, at: now, in: db)
                    settlement.refused = failure.error
                    settlement.refusedRows[entry.rowID] = failure.error
                }
            }
        }
        for (recordID, error) in answer.failedRecordDeletes {
            guard let item = sent[recordID] else { continue }
            if error.code == .unknownItem || error.code == .zoneNotFound {
                // Already gone: what the delete wanted.
                try settleDelete(recordID, entry: item.entry, in: db)
            } else if item.entry == nil, error.code == .serverRecordChanged, let server = error.serverRecord {
                // Another device edited the record a moved row left behind: its edit goes into the
                // row in its share, and the record is deleted again at its new version.
                try merger.apply(server: server, recordID: recordID, recordType: server.recordType)
                merger.outcome.requeued.append(.deleteRecord(recordID))
            } else if !error.keepsChangesPending {
                settlement.refused = error
                if let entry = item.entry {
                    try StoreMetadata.recordRefusal(table: entry.table, rowID: entry.rowID, error: error, at: now, in: db)
                    settlement.refusedRows[entry.rowID] = error
                }
                // A left-behind record the server will not delete stays; the row lives on in its share.
                if item.entry == nil { try StoreMetadata.removeMoved(recordID, in: db) }
            }
        }
        return settlement
    }

    /// Keeps that `recordID` is deleted: the outbox entry sent is settled, or the record a moved row
    /// left is.
    private func settleDelete(_ recordID: Stratus.Record.ID, entry: PendingChange?, in db: GRDB.Database) throws {
        guard let entry else { return try StoreMetadata.removeMoved(recordID, in: db) }
        try StoreMetadata.confirm(entry, in: db)
        try StoreMetadata.setServerRecord(nil, values: [:], table: entry.table, rowID: entry.rowID, in: db)
    }
}
