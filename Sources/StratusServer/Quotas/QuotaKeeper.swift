import StratusModel
import StratusStorage
import Synchronization

/// Holds writes and uploads to their container's ``Quotas``: the one place that knows which quotas
/// a container has, how full it is, and how much a user may still upload.
///
/// A container's own quotas (set through the admin API) are kept in the storage's settings and read
/// again at most every ``refreshMilliseconds``, so a change reaches every instance within that
/// time. A container's total usage, needed only when it has a container quota, is measured as often,
/// and a write is checked against what was left then: a container's quota may be passed by what
/// the writes of those seconds added. A user's quota is checked inside the write's transaction.
final class QuotaKeeper: Sendable {
    private let storage: any UsageStorage & SettingsStorage
    /// The quotas of containers that set none.
    let defaults: Quotas
    private let clock: ServerClock
    /// How long an upload counts as not yet held, in milliseconds: the asset grace period.
    private let graceMilliseconds: Int64
    private let cache = Mutex<[String: Cached]>([:])

    /// How long what is read of a container is used before it is read again.
    static let refreshMilliseconds: Int64 = 10_000

    private struct Cached {
        var quotas: Quotas
        var quotasRead: Int64
        var usage: StorageUsage?
        var usageRead: Int64 = 0
    }

    init(storage: any UsageStorage & SettingsStorage, defaults: Quotas, clock: ServerClock, graceSeconds: Int64) {
        self.storage = storage
        self.defaults = defaults
        self.clock = clock
        graceMilliseconds = graceSeconds * 1000
    }

    private static func settingKey(_ container: String) -> String { "quotas:\(container)" }

    /// The quotas `container` is held to: its own, or the server's defaults.
    func quotas(container: String) async throws -> Quotas {
        let now = clock.milliseconds
        if let cached = cache.withLock({ $0[container] }), now - cached.quotasRead < Self.refreshMilliseconds {
            return cached.quotas
        }
        // An empty setting is a container's quotas set back to the defaults.
        let quotas = try await storage.setting(Self.settingKey(container)).flatMap { $0.isEmpty ? nil : $0 }.map {
            try Quotas(json: JSONValue.parse(Array($0.utf8)), over: defaults)
        } ?? defaults
        cache.withLock { cache in
            if cache[container] == nil {
                cache[container] = Cached(quotas: quotas, quotasRead: now)
            } else {
                cache[container]!.quotas = quotas
                cache[container]!.quotasRead = now
            }
        }
        return quotas
    }

    /// Sets `container`'s own quotas (`nil`: the server's defaults again); this instance holds writes
    /// to them at once, the others within ``refreshMilliseconds``.
    func setQuotas(_ quotas: Quotas?, container: String) async throws {
        var writer = JSONWriter()
        quotas?.write(to: &writer)
        try await storage.setSetting(
            Self.settingKey(container), to: quotas == nil ? "" : String(decoding: writer.bytes, as: UTF8.self))
        cache.withLock { $0[container] = nil }
    }

    /// What every account of `container` holds, and the container in all.
    func usage(container: String) async throws -> (byAccount: [String: StorageUsage], total: StorageUsage) {
        let byAccount = try await storage.usageByAccount(container: container)
        return (byAccount, byAccount.values.reduce(.zero, +))
    }

    /// The quotas a `records/modify` of `container` is held to.
    func writeQuota(container: String) async throws -> WriteQuota {
        let quotas = try await quotas(container: container)
        guard !quotas.perContainer.isUnlimited else { return WriteQuota(perAccount: quotas.perUser) }
        let now = clock.milliseconds
        var usage = cache.withLock { $0[container] }.flatMap { now - $0.usageRead < Self.refreshMilliseconds ? $0.usage : nil }
        if usage == nil {
            let total = try await self.usage(container: container).total
            cache.withLock { cache in
                cache[container]?.usage = total
                cache[container]?.usageRead = now
            }
            usage = total
        }
        return WriteQuota(perAccount: quotas.perUser, containerRemaining: quotas.perContainer.remaining(after: usage!))
    }

    /// Adds what a committed write changed to the container's usage as last measured, so that this
    /// instance holds its own writes to the container's quota at once.
    func noteWritten(container: String, changes: [RecordChange]) {
        guard !changes.isEmpty else { return }
        let change = changes.reduce(StorageUsage.zero) { $0 + StorageUsage.of($1.record) - StorageUsage.of($1.previous) }
        cache.withLock { cache in
            guard let usage = cache[container]?.usage else { return }
            cache[container]?.usage = usage + change
        }
    }

    /// An upload ticket as issued: its identifier and the bytes it allows.
    struct Ticket: Sendable {
        var container: String
        var user: String
        var id: String
        var allowance: Int64
    }

    /// The most bytes the upload of `ticket` may bring before a quota refuses it, and the error to
    /// refuse with when it brings more: the ticket's bytes left, or the user's uploads not yet held
    /// by a record (of the grace period) under their quota.
    func uploadRoom(_ ticket: Ticket) async throws -> (bytes: Int64, refusal: StratusError) {
        let quotas = try await quotas(container: ticket.container)
        let used = try await storage.uploadedBytes(
            container: ticket.container, user: ticket.user, ticket: ticket.id, since: clock.milliseconds - graceMilliseconds)
        let ticketRoom = ticket.allowance - used.ticket
        if let pendingQuota = quotas.perUserPendingUploadBytes, pendingQuota - used.pending < ticketRoom {
            return (
                max(0, pendingQuota - used.pending),
                Self.pendingRefusal(quota: pendingQuota, pending: used.pending))
        }
        return (
            max(0, ticketRoom),
            StratusError(
                .quotaExceeded,
                "this upload URL allows \(ticket.allowance) bytes, one asset per token asked of assets/upload, and "
                    + "\(used.ticket) were uploaded with it: ask assets/upload for another"))
    }

    /// Records an upload of `size` bytes with `ticket` and answers it (for ``forgetUpload(_:)``), or
    /// refuses it with `QUOTA_EXCEEDED` when uploads since ``uploadRoom(_:)`` used up the room it found.
    func recordUpload(_ ticket: Ticket, checksum: String, size: Int64) async throws -> PendingUpload {
        let quotas = try await quotas(container: ticket.container)
        let now = clock.milliseconds
        let upload = PendingUpload(
            container: ticket.container, user: ticket.user, ticket: ticket.id, checksum: checksum, size: size, timestamp: now)
        guard try await storage.recordUpload(
            upload, since: now - graceMilliseconds, maxPendingBytes: quotas.perUserPendingUploadBytes,
            ticketAllowance: ticket.allowance)
        else {
            throw StratusError(
                .quotaExceeded,
                "the upload does not fit: with uploads made meanwhile it would pass this upload URL's bytes or your "
                    + "quota of \(quotas.perUserPendingUploadBytes.map { "\($0) bytes" } ?? "bytes") uploaded and not "
                    + "yet saved in a record")
        }
        return upload
    }

    /// Forgets an upload recorded whose bytes were then not stored.
    func forgetUpload(_ upload: PendingUpload) async {
        try? await storage.forgetUpload(upload)
    }

    private static func pendingRefusal(quota: Int64, pending: Int64) -> StratusError {
        StratusError(
            .quotaExceeded,
            "you have \(pending) bytes uploaded that no record holds yet, and may have \(quota): save records holding "
                + "them, or wait for unsaved uploads to expire")
    }
}
