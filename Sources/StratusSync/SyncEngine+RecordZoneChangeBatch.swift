public import Stratus

extension SyncEngine {
    /// The records one send request saves and deletes (CloudKit's `CKSyncEngine.RecordZoneChangeBatch`).
    public struct RecordZoneChangeBatch: Sendable {
        /// The records to save, with the change tags they were last saved or fetched with.
        public var recordsToSave: [Record]
        /// The records to delete.
        public var recordIDsToDelete: [Record.ID]
        /// Whether each zone's records succeed or fail together; when one fails, the others of its
        /// zone fail with `batchRequestFailed`. Off by default.
        public var atomicByZone: Bool
        /// Change tags for some records to delete: each is deleted only if the server's record
        /// still has its tag, and otherwise fails with `serverRecordChanged` carrying the server's
        /// record (beyond CloudKit, which deletes by ID whatever the record holds). Empty by default.
        public var deletionChangeTags: [Record.ID: String] = [:]

        /// A batch of these records.
        public init(recordsToSave: [Record] = [], recordIDsToDelete: [Record.ID] = [], atomicByZone: Bool = false) {
            self.recordsToSave = recordsToSave
            self.recordIDsToDelete = recordIDsToDelete
            self.atomicByZone = atomicByZone
        }

        /// A batch of the first `pendingChanges`, in order, that fit one request within the server's
        /// limits (operations per request, and bytes); `nil` when none does. `recordProvider` gives
        /// the record to save for each `saveRecord`; a change whose record it does not give (`nil`)
        /// is skipped, and stays pending. Changes of records in the request on the way to the server
        /// are skipped too: they go in a later batch, once their answer is kept.
        public init?(
            pendingChanges: [PendingRecordZoneChange], recordProvider: @Sendable (Record.ID) async -> Record?
        ) async {
            let rules = SyncEngine.batchRules
            var saves: [Record] = []
            var deletes: [Record.ID] = []
            var bytes = 0
            changes: for change in pendingChanges {
                guard saves.count + deletes.count < rules.operations else { break }
                guard !rules.recordIDsOnTheWay.contains(change.recordID) else { continue }
                switch change {
                case .saveRecord(let recordID):
                    guard let record = await recordProvider(recordID) else { continue }
                    let size = record.estimatedSize
                    // The batch ends at the first change that does not fit: later ones wait their turn.
                    if !saves.isEmpty || !deletes.isEmpty, bytes + size > rules.bytes { break changes }
                    bytes += size
                    saves.append(record)
                case .deleteRecord(let recordID):
                    deletes.append(recordID)
                    bytes += recordID.recordName.utf8.count + 64
                }
            }
            guard !saves.isEmpty || !deletes.isEmpty else { return nil }
            self.init(recordsToSave: saves, recordIDsToDelete: deletes)
        }
    }

    /// What the next batch may hold, set by the engine while it asks the delegate for a batch:
    /// the server's limits, and not the records of the request on the way. CloudKit's default
    /// limits otherwise.
    @TaskLocal static var batchRules = BatchRules(operations: 200, bytes: 2 << 20)

    /// What one send request may hold.
    struct BatchRules: Sendable {
        var operations: Int
        var bytes: Int
        /// The records of the request on the way to the server, which wait for its answer.
        var recordIDsOnTheWay: Set<Record.ID> = []
    }
}

extension Record {
    /// About how many bytes the record takes in a request: its field values, names and system fields.
    var estimatedSize: Int {
        var size = 256 + recordID.recordName.utf8.count + recordType.utf8.count
        for key in allKeys() {
            size += key.utf8.count + 32
            size += fieldValue(forKey: key).map(Self.estimatedSize) ?? 0
        }
        return size
    }

    private static func estimatedSize(_ value: RecordFieldValue) -> Int {
        switch value {
        case .string(let text): text.utf8.count
        case .bytes(let data): data.count * 4 / 3
        case .stringList(let texts): texts.reduce(0) { $0 + $1.utf8.count + 3 }
        case .bytesList(let items): items.reduce(0) { $0 + $1.count * 4 / 3 + 3 }
        case .int64List(let items): items.count * 21
        case .doubleList(let items): items.count * 25
        case .dateList(let items): items.count * 15
        case .referenceList(let items): items.reduce(0) { $0 + $1.recordID.recordName.utf8.count + 64 }
        case .assetList(let items): items.count * 160
        case .locationList(let items): items.count * 120
        case .reference(let reference): reference.recordID.recordName.utf8.count + 64
        case .asset: 160
        case .location: 120
        case .int64, .double, .date: 25
        }
    }
}
