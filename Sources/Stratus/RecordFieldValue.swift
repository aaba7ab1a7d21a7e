public import Foundation
@_exported public import struct StratusModel.Location

/// The value of a record field, with its type (CloudKit's field types).
///
/// Most code never names this type: ``Record``'s subscript takes and gives Swift values (`String`,
/// `Int64`, `Date`, `[String]`, ``Asset``…) through ``RecordValue``. Lists hold one type of
/// element, so an empty list still has a type.
public enum RecordFieldValue: Hashable, Sendable {
    case string(String)
    case int64(Int64)
    case double(Double)
    /// A point in time; stored with millisecond precision.
    case date(Date)
    case bytes(Data)
    // Boxed (`indirect`) for the reason `FieldValue`'s are: each is several times the size of the
    // other cases.
    indirect case reference(Reference)
    indirect case asset(Asset)
    indirect case location(Location)
    case stringList([String])
    case int64List([Int64])
    case doubleList([Double])
    case dateList([Date])
    case bytesList([Data])
    case referenceList([Reference])
    case assetList([Asset])
    case locationList([Location])

    /// The value as the Swift type ``Record``'s subscript returns: `String`, `Int64`, `Double`,
    /// `Date`, `Data`, ``Reference``, ``Asset``, `Location`, or an array of one of them.
    public var swiftValue: any RecordValue {
        switch self {
        case .string(let value): value
        case .int64(let value): value
        case .double(let value): value
        case .date(let value): value
        case .bytes(let value): value
        case .reference(let value): value
        case .asset(let value): value
        case .location(let value): value
        case .stringList(let value): value
        case .int64List(let value): value
        case .doubleList(let value): value
        case .dateList(let value): value
        case .bytesList(let value): value
        case .referenceList(let value): value
        case .assetList(let value): value
        case .locationList(let value): value
        }
    }

    /// The assets this value holds: itself, or a list's elements.
    var assets: [Asset] {
        switch self {
        case .asset(let asset): [asset]
        case .assetList(let assets): assets
        default: []
        }
    }

    /// The value with each asset replaced by `transform`'s result.
    func mappingAssets(_ transform: (Asset) throws -> Asset) rethrows -> RecordFieldValue {
        switch self {
        case .asset(let asset): .asset(try transform(asset))
        case .assetList(let assets): .assetList(try assets.map(transform))
        default: self
        }
    }
}

/// A Swift type a record field can hold (CloudKit's `CKRecordValueProtocol`).
///
/// `String`, `Int`, `Int64`, `Int32`, `Double`, `Float`, `Bool` (stored as `INT64` 0 or 1, as
/// CloudKit does), `Date`, `Data`, ``Reference``, ``Asset``, `Location`, ``RecordFieldValue``
/// and arrays of the element types conform.
public protocol RecordValue: Sendable {
    /// This value as a field value.
    var recordFieldValue: RecordFieldValue { get }
    /// Converts a field value; `nil` when the field holds a value this type cannot represent.
    init?(recordFieldValue: RecordFieldValue)
}

/// A ``RecordValue`` that can also be the element of a list field.
public protocol RecordListElement: RecordValue {
    /// A list of these elements as a field value.
    static func listFieldValue(_ elements: [Self]) -> RecordFieldValue
    /// The elements of a list field value; `nil` when the list holds another type.
    static func elements(of value: RecordFieldValue) -> [Self]?
}

extension RecordFieldValue: RecordValue {
    public var recordFieldValue: RecordFieldValue { self }
    public init?(recordFieldValue: RecordFieldValue) { self = recordFieldValue }
}

extension Array: RecordValue where Element: RecordListElement {
    public var recordFieldValue: RecordFieldValue { Element.listFieldValue(self) }
    /// Reads a list of `Element`s; an empty list of any type reads as empty.
    public init?(recordFieldValue: RecordFieldValue) {
        if recordFieldValue.isEmptyList {
            self = []
            return
        }
        guard let elements = Element.elements(of: recordFieldValue) else { return nil }
        self = elements
    }
}

extension String: RecordListElement {
    public var recordFieldValue: RecordFieldValue { .string(self) }
    public init?(recordFieldValue: RecordFieldValue) {
        guard case .string(let value) = recordFieldValue else { return nil }
        self = value
    }
    public static func listFieldValue(_ elements: [String]) -> RecordFieldValue { .stringList(elements) }
    public static func elements(of value: RecordFieldValue) -> [String]? {
        guard case .stringList(let elements) = value else { return nil }
        return elements
    }
}

extension Int64: RecordListElement {
    public var recordFieldValue: RecordFieldValue { .int64(self) }
    public init?(recordFieldValue: RecordFieldValue) {
        guard case .int64(let value) = recordFieldValue else { return nil }
        self = value
    }
    public static func listFieldValue(_ elements: [Int64]) -> RecordFieldValue { .int64List(elements) }
    public static func elements(of value: RecordFieldValue) -> [Int64]? {
        guard case .int64List(let elements) = value else { return nil }
        return elements
    }
}

