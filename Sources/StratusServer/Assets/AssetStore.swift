import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import StratusModel
import StratusStorage
import Synchronization
import _NIOFileSystem

/// Assets, stored by content: the bytes live in an ``AssetBlobStore`` (a directory or an S3-compatible
/// bucket) under their SHA-256 checksum, so identical content is stored once, whoever uploads it and
/// however often.
///
/// Uploads stream to a temporary file while being hashed, then go to the blob store, so memory stays
/// flat whatever the size. A record refers to an asset by its checksum; storage tracks which records
/// refer to which assets, and ``collect(now:)`` deletes the bytes nobody refers to any more.
final class AssetStore: Sendable {
    /// Where the bytes live.
    let blobs: any AssetBlobStore
    let storage: any AssetStorage
    let tokens: SyncTokenCodec
    /// The transfers under way, each holding a file open.
    let transfers: AssetTransfers
    /// How long an uploaded asset is kept without any record referring to it, in milliseconds.
    let graceMilliseconds: Int64
    private let clock: ServerClock
    private let state = Mutex(State())

    private struct State {
        /// Checksums of assets stored recently, which a concurrent collection must not delete.
        var recentlyStored: [String: Int64] = [:]
        /// The deletions under way, which an upload of the same content waits for.
        var deletions: [String: Task<Void, any Error>] = [:]
    }

    init(
        blobs: any AssetBlobStore, storage: any AssetStorage, tokens: SyncTokenCodec, graceSeconds: Int64,
        maxTransfers: Int = 10_000, clock: ServerClock = .system
    ) {
        transfers = AssetTransfers(capacity: maxTransfers)
        self.clock = clock
        self.blobs = blobs
        self.storage = storage
        self.tokens = tokens
        graceMilliseconds = graceSeconds * 1000
    }

    static func isChecksum(_ text: String) -> Bool {
        text.utf8.count == 64 && text.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
    }

    // MARK: Upload tickets and receipts

    /// The sealed upload ticket that an upload URL carries: which container and user may upload,
    /// how many bytes in all (``QuotaKeeper``), until when; it has an identifier of its own.
    func uploadTicket(container: String, user: String, allowance: Int64, validFor seconds: Int64 = 3600) -> String {
        var writer = JSONWriter()
        writer.beginObject()
        writer.field("kind", "upload")
        writer.field("id", UUID().uuidString)
        writer.field("container", container)
        writer.field("user", user)
        writer.field("allowance", allowance)
        writer.field("expires", clock.milliseconds + seconds * 1000)
        writer.endObject()
        return tokens.seal(writer.bytes)
    }

    /// What an upload ticket grants; `BAD_REQUEST` or `AUTHENTICATION_FAILED` when it is not a valid,
    /// current ticket. A ticket sealed before tickets had an identifier and an allowance is its own
    /// identifier and allows `defaultAllowance` bytes.
    func ticket(_ ticket: String, defaultAllowance: Int64) throws -> QuotaKeeper.Ticket {
        let object = try openTicket(ticket, kind: "upload", expired: "the upload URL has expired; ask assets/upload for a new one")
        guard let container: String = try? object.decode("container"), let user: String = try? object.decode("user") else {
            throw StratusError.badRequest("ticket is not an upload ticket issued by this server")
        }
        return QuotaKeeper.Ticket(
            container: container, user: user, id: (try? object.decode("id")) ?? ticket,
            allowance: (try? object.decode("allowance")) ?? defaultAllowance)
    }

    /// How long a signed download URL works: one hour.
    static let downloadLifetimeSeconds: Int64 = 3600

    /// The `downloadURL`s of the assets of records in `zone` of `database`, as `reader` reads them:
    /// signed and expiring (``downloadLifetimeSeconds``), so they work as returned, with no tokens,
    /// as Apple's do. Each names the asset, the record and field holding it, and the reader, under
    /// the server's secret; its path ends with Apple's `${f}` file-name placeholder, which a client
    /// may replace with any name.
    func downloadURLs(
        baseURL: String, database: DatabaseLocator, zone: String
    ) -> @Sendable (_ recordName: String, _ field: String, _ checksum: String) -> String {
        let expires = clock.milliseconds + Self.downloadLifetimeSeconds * 1000
        let tokens = tokens
        return { recordName, field, checksum in
            var writer = JSONWriter()
            writer.beginObject()
            writer.field("kind", "download")
            writer.field("database", database)
            writer.field("zone", zone)
            writer.field("record", recordName)
            writer.field("field", field)
            writer.field("checksum", checksum)
            writer.field("expires", expires)
            writer.endObject()
            return baseURL + "/assets/1/download/" + checksum + "/${f}?ticket=" + tokens.seal(writer.bytes).queryValueEncoded
        }
    }

