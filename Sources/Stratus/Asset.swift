public import Foundation

/// A file held by a record field (CloudKit's `CKAsset`).
///
/// To store a file, put `Asset(fileURL:)` in a field and save the record: the SDK uploads the
/// file first. Records fetched from the server carry assets whose ``fileURL`` is a local copy that
/// the SDK downloaded into its asset cache (see ``Container/Configuration/assetCacheDirectory``),
/// checked against the server's checksum.
public struct Asset: Hashable, Sendable {
    /// The local file: the one you gave, or the downloaded copy. `nil` when the file could not be
    /// downloaded because the server no longer holds it in this record.
    public internal(set) var fileURL: URL?
    /// The lowercase hex SHA-256 of the file's bytes, once uploaded or fetched.
    public internal(set) var fileChecksum: String?
    /// The file's size in bytes, once uploaded or fetched.
    public internal(set) var size: Int64?
    /// Proof of upload, between the upload and the save of the record.
    var receipt: String?
    /// Where the server serves the bytes, on fetched records.
    var downloadURL: String?

    /// An asset for the file at `fileURL`, uploaded when a record holding it is saved.
    public init(fileURL: URL) {
        self.fileURL = fileURL
    }

    init(fileURL: URL?, fileChecksum: String?, size: Int64?, receipt: String? = nil, downloadURL: String? = nil) {
        self.fileURL = fileURL
        self.fileChecksum = fileChecksum
        self.size = size
        self.receipt = receipt
        self.downloadURL = downloadURL
    }

    /// Whether the file still has to be uploaded before a record can hold it.
    var needsUpload: Bool { fileChecksum == nil && receipt == nil }
}
