public import Foundation

/// The value of one record field, with its type.
///
/// On the wire a field is `{"value": …, "type": "…"}`. The type tag is optional in requests, as in
/// CloudKit: when it is missing the type is inferred from the JSON (string → `STRING`, whole
/// number or Boolean → `INT64`, other number → `DOUBLE`, object with `latitude` → `LOCATION`, with
/// `recordName` → `REFERENCE`, with `fileChecksum` or `receipt` → `ASSETID`, array → list of the
/// first element's type). Bytes and timestamps cannot be inferred and need their tag.
public enum FieldValue: Hashable, Sendable {
    case string(String)
    case int64(Int64)
    case double(Double)
    /// Milliseconds since 1970-01-01T00:00:00Z.
    case timestamp(Int64)
    case bytes(Data)
    // References, assets and locations are boxed (`indirect`): each is several times the size of
    // the other cases, and a value is as large as its largest case, so unboxed every string or
    // number a record holds would be copied at that size.
    indirect case reference(Reference)
    indirect case asset(AssetValue)
    indirect case location(Location)
    /// A list; `elementType` is `nil` only for an empty list of unknown type.
    case list(elementType: FieldType?, [FieldValue])

    /// The wire type of this value.
    public var type: FieldType {
        switch self {
        case .string: .string
        case .int64: .int64
        case .double: .double
        case .timestamp: .timestamp
        case .bytes: .bytes
        case .reference: .reference
        case .asset: .asset
        case .location: .location
        case .list(let elementType, _): elementType?.listType ?? .unknownList
        }
    }

    /// The scalar values this value holds: itself, or a list's elements.
    public var elements: [FieldValue] {
        if case .list(_, let values) = self { return values }
        return [self]
    }

    /// The text a `STRING` or `STRING_LIST` holds; empty for other types.
    public var strings: [String] {
        switch self {
        case .string(let text): [text]
        case .list(_, let values): values.flatMap(\.strings)
        default: []
        }
    }

    /// The references this value holds: itself for a `REFERENCE`, the elements of a
    /// `REFERENCE_LIST`, none otherwise.
    public var references: [Reference] {
        elements.compactMap { if case .reference(let reference) = $0 { reference } else { nil } }
    }

    /// The value with each asset (itself, or a list's elements) replaced by `transform`'s result.
    public func mappingAssets(_ transform: (AssetValue) throws -> AssetValue) rethrows -> FieldValue {
        switch self {
        case .asset(let asset): return .asset(try transform(asset))
        case .list(let elementType, let values) where elementType == .asset:
            return .list(elementType: elementType, try values.map { try $0.mappingAssets(transform) })
        default: return self
        }
    }

    /// Writes `{"value": …, "type": "…"}`. With `numbersAsStrings`, INT64 and DOUBLE values are
    /// written as JSON strings so that JavaScript clients keep 64-bit precision.
    public func write(to writer: inout JSONWriter, numbersAsStrings: Bool) {
        writer.beginObject()
        writer.key("value")
        writeValue(to: &writer, numbersAsStrings: numbersAsStrings)
        writer.key("type")
        writer.string(type.rawValue)
        writer.endObject()
    }

    func writeValue(to writer: inout JSONWriter, numbersAsStrings: Bool) {
        switch self {
        case .string(let value): writer.string(value)
        case .int64(let value): numbersAsStrings ? writer.string(String(value)) : writer.int(value)
        case .double(let value): numbersAsStrings ? writer.string(String(value)) : writer.double(value)
        case .timestamp(let value): writer.int(value)
        case .bytes(let value): writer.string(value.base64EncodedString())
        case .reference(let value): value.write(to: &writer)
        case .asset(let value): value.write(to: &writer)
        case .location(let value): value.write(to: &writer)
        case .list(_, let values):
            writer.beginArray()
            for value in values { value.writeValue(to: &writer, numbersAsStrings: numbersAsStrings) }
            writer.endArray()
        }
    }
}

