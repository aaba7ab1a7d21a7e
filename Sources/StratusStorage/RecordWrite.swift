public import StratusModel

/// One validated operation of a `records/modify` request, as storage applies it.
public struct RecordWrite: Hashable, Sendable {
    /// What to do.
    public var operationType: RecordOperationType
    /// The record's name.
    public var recordName: String
    /// The record's type; needed to create.
    public var recordType: String?
    /// The change tag the client last saw; checked by `update`, `replace` and `delete`.
    public var recordChangeTag: String?
    /// Values to write.
    public var fields: [String: FieldValue]
    /// Fields to remove (`update` and `forceUpdate`).
    public var removedFieldNames: Set<String>
    /// Checksums of assets in `fields` that the client uploaded (the server checked their receipts).
    /// Any other asset in the written record must already be in the record.
    public var uploadedAssets: Set<String>

    /// Creates a write.
    public init(
        operationType: RecordOperationType, recordName: String, recordType: String? = nil,
        recordChangeTag: String? = nil, fields: [String: FieldValue] = [:], removedFieldNames: Set<String> = [],
        uploadedAssets: Set<String> = []
    ) {
        self.uploadedAssets = uploadedAssets
        self.operationType = operationType
        self.recordName = recordName
        self.recordType = recordType
        self.recordChangeTag = recordChangeTag
        self.fields = fields
        self.removedFieldNames = removedFieldNames
    }
}

/// Who writes, when, and under which rules.
public struct WriteContext: Hashable, Sendable {
    /// The writing user's record name.
    public var userRecordName: String
    /// The writing device, when the client said.
    public var deviceID: String?
    /// The time of the write in milliseconds since 1970.
    public var timestamp: Int64
    /// Whether the schema's grants decide who may create and change records (the public database).
    public var enforcesGrants: Bool
    /// Size and count limits for records.
    public var limits: Limits
    /// For a participant of hierarchical shares writing in the owner's zone, the shares they take
    /// part in and their permission in each: they reach only those shares' records. `nil` for the
    /// owner (and for participants of a zone-wide share, who reach the whole zone).
    public var participantShares: [String: SharePermission]?
    /// The quotas the write is held to; `nil` holds it to none (what it changes is counted all the same).
    public var quota: WriteQuota?
    /// The most records one request may move in or out of shares (``HierarchyShaper``): each is a row
    /// written and a feed entry for every device, so one request cannot rewrite a zone without end.
    public var maxReshapedRecordsPerRequest = 100_000

    /// Creates a write context.
    public init(
        userRecordName: String, deviceID: String? = nil, timestamp: Int64, enforcesGrants: Bool = false,
        limits: Limits = Limits(), participantShares: [String: SharePermission]? = nil, quota: WriteQuota? = nil
    ) {
        self.quota = quota
        self.participantShares = participantShares
        self.userRecordName = userRecordName
        self.deviceID = deviceID
        self.timestamp = timestamp
        self.enforcesGrants = enforcesGrants
        self.limits = limits
    }

    var stamp: RecordStamp { RecordStamp(timestamp: timestamp, userRecordName: userRecordName, deviceID: deviceID) }
}

/// Why one write failed: a wire code, a reason, and for conflicts the record the server holds.
public struct RecordWriteFailure: Error, Hashable, Sendable {
    /// The wire code.
    public var code: ServerErrorCode
    /// What went wrong.
    public var reason: String
    /// The current server record, for `CONFLICT` and `EXISTS`.
    public var serverRecord: StoredRecord?

    /// Creates a failure.
    public init(_ code: ServerErrorCode, _ reason: String, serverRecord: StoredRecord? = nil) {
        self.code = code
        self.reason = reason
        self.serverRecord = serverRecord
    }
}

/// The result of one write: the record as stored (a tombstone for a delete), or why it failed.
public typealias RecordWriteResult = Result<StoredRecord, RecordWriteFailure>

/// One record a committed batch changed: its state before and after.
public struct RecordChange: Hashable, Sendable {
    /// The record before the batch; `nil` (or a tombstone) when the batch created it.
    public var previous: StoredRecord?
    /// The record after the batch; a tombstone when the batch deleted it.
    public var record: StoredRecord

    /// Creates a change.
    public init(previous: StoredRecord?, record: StoredRecord) {
        self.previous = previous
        self.record = record
    }

    /// What the change did.
    public var kind: Kind {
        if record.deleted { return .deleted }
        return previous == nil || previous?.deleted == true ? .created : .updated
    }

    /// What a change did to a record.
    public enum Kind: String, Hashable, Sendable {
        case created, updated, deleted
    }
}

/// What a batch of writes did: a result per write, and every record the batch changed once committed.
public struct ModifyRecordsOutcome: Sendable {
    /// One result per write, in order.
    public var results: [RecordWriteResult]
    /// The records changed, in the order they were written: the successful writes and the records
    /// deleted with them through `DELETE_SELF`. Empty when an atomic batch failed.
    public var changes: [RecordChange]

    /// Creates an outcome.
    public init(results: [RecordWriteResult], changes: [RecordChange]) {
        self.results = results
        self.changes = changes
    }
}
