/// A position in a change feed (CloudKit's `CKServerChangeToken`).
///
/// Tokens are opaque: store them as they come, for instance in the same transaction as the changes
/// they follow, and hand them back to read on from there. They are `Codable`, encoding as a string.
public struct ServerChangeToken: Hashable, Sendable, Codable, CustomStringConvertible {
    /// The token as the server wrote it.
    let rawValue: String

    package init(rawValue: String) { self.rawValue = rawValue }

    public init(from decoder: any Decoder) throws {
        rawValue = try decoder.singleValueContainer().decode(String.self)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }

    public var description: String { "ServerChangeToken(\(rawValue.prefix(12))…)" }
}
