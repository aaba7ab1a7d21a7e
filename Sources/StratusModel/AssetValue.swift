/// The value of an asset field (CloudKit's Asset Dictionary).
///
/// A client saves a record with the `receipt` it got from an upload; the server answers with
/// `downloadURL` on fetch. The bytes themselves never travel inside a record.
public struct AssetValue: Hashable, Sendable, JSONDecodable, JSONWritable {
    /// Checksum of the file's bytes.
    public var fileChecksum: String?
    /// Size of the file in bytes.
    public var size: Int64?
    /// Checksum of the wrapped key (private database).
    public var referenceChecksum: String?
    /// The key that encrypts the file (private database).
    public var wrappingKey: String?
    /// Proof of upload, needed when saving a record that points at a new asset.
    public var receipt: String?
    /// Where to fetch the bytes; set by the server on fetch.
    public var downloadURL: String?

    /// Creates an asset value.
    public init(
        fileChecksum: String? = nil, size: Int64? = nil, referenceChecksum: String? = nil,
        wrappingKey: String? = nil, receipt: String? = nil, downloadURL: String? = nil
    ) {
        self.fileChecksum = fileChecksum
        self.size = size
        self.referenceChecksum = referenceChecksum
        self.wrappingKey = wrappingKey
        self.receipt = receipt
        self.downloadURL = downloadURL
    }

    public init(json: JSONValue) throws {
        let object = try json.object()
        fileChecksum = try object.decodeIfPresent("fileChecksum")
        size = try object.decodeIfPresent("size")
        referenceChecksum = try object.decodeIfPresent("referenceChecksum")
        wrappingKey = try object.decodeIfPresent("wrappingKey")
        receipt = try object.decodeIfPresent("receipt")
        downloadURL = try object.decodeIfPresent("downloadURL")
    }

    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writeMembers(to: &writer)
        writer.endObject()
    }

    /// The asset's keys, inside an object the caller begins and ends (an `assets/rereference`
    /// item adds `recordName` and `fieldName` beside them).
    public func writeMembers(to writer: inout JSONWriter) {
        writer.field("fileChecksum", fileChecksum)
        writer.field("size", size)
        writer.field("referenceChecksum", referenceChecksum)
        writer.field("wrappingKey", wrappingKey)
        writer.field("receipt", receipt)
        writer.field("downloadURL", downloadURL)
    }
}
