/// The `type` tag of a record field on the wire.
public enum FieldType: String, Sendable, Hashable, CaseIterable {
    case string = "STRING"
    case int64 = "INT64"
    case double = "DOUBLE"
    /// Milliseconds since 1970-01-01T00:00:00Z.
    case timestamp = "TIMESTAMP"
    /// Base64 text on the wire.
    case bytes = "BYTES"
    case reference = "REFERENCE"
    case asset = "ASSETID"
    case location = "LOCATION"
    case stringList = "STRING_LIST"
    case int64List = "INT64_LIST"
    case doubleList = "DOUBLE_LIST"
    case timestampList = "TIMESTAMP_LIST"
    case bytesList = "BYTES_LIST"
    case referenceList = "REFERENCE_LIST"
    case assetList = "ASSETID_LIST"
    case locationList = "LOCATION_LIST"
    /// An empty list whose element type is not known.
    case unknownList = "UNKNOWN_LIST"

    /// Parses a wire tag, accepting CloudKit's request-side aliases (`ASSET`, `ASSET_LIST`).
    public init?(wireName: String) {
        switch wireName {
        case "ASSET": self = .asset
        case "ASSET_LIST": self = .assetList
        default: self.init(rawValue: wireName)
        }
    }

    /// The list type whose elements have this type; `nil` for list types.
    public var listType: FieldType? {
        switch self {
        case .string: .stringList
        case .int64: .int64List
        case .double: .doubleList
        case .timestamp: .timestampList
        case .bytes: .bytesList
        case .reference: .referenceList
        case .asset: .assetList
        case .location: .locationList
        default: nil
        }
    }

    /// The element type of a list type; `nil` for scalar types and `UNKNOWN_LIST`.
    public var elementType: FieldType? {
        FieldType.allCases.first { $0.listType == self }
    }

    /// Whether this is a list type.
    public var isList: Bool { elementType != nil || self == .unknownList }

    /// A short description of the JSON a value of this type takes, for error messages.
    var expectedJSON: String {
        switch self {
        case .string: "a string"
        case .int64: "a whole number (or a string of one)"
        case .double: "a number"
        case .timestamp: "milliseconds since 1970 as a whole number"
        case .bytes: "base64 text"
        case .reference: "a reference object with recordName"
        case .asset: "an asset object"
        case .location: "a location object with latitude and longitude"
        default: "an array"
        }
    }
}