/// Whole numbers of other widths go through `Int64`; reading fails when the value does not fit.
extension BinaryInteger where Self: RecordListElement {
    public var recordFieldValue: RecordFieldValue { .int64(Int64(self)) }
    public init?(recordFieldValue: RecordFieldValue) {
        guard let value = Int64(recordFieldValue: recordFieldValue), let exact = Self(exactly: value) else { return nil }
        self = exact
    }
    public static func listFieldValue(_ elements: [Self]) -> RecordFieldValue { .int64List(elements.map { Int64($0) }) }
    public static func elements(of value: RecordFieldValue) -> [Self]? {
        guard case .int64List(let elements) = value else { return nil }
        let converted = elements.compactMap { Self(exactly: $0) }
        return converted.count == elements.count ? converted : nil
    }
}

extension Int: RecordListElement {}
extension Int32: RecordListElement {}

extension Bool: RecordListElement {
    public var recordFieldValue: RecordFieldValue { .int64(self ? 1 : 0) }
    public init?(recordFieldValue: RecordFieldValue) {
        guard case .int64(let value) = recordFieldValue else { return nil }
        self = value != 0
    }
    public static func listFieldValue(_ elements: [Bool]) -> RecordFieldValue { .int64List(elements.map { $0 ? 1 : 0 }) }
    public static func elements(of value: RecordFieldValue) -> [Bool]? {
        guard case .int64List(let elements) = value else { return nil }
        return elements.map { $0 != 0 }
    }
}

extension Double: RecordListElement {
    public var recordFieldValue: RecordFieldValue { .double(self) }
    /// Reads `DOUBLE` fields, and `INT64` ones as their value.
    public init?(recordFieldValue: RecordFieldValue) {
        switch recordFieldValue {
        case .double(let value): self = value
        case .int64(let value): self = Double(value)
        default: return nil
        }
    }
    public static func listFieldValue(_ elements: [Double]) -> RecordFieldValue { .doubleList(elements) }
    public static func elements(of value: RecordFieldValue) -> [Double]? {
        switch value {
        case .doubleList(let elements): elements
        case .int64List(let elements): elements.map(Double.init)
        default: nil
        }
    }
}

extension Float: RecordValue {
    public var recordFieldValue: RecordFieldValue { .double(Double(self)) }
    public init?(recordFieldValue: RecordFieldValue) {
        guard let value = Double(recordFieldValue: recordFieldValue) else { return nil }
        self = Float(value)
    }
}

extension Date: RecordListElement {
    public var recordFieldValue: RecordFieldValue { .date(self) }
    public init?(recordFieldValue: RecordFieldValue) {
        guard case .date(let value) = recordFieldValue else { return nil }
        self = value
    }
    public static func listFieldValue(_ elements: [Date]) -> RecordFieldValue { .dateList(elements) }
    public static func elements(of value: RecordFieldValue) -> [Date]? {
        guard case .dateList(let elements) = value else { return nil }
        return elements
    }
}

extension Data: RecordListElement {
    public var recordFieldValue: RecordFieldValue { .bytes(self) }
    public init?(recordFieldValue: RecordFieldValue) {
        guard case .bytes(let value) = recordFieldValue else { return nil }
        self = value
    }
    public static func listFieldValue(_ elements: [Data]) -> RecordFieldValue { .bytesList(elements) }
    public static func elements(of value: RecordFieldValue) -> [Data]? {
        guard case .bytesList(let elements) = value else { return nil }
        return elements
    }
}

extension Reference: RecordListElement {
    public var recordFieldValue: RecordFieldValue { .reference(self) }
    public init?(recordFieldValue: RecordFieldValue) {
        guard case .reference(let value) = recordFieldValue else { return nil }
        self = value
    }
    public static func listFieldValue(_ elements: [Reference]) -> RecordFieldValue { .referenceList(elements) }
    public static func elements(of value: RecordFieldValue) -> [Reference]? {
        guard case .referenceList(let elements) = value else { return nil }
        return elements
    }
}

extension Asset: RecordListElement {
    public var recordFieldValue: RecordFieldValue { .asset(self) }
    public init?(recordFieldValue: RecordFieldValue) {
        guard case .asset(let value) = recordFieldValue else { return nil }
        self = value
    }
    public static func listFieldValue(_ elements: [Asset]) -> RecordFieldValue { .assetList(elements) }
    public static func elements(of value: RecordFieldValue) -> [Asset]? {
        guard case .assetList(let elements) = value else { return nil }
        return elements
    }
}

extension Location: RecordListElement {
    public var recordFieldValue: RecordFieldValue { .location(self) }
    public init?(recordFieldValue: RecordFieldValue) {
        guard case .location(let value) = recordFieldValue else { return nil }
        self = value
    }
    public static func listFieldValue(_ elements: [Location]) -> RecordFieldValue { .locationList(elements) }
    public static func elements(of value: RecordFieldValue) -> [Location]? {
        guard case .locationList(let elements) = value else { return nil }
        return elements
    }
}