extension FieldValue: JSONWritable {
    public func write(to writer: inout JSONWriter) { write(to: &writer, numbersAsStrings: false) }
}

extension FieldValue: JSONDecodable {
    /// Decodes `{"value": …, "type": "…"}`. A `null` value is an error here; see ``FieldSlot``
    /// for the request form where `null` removes a field.
    public init(json: JSONValue) throws {
        guard let value = try Self.decodeSlot(json) else {
            throw JSONDecodingError(.missing, "", at: [.key("value")])
        }
        self = value
    }

    /// Decodes a field dictionary; `nil` for `{"value": null}`.
    static func decodeSlot(_ json: JSONValue) throws -> FieldValue? {
        let object = try json.object()
        guard let value = object["value"] else { return nil }
        return try FieldValue(value: value, typeTag: object.decodeIfPresent("type"))
    }

    /// The value of a field dictionary from its `value` (not `null`) and its `type` tag, inferred
    /// from the JSON when the tag is absent; errors name `value` or `type`.
    public init(value: JSONValue, typeTag tag: String?) throws {
        guard let tag else {
            self = try withJSONPath(.key("value")) { try Self.infer(value) }
            return
        }
        guard let type = FieldType(wireName: tag) else {
            let reason = tag.hasPrefix("ENCRYPTED_")
                ? "type \(tag) is not supported: Stratus stores fields unencrypted"
                : "unknown field type \(tag); expected one of " + FieldType.allCases.map(\.rawValue).joined(separator: ", ")
            throw JSONDecodingError(.invalid, reason, at: [.key("type")])
        }
        self = try withJSONPath(.key("value")) { try Self.decode(value, as: type) }
    }

    private static func decode(_ value: JSONValue, as type: FieldType) throws -> FieldValue {
        guard type.isList else { return try scalar(value, as: type) }
        guard case .array(let elements) = value else { throw JSONDecodingError(.wrongType, "an array for type \(type.rawValue)") }
        guard let elementType = type.elementType else {
            guard elements.isEmpty else {
                throw JSONDecodingError(.invalid, "UNKNOWN_LIST must be empty; give the element type")
            }
            return .list(elementType: nil, [])
        }
        var values: [FieldValue] = []
        values.reserveCapacity(elements.count)
        for (index, element) in elements.enumerated() {
            values.append(try withJSONPath(.index(index)) { try scalar(element, as: elementType) })
        }
        return .list(elementType: elementType, values)
    }

    private static func scalar(_ value: JSONValue, as type: FieldType) throws -> FieldValue {
        switch (type, value) {
        case (.string, .string(let string)): return .string(string)
        case (.int64, .integer(let integer)): return .int64(integer)
        case (.int64, .bool(let flag)): return .int64(flag ? 1 : 0)
        case (.int64, .string(let text)) where Int64(text) != nil: return .int64(Int64(text)!)
        case (.double, .integer(let integer)): return .double(Double(integer))
        case (.double, .double(let double)): return .double(double)
        case (.double, .string(let text)) where Double(text)?.isFinite == true: return .double(Double(text)!)
        case (.timestamp, .integer(let integer)): return .timestamp(integer)
        case (.timestamp, .double(let double)) where abs(double) < 9.2e18: return .timestamp(Int64(double.rounded()))
        case (.timestamp, .string(let text)) where Int64(text) != nil: return .timestamp(Int64(text)!)
        case (.bytes, .string(let text)) where Data(base64Encoded: text) != nil: return .bytes(Data(base64Encoded: text)!)
        case (.reference, _): return .reference(try Reference(json: value))
        case (.asset, _): return .asset(try AssetValue(json: value))
        case (.location, _): return .location(try Location(json: value))
        default:
            throw JSONDecodingError(
                .invalid, type.isList ? "lists cannot contain lists" : "must be \(type.expectedJSON) for type \(type.rawValue)")
        }
    }

