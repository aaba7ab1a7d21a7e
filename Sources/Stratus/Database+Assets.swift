import AsyncHTTPClient
import Crypto
import Foundation
import NIOCore
import NIOHTTP1
import StratusModel
import _NIOFileSystem

/// Asset files: uploaded before the records that hold them are saved, downloaded into the asset
/// cache when records that hold them are fetched.
extension Database {
    /// Files uploaded or downloaded at once.
    private static let transferConcurrency = 4

    // MARK: Uploads

    /// The records with every new asset (``Asset/init(fileURL:)``) in the fields of `keys` uploaded:
    /// each such asset gets its checksum, size and the receipt that lets the record hold it. A file
    /// held by several fields is uploaded once.
    ///
    /// One result per record: a record whose asset file is missing or unreadable
    /// (``CloudError/Code/assetFileNotFound``), larger than the server takes
    /// (``CloudError/Code/limitExceeded``), past the user's quota of uploads
    /// (``CloudError/Code/quotaExceeded``) or changed while it was sent
    /// (``CloudError/Code/assetFileModified``) fails alone, so that one bad file does not hold back
    /// the other records. Any other error, from the network or the server, fails the call. With
    /// `allOrNone` (an atomic batch, which one failure stops), nothing is uploaded once a file fails
    /// its checks.
    func uploadingAssets(
        of records: [Record], keys: [[String]], limits: Limits, allOrNone: Bool
    ) async throws -> [Result<Record, CloudError>] {
        var files: [URL] = []
        var tokens: [UploadAssetsRequest.Token] = []
        for (record, keys) in zip(records, keys) {
            for key in keys {
                for asset in record.values[key]?.assets ?? [] where asset.needsUpload {
                    guard let fileURL = asset.fileURL, !files.contains(fileURL) else { continue }
                    files.append(fileURL)
                    tokens.append(
                        UploadAssetsRequest.Token(
                            recordName: record.recordID.recordName, recordType: record.recordType, fieldName: key))
                }
            }
        }
        guard !files.isEmpty, let zoneID = records.first?.recordID.zoneID else { return records.map { .success($0) } }
        var failed: [URL: CloudError] = [:]
        for file in files {
            do throws(CloudError) {
                let size = try Self.fileSize(file)
                guard size <= limits.maxAssetSizeBytes else {
                    throw CloudError(
                        .limitExceeded,
                        "asset file \(file.path) is \(size) bytes; the server's limit is \(limits.maxAssetSizeBytes) bytes per asset")
                }
            } catch {
                failed[file] = error
            }
        }
        let sent = allOrNone && !failed.isEmpty ? [] : files.indices.filter { failed[files[$0]] == nil }
        var urls: [String] = []
        for chunk in sent.map({ tokens[$0] }).chunked(into: limits.maxOperationsPerRequest) {
            let answer = try await call(
                Endpoints.assetsUpload.erased, body: UploadAssetsRequest(zoneID: wireZoneID(zoneID), tokens: Array(chunk)),
                idempotent: true, as: UploadAssetsResponse.self)
            urls += answer.tokens.map(\.url)
        }
        guard urls.count == sent.count else {
            throw CloudError(.serverRejectedRequest, "the server answered \(urls.count) upload URLs for \(sent.count) assets")
        }
        let uploaded = try await forEachConcurrently(Array(zip(sent.map { files[$0] }, urls))) { file, url in
            do {
                return Result<Asset, CloudError>.success(try await upload(file, to: url))
            } catch let error as CloudError
                where [.assetFileNotFound, .assetFileModified, .limitExceeded, .quotaExceeded].contains(error.code)
            {
                return .failure(error)
            }
        }
        var byFile: [URL: Asset] = [:]
        for (index, result) in zip(sent, uploaded) {
            switch result {
            case .success(let asset): byFile[files[index]] = asset
            case .failure(let error): failed[files[index]] = error
            }
        }
        return zip(records, keys).map { record, keys in
            var record = record
            for key in keys {
                for asset in record.values[key]?.assets ?? [] where asset.needsUpload {
                    if let fileURL = asset.fileURL, let error = failed[fileURL] { return .failure(error) }
                }
                record.values[key] = record.values[key]?.mappingAssets { asset in
                    guard asset.needsUpload, let fileURL = asset.fileURL, let stored = byFile[fileURL] else { return asset }
                    return stored
                }
            }
            return .success(record)
        }
    }

    /// Posts the bytes of `file` to an upload URL and returns the asset with its receipt.
    private func upload(_ file: URL, to url: String) async throws -> Asset {
        let reply = try await connection.withRetries(idempotent: true, endpoint: .url(url)) {
            do {
                return try await FileSystem.shared.withFileHandle(forReadingAt: FilePath(file.path)) { handle in
                    let size = try await handle.info().size
                    var request = HTTPClientRequest(url: url)
                    request.method = .POST
                    request.body = .stream(handle.readChunks(chunkLength: .mebibytes(1)), length: .known(size))
                    // A transport of the app's takes the whole file.
                    let whole = connection.configuration.httpTransport == nil
                        ? nil : try await handle.readToEnd(maximumSizeAllowed: .bytes(size))
                    let response = try await connection.execute(request, transportBody: whole)
                    return Connection.Reply(
                        status: Int(response.status.code), body: try await response.body.collect(upTo: 1 << 20))
                }
            } catch let error as FileSystemError {
                throw CloudError(.assetFileNotFound, "asset file \(file.path) could not be read: \(error.message)")
            }
        }
        let answer: AssetUploadResponse
        do {
            answer = try AssetUploadResponse(jsonBytes: Array(reply.body.readableBytesView))
        } catch {
            throw CloudError(.serverRejectedRequest, "the server's answer to an upload could not be read: \(error)")
        }
        let stored = answer.singleFile
        guard stored.size == (try? Self.fileSize(file)).map(Int64.init) else {
            throw CloudError(.assetFileModified, "asset file \(file.path) changed while it was being uploaded")
        }
        return Asset(fileURL: file, fileChecksum: stored.fileChecksum, size: stored.size, receipt: stored.receipt)
    }

