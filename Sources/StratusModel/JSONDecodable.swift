/// A wire type built from a parsed ``JSONValue``.
public protocol JSONDecodable {
    /// Builds the value, throwing ``JSONDecodingError`` naming the bad part and the rule it breaks.
    init(json: JSONValue) throws
}

extension JSONDecodable {
    /// Parses UTF-8 JSON text and builds the value; with `refusingNullCharacter` (a request's text),
    /// a string holding U+0000 is refused (``JSONReader/init(bytes:refusingNullCharacter:)``).
    public init(jsonBytes: [UInt8], refusingNullCharacter: Bool = false) throws {
        try self.init(json: JSONValue.parse(jsonBytes, refusingNullCharacter: refusingNullCharacter))
    }
}

/// Why a JSON value does not make a wire value: where (a path such as
/// `operations[2].record.fields.age.value`) and which rule it breaks.
public struct JSONDecodingError: Error, Hashable, Sendable, CustomStringConvertible {
    /// One step of a path.
    public enum PathComponent: Hashable, Sendable {
        case key(String)
        case index(Int)
    }

    /// How the value fails.
    public enum Kind: Hashable, Sendable {
        /// A required member is absent or null.
        case missing
        /// The JSON type is wrong; the reason names the expected one ("a string").
        case wrongType
        /// The value breaks a rule; the reason says which.
        case invalid
    }

    /// Where, from the document's root.
    public var path: [PathComponent]
    /// How.
    public var kind: Kind
    /// The expected type or the rule.
    public var reason: String

    /// Creates an error at `path`.
    public init(_ kind: Kind, _ reason: String, at path: [PathComponent] = []) {
        self.kind = kind
        self.reason = reason
        self.path = path
    }

    /// The same error one level further from the root.
    @usableFromInline
    func prefixed(_ component: PathComponent) -> JSONDecodingError {
        var error = self
        error.path.insert(component, at: 0)
        return error
    }

    /// The path as text: `operations[2].record.fields`.
    public var pathDescription: String {
        let text = Self.text(of: path)
        return text.isEmpty ? "the request body" : text
    }

    /// `path` as text, `operations[2].record.fields`; empty for the root.
    static func text(of path: [PathComponent]) -> String {
        var text = ""
        for component in path {
            switch component {
            case .index(let index): text += "[\(index)]"
            case .key(let key): text += text.isEmpty ? key : ".\(key)"
            }
        }
        return text
    }

    public var description: String {
        switch kind {
        case .missing: "\(pathDescription) is required"
        case .wrongType: "\(pathDescription) must be \(reason)"
        case .invalid: "\(pathDescription): \(reason)"
        }
    }
}

/// Runs `body`, adding `component` to the path of any ``JSONDecodingError`` it throws. Paths are
/// built only when something fails, so decoding valid input costs nothing extra.
@inlinable
public func withJSONPath<T>(_ component: JSONDecodingError.PathComponent, _ body: () throws -> T) throws -> T {
    do {
        return try body()
    } catch let error as JSONDecodingError {
        throw error.prefixed(component)
    }
}

/// A JSON object's members, with typed access.
public struct JSONObject: Sendable {
    /// The members.
    public let members: JSONMembers

    /// The member `key`, or `nil` when absent or null.
    public subscript(key: String) -> JSONValue? {
        guard let value = members[key], value != .null else { return nil }
        return value
    }

    /// Decodes a required member.
    public func decode<T: JSONDecodable>(_ key: String, as type: T.Type = T.self) throws -> T {
        guard let value = self[key] else { throw JSONDecodingError(.missing, "", at: [.key(key)]) }
        return try withJSONPath(.key(key)) { try T(json: value) }
    }

    /// Decodes an optional member; absent and null give `nil`.
    public func decodeIfPresent<T: JSONDecodable>(_ key: String, as type: T.Type = T.self) throws -> T? {
        guard let value = self[key] else { return nil }
        return try withJSONPath(.key(key)) { try T(json: value) }
    }
}

extension JSONValue {
    /// This value as an object, or a `wrongType` error.
    public func object() throws -> JSONObject {
        guard case .object(let members) = self else { throw JSONDecodingError(.wrongType, "an object") }
        return JSONObject(members: members)
    }
}

extension String: JSONDecodable {
    public init(json: JSONValue) throws {
        guard case .string(let value) = json else { throw JSONDecodingError(.wrongType, "a string") }
        self = value
    }
}

extension Bool: JSONDecodable {
    public init(json: JSONValue) throws {
        guard case .bool(let value) = json else { throw JSONDecodingError(.wrongType, "true or false") }
        self = value
    }
}

extension Int64: JSONDecodable {
    public init(json: JSONValue) throws {
        guard case .integer(let value) = json else { throw JSONDecodingError(.wrongType, "a whole number") }
        self = value
    }
}

extension Int: JSONDecodable {
    public init(json: JSONValue) throws {
        guard case .integer(let value) = json, let int = Int(exactly: value) else {
            throw JSONDecodingError(.wrongType, "a whole number")
        }
        self = int
    }
}

extension Double: JSONDecodable {
    public init(json: JSONValue) throws {
        switch json {
        case .integer(let value): self = Double(value)
        case .double(let value): self = value
        default: throw JSONDecodingError(.wrongType, "a number")
        }
    }
}

extension Dictionary: JSONDecodable where Key == String, Value: JSONDecodable {
    public init(json: JSONValue) throws {
        let members = try json.object().members
        self = [:]
        reserveCapacity(members.count)
        for (key, value) in members {
            self[key] = try withJSONPath(.key(key)) { try Value(json: value) }
        }
    }
}

extension Array: JSONDecodable where Element: JSONDecodable {
    public init(json: JSONValue) throws {
        guard case .array(let elements) = json else { throw JSONDecodingError(.wrongType, "an array") }
        self = []
        reserveCapacity(elements.count)
        for (index, element) in elements.enumerated() {
            append(try withJSONPath(.index(index)) { try Element(json: element) })
        }
    }
}

extension JSONValue: JSONDecodable {
    /// The value itself, for answers read without a type.
    public init(json: JSONValue) { self = json }
}