    /// What a signed download URL grants: the asset `checksum` in `field` of record `record` of
    /// `zone`; `BAD_REQUEST` or `AUTHENTICATION_FAILED` when the ticket is not a current download
    /// ticket for that checksum.
    func download(ofTicket ticket: String, checksum: String) throws
        -> (database: DatabaseLocator, zone: String, record: String, field: String)
    {
        let object = try openTicket(
            ticket, kind: "download", expired: "the download URL has expired; fetch the record again for a fresh downloadURL")
        guard let database: DatabaseLocator = try? object.decode("database"), let zone: String = try? object.decode("zone"),
            let record: String = try? object.decode("record"), let field: String = try? object.decode("field"),
            (try? object.decode("checksum") as String) == checksum
        else { throw StratusError.badRequest("ticket is not a download ticket of this asset issued by this server") }
        return (database, zone, record, field)
    }

    /// The contents of a sealed ticket of `kind` that has not expired: `BAD_REQUEST` for one this
    /// server did not seal or of another kind, `AUTHENTICATION_FAILED` saying `expired` for an old one.
    private func openTicket(_ ticket: String, kind: String, expired: String) throws -> JSONObject {
        let bytes = try tokens.open(ticket, field: "ticket", what: "a ticket")
        guard let object = try? JSONValue.parse(bytes).object(), (try? object.decode("kind") as String) == kind,
            let expires: Int64 = try? object.decode("expires")
        else { throw StratusError.badRequest("ticket is not \(kind == "upload" ? "an" : "a") \(kind) ticket issued by this server") }
        guard expires > clock.milliseconds else { throw StratusError(.authenticationFailed, expired) }
        return object
    }

    /// The receipt a client saves a record with: proof that the asset was uploaded to `container`.
    func receipt(checksum: String, size: Int64, container: String) -> String {
        var writer = JSONWriter()
        writer.beginObject()
        writer.field("kind", "receipt")
        writer.field("container", container)
        writer.field("checksum", checksum)
        writer.field("size", size)
        writer.endObject()
        return tokens.seal(writer.bytes)
    }

    /// Checks an asset value a client saves: a receipt must be one this server issued for the
    /// container, and match the value's checksum. Returns the value as stored (checksum and the
    /// receipt's size; a kept asset, saved by its checksum alone, gets the size the record stores for
    /// it when the save is planned, not the one the client claims) and whether it came with a receipt.
    func admit(_ asset: AssetValue, container: String, field: String) throws -> (asset: AssetValue, uploaded: Bool) {
        guard let receipt = asset.receipt else {
            guard let checksum = asset.fileChecksum, Self.isChecksum(checksum) else {
                throw StratusError.badRequest(
                    "\(field): an asset needs the receipt from its upload (or, to keep the record's asset, its "
                        + "fileChecksum)")
            }
            return (AssetValue(fileChecksum: checksum), false)
        }
        let bytes = try tokens.open(receipt, field: "\(field).receipt", what: "an asset receipt")
        guard let object = try? JSONValue.parse(bytes).object(), (try? object.decode("kind") as String) == "receipt",
            let checksum: String = try? object.decode("checksum"), let size: Int64 = try? object.decode("size"),
            (try? object.decode("container") as String) == container
        else { throw StratusError.badRequest("\(field).receipt is not an asset receipt of this container") }
        if let claimed = asset.fileChecksum, claimed != checksum {
            throw StratusError.badRequest("\(field).fileChecksum does not match the receipt's asset")
        }
        return (AssetValue(fileChecksum: checksum, size: size), true)
    }

    // MARK: Bytes

