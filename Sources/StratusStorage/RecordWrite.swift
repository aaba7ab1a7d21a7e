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

    /// Creates a write.
    public init(
        operationType: RecordOperationType, recordName: String, recordType: String? = nil,
        recordChangeTag: String? = nil, fields: [String: FieldValue] = [:], removedFieldNames: Set<String> = []
    ) {
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
    /// Whether only a record's creator may change or delete it (the public database's default grants).
    public var onlyCreatorMayModify: Bool
    /// Size and count limits for records.
    public var limits: Limits

    /// Creates a write context.
    public init(
        userRecordName: String, deviceID: String? = nil, timestamp: Int64, onlyCreatorMayModify: Bool = false,
        limits: Limits = Limits()
    ) {
        self.userRecordName = userRecordName
        self.deviceID = deviceID
        self.timestamp = timestamp
        self.onlyCreatorMayModify = onlyCreatorMayModify
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