    private static func infer(_ value: JSONValue) throws -> FieldValue {
        guard case .array(let elements) = value else { return try inferScalar(value) }
        var values: [FieldValue] = []
        values.reserveCapacity(elements.count)
        var elementType: FieldType?
        for (index, element) in elements.enumerated() {
            var inferred = try withJSONPath(.index(index)) { try inferScalar(element) }
            if elementType == .double, case .int64(let integer) = inferred { inferred = .double(Double(integer)) }
            if elementType == .int64, case .double = inferred {
                // Whole numbers before the first fraction become doubles: [1, 2.5] is a DOUBLE_LIST.
                values = values.map { if case .int64(let integer) = $0 { .double(Double(integer)) } else { $0 } }
                elementType = .double
            }
            if let elementType, inferred.type != elementType {
                throw JSONDecodingError(
                    .invalid,
                    "list elements must all have one type; found \(elementType.rawValue) and \(inferred.type.rawValue)")
            }
            elementType = inferred.type
            values.append(inferred)
        }
        return .list(elementType: elementType, values)
    }

    private static func inferScalar(_ value: JSONValue) throws -> FieldValue {
        switch value {
        case .string(let string): return .string(string)
        case .integer(let integer): return .int64(integer)
        case .double(let double): return .double(double)
        case .bool(let flag): return .int64(flag ? 1 : 0)
        case .object(let members):
            if members["latitude"] != nil { return try scalar(value, as: .location) }
            // An asset dictionary first: the items `assets/rereference` answers carry `recordName`
            // beside the asset's keys, and clients save them as they are.
            if members["fileChecksum"] != nil || members["receipt"] != nil { return try scalar(value, as: .asset) }
            if members["recordName"] != nil { return try scalar(value, as: .reference) }
            throw JSONDecodingError(.invalid, "cannot infer the type of this object; give a type tag")
        case .array:
            throw JSONDecodingError(.invalid, "lists cannot contain lists")
        case .null:
            throw JSONDecodingError(.invalid, "cannot infer the type of null; give a value")
        }
    }
}

/// A field in a request: a value, or `null` to remove the field (`{"value": null}`).
public struct FieldSlot: JSONDecodable, Sendable, Hashable {
    /// The new value; `nil` removes the field.
    public var value: FieldValue?
    /// Whether the request named the value's type; when it did not, the type was inferred from the
    /// JSON (see ``FieldValue/conformed(to:)``).
    public var isTyped: Bool

    /// Creates a slot.
    public init(value: FieldValue?, isTyped: Bool = true) {
        self.value = value
        self.isTyped = isTyped
    }

    public init(json: JSONValue) throws {
        value = try FieldValue.decodeSlot(json)
        isTyped = (try? json.object())?["type"] != nil
    }
}

extension FieldValue {
    /// This value, inferred from JSON without a type tag, read as `type` where its JSON allows: a
    /// whole number as a `DOUBLE` or a `TIMESTAMP` (milliseconds), a string as `BYTES` (base64), and
    /// lists alike, an empty list as an empty list of `type`. Anything else is returned unchanged, for
    /// the schema check to judge. This is how an untyped save into a field the schema already knows
    /// takes the field's type, as Apple's reference says `type` is optional.
    public func conformed(to type: FieldType) -> FieldValue {
        if let elementType = type.elementType, case .list(_, let elements) = self {
            let conformed = elements.map { $0.conformed(to: elementType) }
            guard conformed.allSatisfy({ $0.type == elementType }) else { return self }
            return .list(elementType: elementType, conformed)
        }
        switch (self, type) {
        case (.int64(let number), .double): return .double(Double(number))
        case (.int64(let milliseconds), .timestamp): return .timestamp(milliseconds)
        case (.double(let number), .timestamp) where number.rounded() == number && abs(number) < 9.2e18:
            return .timestamp(Int64(number))
        case (.string(let text), .bytes): return Data(base64Encoded: text).map { .bytes($0) } ?? self
        default: return self
        }
    }
}
