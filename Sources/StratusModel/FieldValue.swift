import Foundation

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
    case reference(Reference)
    case asset(AssetValue)
    case location(Location)
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

    private func writeValue(to writer: inout JSONWriter, numbersAsStrings: Bool) {
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

extension FieldValue: Decodable {
    private enum CodingKeys: String, CodingKey { case value, type }

    /// Decodes `{"value": …, "type": "…"}`. A `null` value is an error here; see ``FieldSlot``
    /// for the request form where `null` removes a field.
    public init(from decoder: any Decoder) throws {
        guard let value = try FieldSlot(from: decoder).value else {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            throw DecodingError.dataCorruptedError(
                forKey: .value, in: container, debugDescription: "a field value is required")
        }
        self = value
    }

    static func decode(from decoder: any Decoder) throws -> FieldValue? {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        guard container.contains(.value), try !container.decodeNil(forKey: .value) else { return nil }
        if let tag = try container.decodeIfPresent(String.self, forKey: .type) {
            guard let type = FieldType(wireName: tag) else {
                if tag.hasPrefix("ENCRYPTED_") {
                    throw DecodingError.dataCorruptedError(
                        forKey: .type, in: container,
                        debugDescription: "type \(tag) is not supported: Stratus stores fields unencrypted")
                }
                throw DecodingError.dataCorruptedError(
                    forKey: .type, in: container,
                    debugDescription: "unknown field type \(tag); expected one of "
                        + FieldType.allCases.map(\.rawValue).joined(separator: ", "))
            }
            if type.isList {
                var list = try container.nestedUnkeyedContainer(forKey: .value)
                if type == .unknownList {
                    guard list.isAtEnd else {
                        throw DecodingError.dataCorruptedError(
                            in: list, debugDescription: "UNKNOWN_LIST must be empty; give the element type")
                    }
                    return .list(elementType: nil, [])
                }
                let elementType = type.elementType!
                var values: [FieldValue] = []
                values.reserveCapacity(list.count ?? 0)
                while !list.isAtEnd {
                    if let value = fastElement(elementType, &list) {
                        values.append(value)
                    } else {
                        values.append(try decodeScalar(elementType, from: try list.superDecoder()))
                    }
                }
                return .list(elementType: elementType, values)
            }
            if let value = fastScalar(type, container) { return value }
            return try decodeScalar(type, from: try container.superDecoder(forKey: .value))
        }
        return try inferValue(from: try container.superDecoder(forKey: .value))
    }

    /// Decodes the common typed values straight from their container. `nil` sends the value down
    /// the general path, which also accepts the lenient forms and words the errors.
    private static func fastScalar(_ type: FieldType, _ container: KeyedDecodingContainer<CodingKeys>) -> FieldValue? {
        switch type {
        case .string: (try? container.decode(String.self, forKey: .value)).map(FieldValue.string)
        case .int64: (try? container.decode(Int64.self, forKey: .value)).map(FieldValue.int64)
        case .double: (try? container.decode(Double.self, forKey: .value)).map(FieldValue.double)
        case .timestamp: (try? container.decode(Int64.self, forKey: .value)).map(FieldValue.timestamp)
        default: nil
        }
    }

    /// The list-element counterpart of ``fastScalar(_:_:)``; a failed attempt does not consume the element.
    private static func fastElement(_ type: FieldType, _ list: inout any UnkeyedDecodingContainer) -> FieldValue? {
        switch type {
        case .string: (try? list.decode(String.self)).map(FieldValue.string)
        case .int64: (try? list.decode(Int64.self)).map(FieldValue.int64)
        case .double: (try? list.decode(Double.self)).map(FieldValue.double)
        case .timestamp: (try? list.decode(Int64.self)).map(FieldValue.timestamp)
        default: nil
        }
    }

    private static func decodeScalar(_ type: FieldType, from decoder: any Decoder) throws -> FieldValue {
        let single = try decoder.singleValueContainer()
        func mismatch() -> DecodingError {
            DecodingError.dataCorruptedError(
                in: single, debugDescription: "must be \(type.expectedJSON) for type \(type.rawValue)")
        }
        switch type {
        case .string:
            guard let value = try? single.decode(String.self) else { throw mismatch() }
            return .string(value)
        case .int64:
            if let value = try? single.decode(Int64.self) { return .int64(value) }
            if let value = try? single.decode(Bool.self) { return .int64(value ? 1 : 0) }
            if let text = try? single.decode(String.self), let value = Int64(text) { return .int64(value) }
            throw mismatch()
        case .double:
            if let value = try? single.decode(Double.self) { return .double(value) }
            if let text = try? single.decode(String.self), let value = Double(text), value.isFinite {
                return .double(value)
            }
            throw mismatch()
        case .timestamp:
            if let value = try? single.decode(Int64.self) { return .timestamp(value) }
            if let value = try? single.decode(Double.self), value.isFinite,
                abs(value) < 9.2e18
            {
                return .timestamp(Int64(value.rounded()))
            }
            if let text = try? single.decode(String.self), let value = Int64(text) { return .timestamp(value) }
            throw mismatch()
        case .bytes:
            guard let text = try? single.decode(String.self), let data = Data(base64Encoded: text) else {
                throw mismatch()
            }
            return .bytes(data)
        case .reference:
            return .reference(try single.decode(Reference.self))
        case .asset:
            return .asset(try single.decode(AssetValue.self))
        case .location:
            return .location(try single.decode(Location.self))
        default:
            throw DecodingError.dataCorruptedError(
                in: single, debugDescription: "lists cannot contain lists")
        }
    }

    private static func inferValue(from decoder: any Decoder) throws -> FieldValue {
        if var list = try? decoder.unkeyedContainer() {
            var values: [FieldValue] = []
            var elementType: FieldType?
            while !list.isAtEnd {
                var element = try inferScalar(from: try list.superDecoder())
                if elementType == .double, case .int64(let integer) = element { element = .double(Double(integer)) }
                if elementType == .int64, case .double = element {
                    // Whole numbers before the first fraction become doubles: [1, 2.5] is a DOUBLE_LIST.
                    values = values.map { if case .int64(let integer) = $0 { .double(Double(integer)) } else { $0 } }
                    elementType = .double
                }
                if let elementType, element.type != elementType {
                    throw DecodingError.dataCorruptedError(
                        in: list,
                        debugDescription: "list elements must all have one type; found \(elementType.rawValue) "
                            + "and \(element.type.rawValue)")
                }
                elementType = element.type
                values.append(element)
            }
            return .list(elementType: elementType, values)
        }
        return try inferScalar(from: decoder)
    }

    private enum ShapeKeys: String, CodingKey { case latitude, recordName, fileChecksum, receipt }

    private static func inferScalar(from decoder: any Decoder) throws -> FieldValue {
        if let single = try? decoder.singleValueContainer() {
            if let value = try? single.decode(String.self) { return .string(value) }
            if let value = try? single.decode(Int64.self) { return .int64(value) }
            if let value = try? single.decode(Double.self) { return .double(value) }
            if let value = try? single.decode(Bool.self) { return .int64(value ? 1 : 0) }
        }
        if let object = try? decoder.container(keyedBy: ShapeKeys.self) {
            if object.contains(.latitude) { return try decodeScalar(.location, from: decoder) }
            if object.contains(.recordName) { return try decodeScalar(.reference, from: decoder) }
            if object.contains(.fileChecksum) || object.contains(.receipt) {
                return try decodeScalar(.asset, from: decoder)
            }
            throw DecodingError.dataCorrupted(
                .init(
                    codingPath: decoder.codingPath,
                    debugDescription: "cannot infer the type of this object; give a type tag"))
        }
        let single = try decoder.singleValueContainer()
        throw DecodingError.dataCorruptedError(
            in: single, debugDescription: "cannot infer the type of this value; give a type tag")
    }
}

/// A field in a request: a value, or `null` to remove the field (`{"value": null}`).
public struct FieldSlot: Decodable, Sendable, Hashable {
    /// The new value; `nil` removes the field.
    public var value: FieldValue?

    /// Creates a slot.
    public init(value: FieldValue?) { self.value = value }

    public init(from decoder: any Decoder) throws {
        value = try FieldValue.decode(from: decoder)
    }
}
