import Hummingbird

/// Where asset bytes live, named by their SHA-256 checksum: a directory (``DirectoryAssetBlobStore``)
/// or an S3-compatible bucket (``S3AssetBlobStore``). ``AssetStore`` hashes uploads, keeps track of
/// references and decides what goes; a blob store only keeps bytes.
protocol AssetBlobStore: Sendable {
    /// The local directory an upload is written to while it is hashed, before ``put(_:checksum:size:)``.
    var stagingDirectory: String { get }

    /// Stores the finished file at `file`, in ``stagingDirectory``, as the asset `checksum`, replacing
    /// the equal content that may be stored already. The file is gone afterwards, stored or not.
    func put(_ file: String, checksum: String, size: Int64) async throws

    /// The size in bytes of the stored asset `checksum`; `nil` when it is not stored.
    func size(of checksum: String) async throws -> Int?

    /// The bytes `range` of the stored asset `checksum`, streamed.
    func body(of checksum: String, range: ClosedRange<Int>, context: some RequestContext) async throws -> ResponseBody

    /// Deletes the asset `checksum`; deleting one that is not stored succeeds.
    func delete(_ checksum: String) async throws
}
