/// Who changed a record and when (the `created` and `modified` dictionaries).
public struct RecordStamp: Hashable, Sendable, JSONDecodable, JSONWritable {
    /// Milliseconds since 1970.
    public var timestamp: Int64
    /// The record name of the user who made the change.
    public var userRecordName: String
    /// The device that made the change, when the client said which one it is (on the wire
    /// `deviceID` is always present, and empty when the client did not say).
    public var deviceID: String?

    /// Creates a stamp.
    public init(timestamp: Int64, userRecordName: String, deviceID: String? = nil) {
        self.timestamp = timestamp
        self.userRecordName = userRecordName
        self.deviceID = deviceID
    }

    public init(json: JSONValue) throws {
        let object = try json.object()
        timestamp = try object.decode("timestamp")
        userRecordName = try object.decode("userRecordName")
        deviceID = try object.decodeIfPresent("deviceID").flatMap { (id: String) in id.isEmpty ? nil : id }
    }

    public func write(to writer: inout JSONWriter) {
        // Keys encoded once: every record of a feed page writes two stamps.
        writer.beginObject()
        writer.key(Self.timestampKey)
        writer.int(timestamp)
        writer.key(Self.userRecordNameKey)
        writer.string(userRecordName)
        // Always present, as Apple writes it; empty when the writer named no device.
        writer.key(Self.deviceIDKey)
        writer.string(deviceID ?? "")
        writer.endObject()
    }

    private static let timestampKey = JSONKey("timestamp")
    private static let userRecordNameKey = JSONKey("userRecordName")
    private static let deviceIDKey = JSONKey("deviceID")
}
