import Foundation
import GRDB
import Stratus
import StratusSync

/// What a mirror knows for its whole life: the tables it mirrors and how their rows map to records,
/// the database it mirrors to and which zones there hold its rows, and how conflicts are decided.
/// The mirror's parts (``StoreMerger``, ``StoreExport``, ``StoreSharing``, ``PublicDatabasePoller``)
/// each take it with a `GRDB.Database`, so each can be exercised without a server.
struct MirrorLayout: Sendable {
    /// The store's own zone in the private database.
    static let zone = RecordZone(zoneID: RecordZone.ID(zoneName: RecordMapping.zoneName))
    /// The start of the name of each zone the store makes to share rows (Core Data's is
    /// `com.apple.coredata.cloudkit.share.`).
    static let shareZonePrefix = RecordMapping.zoneName + ".share."

    let model: StoreModel
    let mapping: RecordMapping
    /// The database's scope: private, shared or public.
    let scope: Stratus.Database.Scope
    /// The zone of rows not placed elsewhere: the store's zone in the private database; none in the
    /// shared one, where every row lives in the zone of a share.
    let defaultZoneID: RecordZone.ID?
    let tablesByRecordType: [String: StoreTable]
    let mergePolicy: StoreMergePolicy
    let customMerges: [String: StoreCustomMerge]

    init(
        model: StoreModel, mapping: RecordMapping, scope: Stratus.Database.Scope,
        mergePolicy: StoreMergePolicy = .mergeByPropertyObjectTrump, customMerges: [String: StoreCustomMerge] = [:]
    ) {
        self.model = model
        self.mapping = mapping
        self.scope = scope
        self.mergePolicy = mergePolicy
        self.customMerges = customMerges
        defaultZoneID = switch scope {
        case .private: Self.zone.zoneID
        case .shared: nil
        case .public: RecordZone.ID()
        }
        var byType: [String: StoreTable] = [:]
        for table in model.syncedTables {
            if case .synced(let recordType) = table.configuration { byType[recordType] = table }
        }
        tablesByRecordType = byType
    }

    /// The layout of a store mirroring as `configuration` says.
    init(model: StoreModel, configuration: StratusStore.Mirroring) {
        self.init(
            model: model,
            mapping: RecordMapping(assetThreshold: configuration.assetThreshold, assetDirectory: configuration.assetDirectory),
            scope: configuration.database.databaseScope, mergePolicy: configuration.mergePolicy,
            customMerges: configuration.customMerges)
    }

    /// Whether `zoneID` holds rows of the store: its own zone and the zones it shares rows in (in
    /// the private database; other zones there belong to other code), every zone of the shared one.
    func ownsZone(_ zoneID: RecordZone.ID) -> Bool {
        guard let defaultZoneID else { return true }
        return zoneID == defaultZoneID
            || (zoneID.ownerName == defaultZoneID.ownerName && zoneID.zoneName.hasPrefix(Self.shareZonePrefix))
    }

    /// The change the engine sends for an outbox entry, in the zone of its row; `nil` for a row of
    /// the shared database that is in no share.
    func change(for entry: PendingChange) -> SyncEngine.PendingRecordZoneChange? {
        guard let zoneID = entry.zoneID ?? defaultZoneID else { return nil }
        let recordID = RecordMapping.recordID(entry.rowID, zoneID: zoneID)
        // In the public database a deleted row's record stays, marked deleted.
        return entry.operation == .save || scope == .public ? .saveRecord(recordID) : .deleteRecord(recordID)
    }

    /// The row that results from `conflict`: the table's own merge, or the merge policy.
    func resolve(_ conflict: StoreConflict) -> [String: DatabaseValue]? {
        customMerges[conflict.table]?(conflict) ?? mergePolicy.resolve(conflict)
    }

    /// The synced table with a row keyed `rowID`.
    func table(holding rowID: UUID, in db: GRDB.Database) throws -> StoreTable? {
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

    /// The records of the local rows of each zone, and the rows whose changes wait in the outbox.
    func localRecords(in db: GRDB.Database) throws -> (records: [RecordZone.ID: [Stratus.Record]], pendingRows: [UUID]) {
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
        return (records, try StoreMetadata.outbox(after: -1, in: db).map(\.rowID))
    }
}