    private static func fileSize(_ file: URL) throws(CloudError) -> Int {
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: file.path),
            let size = (attributes[.size] as? NSNumber)?.intValue
        else {
            throw CloudError(.assetFileNotFound, "asset file \(file.path) does not exist or cannot be read")
        }
        return size
    }

    // MARK: Downloads

    /// The records with every asset's file in the local asset cache: each ``Asset/fileURL`` is set,
    /// or `nil` when the server no longer holds the asset in that record. A record whose files
    /// cannot be downloaded becomes a failure. Does nothing when the container's configuration
    /// turns downloads off.
    func downloadingAssets(of results: [Result<Record, CloudError>]) async -> [Result<Record, CloudError>] {
        guard connection.configuration.downloadsAssets,
            results.contains(where: { (try? $0.get())?.values.values.contains { !$0.assets.isEmpty } == true })
        else { return results }
        return (try? await forEachConcurrently(results) { result in
            guard case .success(let record) = result else { return result }
            do {
                return .success(try await downloadingAssets(of: record))
            } catch let error as CloudError {
                return .failure(error)
            } catch {
                return .failure(CloudError(.assetNotAvailable, "\(error)"))
            }
        }) ?? results
    }

    /// `record` with its assets' files downloaded into the cache.
    func downloadingAssets(of record: Record) async throws -> Record {
        var record = record
        for (key, value) in record.values where !value.assets.isEmpty {
            var downloaded: [String: URL?] = [:]
            for asset in value.assets {
                guard let checksum = asset.fileChecksum, downloaded[checksum] == nil else { continue }
                downloaded[checksum] = try await cachedFile(of: asset)
            }
            record.values[key] = value.mappingAssets { asset in
                guard let checksum = asset.fileChecksum, let fileURL = downloaded[checksum] else { return asset }
                var asset = asset
                asset.fileURL = fileURL
                return asset
            }
        }
        return record
    }

    /// The asset cache's folder.
    private var cacheDirectory: URL {
        connection.configuration.assetCacheDirectory
            ?? FileManager.default.temporaryDirectory.appendingPathComponent("stratus-assets", isDirectory: true)
    }

    /// The cached copy of an asset's file, downloaded when missing; `nil` when the server answers
    /// that the record no longer holds it.
    private func cachedFile(of asset: Asset) async throws -> URL? {
        guard let checksum = asset.fileChecksum, let downloadURL = asset.downloadURL else { return asset.fileURL }
        guard checksum.utf8.count == 64, checksum.utf8.allSatisfy({ $0 < 0x80 && isxdigit(Int32($0)) != 0 }) else {
            throw CloudError(.serverRejectedRequest, "the server sent an asset with an invalid checksum '\(checksum)'")
        }
        let directory = cacheDirectory
        let file = directory.appendingPathComponent(checksum)
        if FileManager.default.fileExists(atPath: file.path) { return file }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let temporary = directory.appendingPathComponent(".\(checksum).\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: temporary) }
        // A signed URL ends its path with Apple's `${f}` file-name placeholder; any name will do.
        let url = connection.authorized(downloadURL.replacingOccurrences(of: "${f}", with: checksum))
        do {
            _ = try await connection.withRetries(idempotent: true, endpoint: .url(url)) {
                var hasher = SHA256()
                let response = try await connection.execute(HTTPClientRequest(url: url))
                guard response.status == .ok else {
                    return Connection.Reply(
                        status: Int(response.status.code), body: try await response.body.collect(upTo: 1 << 20))
                }
                try await FileSystem.shared.withFileHandle(
                    forWritingAt: FilePath(temporary.path), options: .newFile(replaceExisting: true)
                ) { handle in
                    try await handle.withBufferedWriter { writer in
                        for try await buffer in response.body {
                            buffer.withUnsafeReadableBytes { hasher.update(bufferPointer: $0) }
                            try await writer.write(contentsOf: buffer)
                        }
                    }
                }
                let received = hasher.finalize().hexDigits
                guard received == checksum else {
                    throw CloudError(
                        .networkFailure, "the download of asset \(checksum) arrived damaged (checksum \(received))")
                }
                return Connection.Reply(status: 200, body: ByteBuffer())
            }
        } catch let error as CloudError where error.code == .unknownItem {
            return nil
        }
        if rename(temporary.path, file.path) != 0, !FileManager.default.fileExists(atPath: file.path) {
            throw CloudError(.assetNotAvailable, "the asset cache at \(directory.path) cannot be written")
        }
        return file
    }

    /// Runs `body` on every element, at most ``transferConcurrency`` at a time, and returns the
    /// results in the elements' order.
    private func forEachConcurrently<Element: Sendable, Result: Sendable>(
        _ elements: [Element], _ body: @escaping @Sendable (Element) async throws -> Result
    ) async throws -> [Result] {
        try await withThrowingTaskGroup(of: (Int, Result).self) { group in
            var results: [Result?] = Array(repeating: nil, count: elements.count)
            var next = 0
            func start() {
                let index = next
                let element = elements[index]
                group.addTask { (index, try await body(element)) }
                next += 1
            }
            while next < min(Self.transferConcurrency, elements.count) { start() }
            while let (index, result) = try await group.next() {
                results[index] = result
                if next < elements.count { start() }
            }
            return results.map { $0! }
        }
    }
}
