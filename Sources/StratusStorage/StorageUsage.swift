public import StratusModel

/// What an account holds in a container: its live records, their bytes, and the bytes of the assets
/// they hold. A record is charged to the owner of its database (a private database's user, also for
/// records participants of a share write there), or in the public database to its creator.
///
/// A record's bytes are its fields as stored; its assets' bytes are the sizes of the distinct assets
/// it holds, counted once per record that holds them (as CloudKit counts them), however often their
/// content is stored.
public struct StorageUsage: Sendable, Hashable {
    /// Live records.
    public var records: Int64
    /// Bytes of the records' fields.
    public var recordBytes: Int64
    /// Bytes of the assets the records hold.
    public var assetBytes: Int64

    /// Creates a usage.
    public init(records: Int64 = 0, recordBytes: Int64 = 0, assetBytes: Int64 = 0) {
        self.records = records
        self.recordBytes = recordBytes
        self.assetBytes = assetBytes
    }

    /// Nothing held.
    public static let zero = StorageUsage()

    /// Whether every figure is zero.
    public var isZero: Bool { self == .zero }

    /// Whether any figure is above zero: a change that grows what an account holds.
    var grows: Bool { records > 0 || recordBytes > 0 || assetBytes > 0 }

    public static func + (lhs: StorageUsage, rhs: StorageUsage) -> StorageUsage {
        StorageUsage(
            records: lhs.records + rhs.records, recordBytes: lhs.recordBytes + rhs.recordBytes,
            assetBytes: lhs.assetBytes + rhs.assetBytes)
    }

    public static func += (lhs: inout StorageUsage, rhs: StorageUsage) {
        lhs = lhs + rhs
    }

    public static func - (lhs: StorageUsage, rhs: StorageUsage) -> StorageUsage {
        StorageUsage(
            records: lhs.records - rhs.records, recordBytes: lhs.recordBytes - rhs.recordBytes,
            assetBytes: lhs.assetBytes - rhs.assetBytes)
    }

    /// The account `record` is charged to: the owner of `database`, or in the public database the
    /// record's creator.
    public static func account(of record: StoredRecord, in database: DatabaseLocator) -> String {
        database.scope == .public ? record.created.userRecordName : database.owner
    }

    /// What one stored row counts for: nothing for a tombstone.
    public static func of(_ record: StoredRecord?) -> StorageUsage {
        guard let record, !record.deleted else { return .zero }
        return StorageUsage(
            records: 1, recordBytes: Int64(record.fieldsJSON.count), assetBytes: RecordWritePlanner.assetBytes(of: record))
    }
}

/// The most an account may hold; `nil` members are unlimited.
public struct StorageQuota: Sendable, Hashable {
    /// Live records.
    public var records: Int64?
    /// Bytes of the records' fields.
    public var recordBytes: Int64?
    /// Bytes of the assets the records hold.
    public var assetBytes: Int64?

    /// Creates a quota; every member is unlimited by default.
    public init(records: Int64? = nil, recordBytes: Int64? = nil, assetBytes: Int64? = nil) {
        self.records = records
        self.recordBytes = recordBytes
        self.assetBytes = assetBytes
    }

    /// No limit at all.
    public static let unlimited = StorageQuota()

    /// Whether no member limits anything.
    public var isUnlimited: Bool { self == .unlimited }

    /// The quota whose every member is the smaller of the two (a limit where either sets one).
    public func tightened(by other: StorageQuota) -> StorageQuota {
        func least(_ a: Int64?, _ b: Int64?) -> Int64? { a.map { a in b.map { min(a, $0) } ?? a } ?? b }
        return StorageQuota(
            records: least(records, other.records), recordBytes: least(recordBytes, other.recordBytes),
            assetBytes: least(assetBytes, other.assetBytes))
    }

    /// What is left under the quota after `usage` (never below zero); `nil` members stay unlimited.
    public func remaining(after usage: StorageUsage) -> StorageQuota {
        StorageQuota(
            records: records.map { max(0, $0 - usage.records) },
            recordBytes: recordBytes.map { max(0, $0 - usage.recordBytes) },
            assetBytes: assetBytes.map { max(0, $0 - usage.assetBytes) })
    }

    /// Why holding `usage` after growing it by `change` passes this quota, naming the figure and
    /// the limit; `nil` when it does not pass (a figure `change` does not grow is never refused, so
    /// that an account over a lowered quota may still delete and shrink).
    public func violation(of usage: StorageUsage, growingBy change: StorageUsage, whose: String) -> String? {
        if let records, change.records > 0, usage.records > records {
            return "\(whose) quota of \(records) records would be exceeded (\(usage.records))"
        }
        if let recordBytes, change.recordBytes > 0, usage.recordBytes > recordBytes {
            return "\(whose) quota of \(recordBytes) bytes of records would be exceeded (\(usage.recordBytes))"
        }
        if let assetBytes, change.assetBytes > 0, usage.assetBytes > assetBytes {
            return "\(whose) quota of \(assetBytes) bytes of assets held would be exceeded (\(usage.assetBytes))"
        }
        return nil
    }
}

/// The quotas a write is held to (``WriteContext/quota``).
public struct WriteQuota: Sendable, Hashable {
    /// What one account (the record's owner, or in the public database its creator) may hold.
    public var perAccount: StorageQuota
    /// What the whole container may still grow by, as last measured: the container's quota minus
    /// its usage then (checked against the batch's growth, so a container's quota is held to within
    /// what the writes since that measurement added).
    public var containerRemaining: StorageQuota

    /// Creates the quotas of a write.
    public init(perAccount: StorageQuota, containerRemaining: StorageQuota = .unlimited) {
        self.perAccount = perAccount
        self.containerRemaining = containerRemaining
    }
}
