import AsyncHTTPClient
import Foundation
import Hummingbird
import NIOCore
import NIOHTTP1
import StratusModel
import _NIOFileSystem

/// Asset bytes in an S3-compatible bucket, as objects `<prefix>/<sha256 hex>`. An upload is staged in
/// a local directory while it is hashed (its key is only known at the end), then streamed from there
/// to the bucket in one `PUT` and removed. Downloads stream from the bucket with `Range`.
struct S3AssetBlobStore: AssetBlobStore {
    let client: S3Client
    let stagingDirectory: String
    /// `/<bucket>/<prefix>`: where the path of each object starts.
    private let root: String

    init(bucket: S3Bucket, stagingDirectory: String) {
        client = S3Client(bucket: bucket)
        self.stagingDirectory = stagingDirectory
        root = ([""] + [bucket.bucket] + bucket.prefix.split(separator: "/").map(String.init)).joined(separator: "/")
    }

    /// The path of the object holding the asset with this checksum, for ``S3Client``.
    func path(of checksum: String) -> String {
        "\(root)/\(checksum)"
    }

    func put(_ file: String, checksum: String, size: Int64) async throws {
        defer { try? FileManager.default.removeItem(atPath: file) }
        try await FileSystem.shared.withFileHandle(forReadingAt: FilePath(file)) { handle in
            let bytes = handle.readChunks(in: 0..<size, chunkLength: .kibibytes(256))
            try await client.send(
                .PUT, path(of: checksum), body: .stream(bytes, length: .known(size)),
                payloadHash: S3Signer.unsignedPayload, expected: [.ok])
        }
    }

    func size(of checksum: String) async throws -> Int? {
        let response = try await client.response(.HEAD, path(of: checksum), expected: [.ok, .notFound])
        guard response.status == .ok else { return nil }
        guard let size = response.headers.first(name: "content-length").flatMap(Int.init) else {
            throw StratusError(
                .internalError, "the asset bucket answered HEAD \(path(of: checksum)) without a Content-Length")
        }
        return size
    }

    func body(of checksum: String, range: ClosedRange<Int>, context: some RequestContext) async throws -> ResponseBody {
        let bytes = try await client.response(
            .GET, path(of: checksum), headers: ["range": "bytes=\(range.lowerBound)-\(range.upperBound)"],
            expected: [.partialContent]
        ).body
        return ResponseBody(contentLength: range.count) { writer in
            try await writer.write(bytes)
            try await writer.finish(nil)
        }
    }

    func delete(_ checksum: String) async throws {
        try await client.send(.DELETE, path(of: checksum), expected: [.noContent, .ok])
    }
}
