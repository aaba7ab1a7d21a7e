/// An error for a whole request or for one item of it (CloudKit's Record Fetch Error Dictionary,
/// also used for zones and for request-level failures).
public struct ErrorDictionary: Hashable, Sendable, JSONDecodable, JSONWritable {
    /// The record the error is about, for per-record errors.
    public var recordName: String?
    /// The zone the error is about, for per-zone errors.
    public var zoneID: ZoneID?
    /// The subscription the error is about, for per-subscription errors.
    public var subscriptionID: String?
    /// A human-readable explanation naming the bad input and the rule it breaks.
    public var reason: String
    /// The machine-readable code.
    public var serverErrorCode: ServerErrorCode
    /// Seconds to wait before retrying; absent means the operation cannot be retried as is.
    public var retryAfter: Int?
    /// A unique identifier for this error, for support and logs.
    public var uuid: String
    /// For `AUTHENTICATION_REQUIRED`: where the user signs in.
    public var redirectURL: String?
    /// For `CONFLICT` and `EXISTS`: the record as the server has it now (a Stratus extension).
    public var serverRecord: RecordDictionary?

    /// The longest `reason` an error carries, in Unicode scalars: a reason may quote a name the
    /// client sent, and the server keeps recent reasons in its request log.
    public static let maxReasonLength = 2_000

    /// `reason`, cut to ``maxReasonLength`` with `…` where it was cut.
    public static func clipped(_ reason: String) -> String {
        guard reason.utf8.count > maxReasonLength else { return reason }
        var scalars = String.UnicodeScalarView()
        scalars.append(contentsOf: reason.unicodeScalars.prefix(maxReasonLength))
        return scalars.count < maxReasonLength ? reason : String(scalars) + "…"
    }

    /// Creates an error dictionary; `reason` is clipped (``clipped(_:)``).
    public init(
        serverErrorCode: ServerErrorCode, reason: String, recordName: String? = nil, zoneID: ZoneID? = nil,
        subscriptionID: String? = nil, retryAfter: Int? = nil, uuid: String, redirectURL: String? = nil,
        serverRecord: RecordDictionary? = nil
    ) {
        self.subscriptionID = subscriptionID
        self.serverErrorCode = serverErrorCode
        self.reason = Self.clipped(reason)
        self.recordName = recordName
        self.zoneID = zoneID
        self.retryAfter = retryAfter
        self.uuid = uuid
        self.redirectURL = redirectURL
        self.serverRecord = serverRecord
    }

    public init(json: JSONValue) throws {
        let object = try json.object()
        recordName = try object.decodeIfPresent("recordName")
        zoneID = try object.decodeIfPresent("zoneID")
        subscriptionID = try object.decodeIfPresent("subscriptionID")
        reason = try object.decodeIfPresent("reason") ?? ""
        serverErrorCode = try object.decode("serverErrorCode")
        retryAfter = try object.decodeIfPresent("retryAfter")
        uuid = try object.decodeIfPresent("uuid") ?? ""
        redirectURL = try object.decodeIfPresent("redirectURL")
        serverRecord = try object.decodeIfPresent("serverRecord")
    }

    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("recordName", recordName)
        writer.field("zoneID", zoneID)
        writer.field("subscriptionID", subscriptionID)
        writer.field("reason", reason)
        writer.field("serverErrorCode", serverErrorCode.rawValue)
        writer.field("retryAfter", retryAfter.map(Int64.init))
        writer.field("uuid", uuid)
        writer.field("redirectURL", redirectURL)
        writer.field("serverRecord", serverRecord)
        writer.endObject()
    }
}
