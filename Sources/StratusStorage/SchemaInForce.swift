public import StratusModel

/// The schema that record writes are checked against, as a write transaction sees it.
///
/// In development, writes extend it (just-in-time schema: an unknown record type or field is
/// added with CloudKit's automatic indexes and default grants); in production they must fit it.
/// A backend loads it at the start of a write transaction and stores it before committing when
/// ``changed`` is set.
public struct SchemaInForce: Sendable {
    /// The schema.
    public private(set) var schema: Schema
    /// Whether writes may add types and fields (development).
    public let evolves: Bool
    /// Whether writes added anything.
    public private(set) var changed = false

    /// Wraps the schema of an environment.
    public init(_ schema: Schema, environment: ContainerEnvironment) {
        self.schema = schema
        evolves = environment == .development
    }

    /// Checks a record's type and fields, extending the schema where it evolves. Returns why the
    /// record does not fit, naming the type or field and the rule.
    mutating func admit(recordType: String, fields: [String: FieldValue]) -> String? {
        // Shares are CloudKit's own records: the app's schema does not describe them.
        guard recordType != ShareKeys.recordType else { return nil }
        let environment = evolves ? "development" : "production"
        var type = schema.recordTypes[recordType]
        if type == nil {
            guard evolves else { return "record type '\(recordType)' is not in the production schema" }
            type = RecordTypeSchema()
        }
        var definition = type!
        // Reserved fields (a record's place in a hierarchy) are storage's own.
        for (name, value) in fields.sorted(by: { $0.key < $1.key }) where !RecordHierarchy.isReserved(name) {
            if let field = definition.fields[name] {
                guard value.type == field.type || (value.type == .unknownList && field.type.isList) else {
                    return "field '\(name)' of record type '\(recordType)' is \(field.type.rawValue) in the \(environment) "
                        + "schema; the value is \(value.type.rawValue)"
                }
            } else {
                guard evolves else {
                    return "field '\(name)' is not in record type '\(recordType)' of the production schema"
                }
                // An empty list of unknown type says nothing about the field's type yet.
                guard value.type != .unknownList else { continue }
                definition.fields[name] = FieldSchema(type: value.type, indexes: .automatic(for: value.type))
            }
        }
        if definition != schema.recordTypes[recordType] {
            schema.recordTypes[recordType] = definition
            changed = true
        }
        return nil
    }
}
