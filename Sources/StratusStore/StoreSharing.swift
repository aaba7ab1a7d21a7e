import Foundation
import GRDB
import Stratus

/// Rows moving into and out of shares, as the mirror's tables record them.
struct StoreSharing {
    let layout: MirrorLayout

    /// Moves a row of the private database and every row below it (not in a share yet) into the
    /// zone of a new share: each is placed there and queued to be saved, and the records they had
    /// in the zone they left are kept to be deleted. Returns those records and the outbox entries
    /// to send; the signed-in user, the share's owner, may change the zone's rows.
    func move(_ rowID: UUID, into shareZoneID: RecordZone.ID, in db: GRDB.Database) throws -> (
        leftBehind: [Stratus.Record.ID], entries: [PendingChange]
    ) {
        guard let defaultZoneID = layout.defaultZoneID else { return ([], []) }
        try StoreMetadata.fold(in: db)
        var leftBehind: [Stratus.Record.ID] = []
        var entries: [PendingChange] = []
        for (table, row) in try rowsToShare(from: rowID, in: db) {
            if let known = try StoreMetadata.serverRecord(table: table.name, rowID: row, in: db) {
                let old = RecordMapping.recordID(row, zoneID: defaultZoneID)
                try StoreMetadata.addMoved(
                    old, changeTag: try StoreMetadata.changeTag(table: table.name, rowID: row, in: db), values: known.values, in: db)
                leftBehind.append(old)
                try StoreMetadata.setServerRecord(nil, values: [:], table: table.name, rowID: row, in: db)
            }
            try StoreMetadata.setZone(shareZoneID, table: table.name, rowID: row, in: db)
            try StoreMetadata.requeue(.save, table: table.name, rowID: row, in: db)
            if let entry = try StoreMetadata.outboxEntry(rowID: row, in: db) { entries.append(entry) }
        }
        try StoreMetadata.setSharePermission(.readWrite, zone: shareZoneID, in: db)
        return (leftBehind, entries)
    }

    /// A row and every row below it: the rows that reference it through a relationship, and theirs
    /// (a list and its items), leaving out rows already in a share.
    func rowsToShare(from rowID: UUID, in db: GRDB.Database) throws -> [(StoreTable, UUID)] {
        guard let root = try layout.table(holding: rowID, in: db) else { return [] }
        var rows: [(StoreTable, UUID)] = [(root, rowID)]
        var seen: Set<UUID> = [rowID]
        var next = 0
        while next < rows.count {
            let (parent, parentID) = rows[next]
            next += 1
            for table in layout.model.syncedTables {
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

    /// Whether the share a row of the shared database is in lets the signed-in user change it.
    func mayWriteSharedRow(_ rowID: UUID, in db: GRDB.Database) throws -> Bool {
        guard let zoneID = try StoreMetadata.zone(ofRow: rowID, in: db) else { return false }
        return try StoreMetadata.sharePermission(zone: zoneID, in: db) == .readWrite
    }

    /// Who created the server's record of a row, as this device last knew it; `nil` for a row the
    /// server has not saved.
    func creator(ofRow rowID: UUID, in db: GRDB.Database) throws -> Stratus.Record.ID? {
        guard let table = try layout.table(holding: rowID, in: db),
            let known = try StoreMetadata.serverRecord(table: table.name, rowID: rowID, in: db)
        else { return nil }
        return try Stratus.Record(systemFieldsData: known.systemFields).creatorUserRecordID
    }
}
