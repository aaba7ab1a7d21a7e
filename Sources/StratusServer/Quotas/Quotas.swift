public import StratusModel
public import StratusStorage

/// How much a container's users, and the container as a whole, may hold (``StorageUsage``): live
/// records, their bytes, the bytes of the assets they hold, and the bytes a user uploaded that no
/// record holds yet. Past a quota a write or an upload is refused with `QUOTA_EXCEEDED` (HTTP 413),
/// per item in a `records/modify` answer; deleting and shrinking are never refused.
///
/// A user's records are those of their private database (also what participants of their shares
/// write there, as CloudKit charges the owner) and those they created in the public database.
/// The server's defaults (`stratus serve --user-quota-…`) apply to every container; the admin API
/// sets a container's own (`PUT /admin/1/containers/{container}/quotas`).
public struct Quotas: Sendable, Hashable {
    /// What one user may hold: by default 10,000,000 records, 10 GiB of records, 20 GiB of assets.
    public var perUser: StorageQuota
    /// Bytes one user may have uploaded within the asset grace period that no record holds yet
    /// (1 GiB by default): uploads are kept that long for the record that will hold them, so
    /// without a bound one account could fill the disk with uploads it never saves.
    public var perUserPendingUploadBytes: Int64?
    /// What the whole container may hold; unlimited by default.
    public var perContainer: StorageQuota

    /// Creates quotas; every argument has the default documented on its property.
    public init(
        perUser: StorageQuota = StorageQuota(records: 10_000_000, recordBytes: 10 << 30, assetBytes: 20 << 30),
        perUserPendingUploadBytes: Int64? = 1 << 30, perContainer: StorageQuota = .unlimited
    ) {
        self.perUser = perUser
        self.perUserPendingUploadBytes = perUserPendingUploadBytes
        self.perContainer = perContainer
    }

    /// Reads quotas as the admin API writes them (``write(to:)``); a member left out keeps its value
    /// in `base`, and `null` makes it unlimited.
    public init(json: JSONValue, over base: Quotas) throws {
        let object = try json.object()
        for key in object.members.map(\.key) where key != "user" && key != "container" {
            throw JSONDecodingError(.invalid, "is not a quota; the members are user and container", at: [.key(key)])
        }
        self = base
        if let user = object.members["user"] {
            try withJSONPath(.key("user")) {
                let members = try user.object().members
                perUser = try Self.quota(members, over: perUser, extra: ["pendingUploadBytes"])
                if let pending = members["pendingUploadBytes"] {
                    perUserPendingUploadBytes = try withJSONPath(.key("pendingUploadBytes")) { try Self.limit(pending) }
                }
            }
        }
        if let container = object.members["container"] {
            perContainer = try withJSONPath(.key("container")) {
                try Self.quota(container.object().members, over: perContainer, extra: [])
            }
        }
    }

    private static func quota(_ members: JSONMembers, over base: StorageQuota, extra: Set<String>) throws -> StorageQuota {
        var quota = base
        for (key, value) in members {
            try withJSONPath(.key(key)) {
                switch key {
                case "records": quota.records = try limit(value)
                case "recordBytes": quota.recordBytes = try limit(value)
                case "assetBytes": quota.assetBytes = try limit(value)
                case _ where extra.contains(key): break
                default:
                    throw JSONDecodingError(
                        .invalid, "is not a quota; the members are records, recordBytes, assetBytes"
                            + (extra.isEmpty ? "" : " and " + extra.sorted().joined(separator: ", ")))
                }
            }
        }
        return quota
    }

    /// A limit: a whole number of at least 0, or `null` for none.
    private static func limit(_ value: JSONValue) throws -> Int64? {
        if value == .null { return nil }
        let limit = try Int64(json: value)
        guard limit >= 0 else { throw JSONDecodingError(.invalid, "must be at least 0, or null for no limit") }
        return limit
    }

    /// Writes `{"user": {…, "pendingUploadBytes": …}, "container": {…}}`, unlimited members as `null`.
    public func write(to writer: inout JSONWriter) {
        func limit(_ name: String, _ value: Int64?) {
            writer.key(name)
            if let value { writer.int(value) } else { writer.null() }
        }
        func quota(_ quota: StorageQuota) {
            limit("records", quota.records)
            limit("recordBytes", quota.recordBytes)
            limit("assetBytes", quota.assetBytes)
        }
        writer.beginObject()
        writer.key("user")
        writer.beginObject()
        quota(perUser)
        limit("pendingUploadBytes", perUserPendingUploadBytes)
        writer.endObject()
        writer.key("container")
        writer.beginObject()
        quota(perContainer)
        writer.endObject()
        writer.endObject()
    }
}

extension StorageUsage {
    /// Writes `{"records": …, "recordBytes": …, "assetBytes": …}`.
    func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("records", records)
        writer.field("recordBytes", recordBytes)
        writer.field("assetBytes", assetBytes)
        writer.endObject()
    }
}