    /// Streams an upload into the store and returns its checksum and size. It fails with
    /// `LIMIT_EXCEEDED` when it is larger than `limit` bytes, or with `overLimit` when that is given
    /// (a quota's refusal), and with whatever `admit` throws once its checksum and size are known,
    /// before its bytes are stored; either way nothing is kept.
    func receive<Body: AsyncSequence>(
        _ body: Body, limit: Int, overLimit: StratusError? = nil,
        admit: (_ checksum: String, _ size: Int64) async throws -> Void = { _, _ in }
    ) async throws -> (checksum: String, size: Int64)
    where Body.Element == ByteBuffer {
        let temporary = "\(blobs.stagingDirectory)/\(UUID().uuidString)"
        try FileManager.default.createDirectory(
            atPath: blobs.stagingDirectory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        var hasher = SHA256()
        var size = 0
        do {
            try await FileSystem.shared.withFileHandle(
                forWritingAt: FilePath(temporary), options: .newFile(replaceExisting: true, permissions: [.ownerRead, .ownerWrite])
            ) { handle in
                try await handle.withBufferedWriter { writer in
                    for try await buffer in body {
                        size += buffer.readableBytes
                        guard size <= limit else {
                            throw overLimit
                                ?? StratusError(.limitExceeded, "the asset is larger than the limit of \(limit) bytes per asset")
                        }
                        buffer.withUnsafeReadableBytes { hasher.update(bufferPointer: $0) }
                        try await writer.write(contentsOf: buffer)
                    }
                }
            }
        } catch {
            try? FileManager.default.removeItem(atPath: temporary)
            throw error
        }
        let checksum = hasher.finalize().hexDigits
        do {
            try await admit(checksum, Int64(size))
        } catch {
            try? FileManager.default.removeItem(atPath: temporary)
            throw error
        }
        // Marked before its bytes are stored, so collection leaves them; after a deletion of the same
        // content already under way, so that deletion cannot remove them.
        while let deletion = state.withLock({ state -> Task<Void, any Error>? in
            if let deletion = state.deletions[checksum] { return deletion }
            state.recentlyStored[checksum] = clock.milliseconds
            return nil
        }) {
            _ = await deletion.result
        }
        try await blobs.put(temporary, checksum: checksum, size: Int64(size))
        try await storage.registerAsset(checksum: checksum, size: Int64(size), timestamp: clock.milliseconds)
        return (checksum, Int64(size))
    }

    /// Deletes the staged upload files last written before `cutoff` (milliseconds since 1970). An
    /// upload writes its file as its bytes arrive and stores or deletes it when it ends, so such a
    /// file is what a process that died during an upload left behind. Only files named as uploads
    /// are (a UUID): the staging folder may be shared, as the system's temporary folder is.
    private func removeAbandonedUploads(before cutoff: Int64) {
        let manager = FileManager.default
        guard let names = try? manager.contentsOfDirectory(atPath: blobs.stagingDirectory) else { return }
        for name in names where UUID(uuidString: name) != nil {
            let path = "\(blobs.stagingDirectory)/\(name)"
            guard let attributes = try? manager.attributesOfItem(atPath: path),
                attributes[.type] as? FileAttributeType == .typeRegular,
                let written = attributes[.modificationDate] as? Date, Int64(written.timeIntervalSince1970 * 1000) < cutoff
            else { continue }
            try? manager.removeItem(atPath: path)
        }
    }

    /// Deletes the assets that no record has referred to since the grace period, and upload files
    /// abandoned as long ago; returns how many assets.
    /// A deletion that fails does not stop the others; the error then names how many failed.
    @discardableResult
    func collect(now: Int64? = nil) async throws -> Int {
        let now = now ?? clock.milliseconds
        removeAbandonedUploads(before: now - graceMilliseconds)
        let checksums = try await storage.collectAssets(registeredBefore: now - graceMilliseconds)
        var removed = 0
        var failures: [any Error] = []
        for checksum in checksums {
            // An upload of the same content since the storage forgot it keeps the bytes: it was
            // registered again, and is marked before its bytes are stored.
            let deletion = state.withLock { state -> Task<Void, any Error>? in
                if let stored = state.recentlyStored[checksum], stored >= now - graceMilliseconds { return nil }
                state.recentlyStored[checksum] = nil
                let deletion = Task {
                    defer { self.state.withLock { $0.deletions[checksum] = nil } }
                    try await self.blobs.delete(checksum)
                }
                state.deletions[checksum] = deletion
                return deletion
            }
            guard let deletion else { continue }
            do {
                try await deletion.value
                removed += 1
            } catch {
                failures.append(error)
            }
        }
        state.withLock { state in
            state.recentlyStored = state.recentlyStored.filter { $0.value >= now - graceMilliseconds }
        }
        if let failure = failures.first {
            throw StratusError(
                .internalError,
                "could not delete \(failures.count) of \(checksums.count) unreferenced assets, whose bytes stay: "
                    + "\(failure)")
        }
        return removed
    }
}
