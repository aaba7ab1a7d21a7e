/// Index options of a field.
public struct FieldIndexes: OptionSet, Hashable, Sendable {
    /// The options as bits.
    public let rawValue: Int

    /// Creates options from their bits.
    public init(rawValue: Int) {
        self.rawValue = rawValue
    }

    /// An equality index: the field can be used in `EQUALS`, `IN` and similar filters.
    public static let queryable = FieldIndexes(rawValue: 1)
    /// A range index: the field can be sorted on and compared with `<`, `>` and the like.
    public static let sortable = FieldIndexes(rawValue: 2)
    /// A full-text index: the field can be searched for tokens.
    public static let searchable = FieldIndexes(rawValue: 4)

    /// Every option with its schema-language keyword, in the order the language prints them.
    static let keywords: [(option: FieldIndexes, keyword: String)] = [
        (.queryable, "QUERYABLE"), (.searchable, "SEARCHABLE"), (.sortable, "SORTABLE"),
    ]

    /// The option spelled `keyword` (upper case), or `nil`.
    init?(keyword: String) {
        guard let match = Self.keywords.first(where: { $0.keyword == keyword }) else { return nil }
        self = match.option
    }

    /// The keywords of the options in this set, in printing order.
    public var keywordList: [String] { Self.keywords.filter { contains($0.option) }.map(\.keyword) }

    /// The indexes CloudKit's development environment gives a new field of this type automatically
    /// (just-in-time schema): every index the type supports. Strings get QUERYABLE, SORTABLE and
    /// SEARCHABLE; string lists QUERYABLE and SEARCHABLE; INT64, DOUBLE and TIMESTAMP QUERYABLE and
    /// SORTABLE; their lists, REFERENCE, LOCATION and their lists QUERYABLE; BYTES, ASSET and their
    /// lists none.
    public static func automatic(for type: FieldType) -> FieldIndexes {
        supported(by: type)
    }

    /// The options a field of `type` may carry.
    static func supported(by type: FieldType) -> FieldIndexes {
        switch type {
        case .string: [.queryable, .sortable, .searchable]
        case .stringList: [.queryable, .searchable]
        case .int64, .double, .timestamp: [.queryable, .sortable]
        case .int64List, .doubleList, .timestampList, .reference, .referenceList, .location, .locationList: .queryable
        case .bytes, .bytesList, .asset, .assetList, .unknownList: []
        }
    }

    /// Which options a field of `type` may carry, for error messages.
    static func rule(for type: FieldType) -> String {
        let allowed = supported(by: type).keywordList
        return allowed.isEmpty
            ? "\(type.schemaName) fields take no index options"
            : "\(type.schemaName) fields take only " + allowed.joined(separator: ", ")
    }
}

/// What a role may do with the records of a type in the public database.
public enum SchemaPermission: String, Sendable, Hashable, CaseIterable, Comparable {
    /// Fetch and query records.
    case read = "READ"
    /// Save new records.
    case create = "CREATE"
    /// Change and delete existing records.
    case write = "WRITE"

    /// Orders permissions as declared: READ, CREATE, WRITE.
    public static func < (lhs: SchemaPermission, rhs: SchemaPermission) -> Bool {
        lhs.rank < rhs.rank
    }

    private var rank: Int {
        switch self {
        case .read: 0
        case .create: 1
        case .write: 2
        }
    }
}

extension SchemaPermission: WireEnum {}

/// One permission given to one role on a record type (`GRANT READ TO "_world"`).
public struct SchemaGrant: Hashable, Sendable, Comparable {
    /// What the role may do.
    public var permission: SchemaPermission
    /// The role: `_creator`, `_icloud`, `_world` or one created with `CREATE ROLE`.
    public var role: String

    /// Grants `permission` to `role`.
    public init(_ permission: SchemaPermission, to role: String) {
        self.permission = permission
        self.role = role
    }

    /// Orders grants by role, then by permission.
    public static func < (lhs: SchemaGrant, rhs: SchemaGrant) -> Bool {
        (lhs.role, lhs.permission) < (rhs.role, rhs.permission)
    }
}

/// The type and indexes of one field of a record type.
public struct FieldSchema: Hashable, Sendable {
    /// The field's type.
    public var type: FieldType
    /// The field's indexes.
    public var indexes: FieldIndexes

    /// Creates a field schema.
    public init(type: FieldType, indexes: FieldIndexes) {
        self.type = type
        self.indexes = indexes
    }
}

/// The fields and permissions of one record type.
public struct RecordTypeSchema: Hashable, Sendable {
    /// The fields by name, system fields included.
    public var fields: [String: FieldSchema]
    /// The permissions roles have on records of this type in the public database.
    public var grants: Set<SchemaGrant>

    /// Creates a record type, adding any system field `fields` lacks (without indexes).
    public init(fields: [String: FieldSchema] = [:], grants: Set<SchemaGrant> = RecordTypeSchema.defaultGrants) {
        self.fields = fields
        for (name, type) in Self.systemFields where fields[name] == nil {
            self.fields[name] = FieldSchema(type: type, indexes: [])
        }
        self.grants = grants
    }

    /// The grants CloudKit gives a new record type: WRITE to `_creator`, CREATE to `_icloud`,
    /// READ to `_world`.
    public static let defaultGrants: Set<SchemaGrant> = [
        SchemaGrant(.write, to: "_creator"), SchemaGrant(.create, to: "_icloud"), SchemaGrant(.read, to: "_world"),
    ]

    /// The fields every record type has, with their fixed types.
    public static let systemFields: [String: FieldType] = [
        "___createTime": .timestamp, "___createdBy": .reference, "___etag": .string,
        "___modTime": .timestamp, "___modifiedBy": .reference, "___recordID": .reference,
    ]

    /// The most fields a record type may declare, system fields not counted.
    static let maxFields = 256

    /// The rule a field name breaks, or `nil`; system field names are valid.
    static func violation(ofFieldName name: String) -> String? {
        systemFields[name] == nil ? Schema.violation(ofName: name) : nil
    }

    /// The rule a field named `name` of `type` breaks when `name` is a system field of another
    /// type, or `nil`.
    static func violation(ofSystemField name: String, type: FieldType) -> String? {
        guard let required = systemFields[name], required != type else { return nil }
        return "system field '\(name)' must be \(required.schemaName)"
    }
}

/// A container's schema: its record types and the roles its grants may name.
///
/// Read and written as CloudKit Schema Language text (``init(parsing:)``, ``text``) and as JSON.
public struct Schema: Hashable, Sendable {
    /// The roles created with `CREATE ROLE`; the implicit `_creator`, `_icloud` and `_world` are
    /// not listed.
    public var roles: Set<String>
    /// The record types by name.
    public var recordTypes: [String: RecordTypeSchema]

    /// Creates a schema.
    public init(roles: Set<String> = [], recordTypes: [String: RecordTypeSchema] = [:]) {
        self.roles = roles
        self.recordTypes = recordTypes
    }

    /// The roles every schema has.
    static let implicitRoles: Set<String> = ["_creator", "_icloud", "_world"]

    /// The rule a record type, field or role name breaks, or `nil` when it is valid: a letter first,
    /// then printable ASCII without quotes, at most 255 characters.
    static func violation(ofName name: String) -> String? {
        if name.hasPrefix("_") { return "names starting with '_' are reserved" }
        if let first = name.first, !first.isASCIILetter {
            return "names must start with a letter"
        }
        if name.contains("\"") { return "names must not contain '\"'" }
        return Limits().violation(ofName: name)
    }

    /// Why a grant names `role`, when it is neither implicit nor in `roles`.
    static func unknownRole(_ role: String) -> String {
        "unknown role '\(role)': use _creator, _icloud, _world or a role created with CREATE ROLE"
    }

    /// Why deploying this schema (development) over `production` would not be additive: one
    /// human-readable line per problem, sorted. Removing a record type or a field, or changing a
    /// field's type, would lose production data; added types, fields, indexes, grants and roles are
    /// fine, and so is dropping an index, a grant or a role, which loses no data. Empty when the
    /// change is additive.
    public func nonAdditiveChanges(from production: Schema) -> [String] {
        deployChanges(from: production).filter { $0.kind == .blocks }.map(\.detail).sorted()
    }

    /// What deploying this schema (development) over `production` does, record type by record type
    /// and field by field, sorted by record type and field (the roles first): each type, field,
    /// index, grant and role it adds, changes or removes, and, as ``SchemaChange/Kind/blocks``,
    /// what makes the deploy refused (``nonAdditiveChanges(from:)``). Empty when they are equal.
    public func deployChanges(from production: Schema) -> [SchemaChange] {
        var changes: [SchemaChange] = []
        for role in roles.subtracting(production.roles).sorted() {
            changes.append(SchemaChange(kind: .adds, recordType: "", field: nil, detail: "role \(role)"))
        }
        for role in production.roles.subtracting(roles).sorted() {
            changes.append(SchemaChange(kind: .removes, recordType: "", field: nil, detail: "role \(role)"))
        }
        func describe(_ field: FieldSchema) -> String {
            ([field.type.schemaName] + field.indexes.keywordList).joined(separator: " ")
        }
        func describe(_ grants: Set<SchemaGrant>) -> String {
            grants.sorted().map { "\($0.permission.rawValue) to \($0.role)" }.joined(separator: ", ")
        }
        for typeName in Set(recordTypes.keys).union(production.recordTypes.keys).sorted() {
            switch (recordTypes[typeName], production.recordTypes[typeName]) {
            case (let type?, nil):
                changes.append(SchemaChange(kind: .adds, recordType: typeName, field: nil, detail: "record type"))
                // Every type has the system fields; only an index on one is worth a line.
                for (fieldName, field) in type.fields.sorted(by: { $0.key < $1.key })
                where RecordTypeSchema.systemFields[fieldName] == nil || !field.indexes.isEmpty {
                    changes.append(SchemaChange(kind: .adds, recordType: typeName, field: fieldName, detail: describe(field)))
                }
            case (nil, _?):
                changes.append(
                    SchemaChange(
                        kind: .blocks, recordType: typeName, field: nil,
                        detail: "record type '\(typeName)' is missing (production has it)"))
            case (let type?, let productionType?):
                if type.grants != productionType.grants {
                    changes.append(
                        SchemaChange(
                            kind: .changes, recordType: typeName, field: nil,
                            detail: "grants \(describe(productionType.grants)) → \(describe(type.grants))"))
                }
                for fieldName in Set(type.fields.keys).union(productionType.fields.keys).sorted() {
                    switch (type.fields[fieldName], productionType.fields[fieldName]) {
                    case (let field?, nil):
                        changes.append(SchemaChange(kind: .adds, recordType: typeName, field: fieldName, detail: describe(field)))
                    case (nil, _?):
                        changes.append(
                            SchemaChange(
                                kind: .blocks, recordType: typeName, field: fieldName,
                                detail: "field '\(typeName).\(fieldName)' is missing (production has it)"))
                    case (let field?, let productionField?) where field.type != productionField.type:
                        changes.append(
                            SchemaChange(
                                kind: .blocks, recordType: typeName, field: fieldName,
                                detail: "field '\(typeName).\(fieldName)' changes type from "
                                    + "\(productionField.type.schemaName) to \(field.type.schemaName)"))
                    case (let field?, let productionField?) where field.indexes != productionField.indexes:
                        changes.append(
                            SchemaChange(
                                kind: .changes, recordType: typeName, field: fieldName,
                                detail: "indexes \(describe(productionField)) → \(describe(field))"))
                    default:
                        break
                    }
                }
            case (nil, nil):
                break
            }
        }
        return changes
    }
}

/// One thing deploying a development schema to production does (``Schema/deployChanges(from:)``).
public struct SchemaChange: Hashable, Sendable {
    /// What the deploy does to it.
    public enum Kind: String, Sendable {
        /// Adds a record type, a field or a role.
        case adds
        /// Changes a field's indexes or a record type's grants.
        case changes
        /// Removes a role.
        case removes
        /// Would lose production data (a record type or field missing in development, a field's
        /// type changed): the deploy is refused.
        case blocks
    }

    /// What the deploy does.
    public var kind: Kind
    /// The record type, or empty for a role.
    public var recordType: String
    /// The field, when the change is a field's.
    public var field: String?
    /// What changes: a field's type and indexes, the indexes or grants before and after, a role's
    /// name, or why the deploy is refused.
    public var detail: String

    /// Creates a change.
    public init(kind: Kind, recordType: String, field: String?, detail: String) {
        self.kind = kind
        self.recordType = recordType
        self.field = field
        self.detail = detail
    }
}

extension Schema: JSONWritable {
    /// Writes `{"recordTypes": {name: {"fields": {name: {"type", "indexes"}}, "grants": [...]}}, "roles": [...]}`
    /// with names sorted and types in their schema-language spelling (`LIST<STRING>`).
    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.key("recordTypes")
        writer.beginObject()
        for (typeName, recordType) in recordTypes.sorted(by: { $0.key < $1.key }) {
            writer.key(typeName)
            writer.beginObject()
            writer.key("fields")
            writer.beginObject()
            for (fieldName, field) in recordType.fields.sorted(by: { $0.key < $1.key }) {
                writer.key(fieldName)
                writer.beginObject()
                writer.field("type", field.type.schemaName)
                writer.field("indexes", array: field.indexes.keywordList)
                writer.endObject()
            }
            writer.endObject()
            writer.key("grants")
            writer.beginArray()
            for grant in recordType.grants.sorted() {
                writer.beginObject()
                writer.field("permission", grant.permission.rawValue)
                writer.field("role", grant.role)
                writer.endObject()
            }
            writer.endArray()
            writer.endObject()
        }
        writer.endObject()
        writer.field("roles", array: roles.sorted())
        writer.endObject()
    }
}

extension Schema: JSONDecodable {
    /// Reads the JSON ``write(to:)`` produces, enforcing the rules of the schema language. Absent
    /// `recordTypes`, `roles`, `fields`, `grants` and `indexes` are empty (a type without grants has
    /// none, as in schema text); missing system fields are added. A field's `type` may also be a
    /// wire type tag (`STRING_LIST`, `ASSETID`).
    public init(json: JSONValue) throws {
        let object = try json.object()
        let roles = try object.decodeIfPresent("roles", as: [String].self) ?? []
        for (index, role) in roles.enumerated() {
            if let violation = Self.violation(ofName: role) {
                throw JSONDecodingError(.invalid, "invalid role name: \(violation)", at: [.key("roles"), .index(index)])
            }
        }
        let knownRoles = Self.implicitRoles.union(roles)
        let members = try withJSONPath(.key("recordTypes")) { try object["recordTypes"]?.object().members ?? [:] }
        var recordTypes: [String: RecordTypeSchema] = [:]
        for (typeName, value) in members.sorted(by: { $0.key < $1.key }) {
            recordTypes[typeName] = try withJSONPath(.key("recordTypes")) {
                try withJSONPath(.key(typeName)) {
                    if let violation = Self.violation(ofName: typeName) {
                        throw JSONDecodingError(.invalid, "invalid record type name: \(violation)")
                    }
                    return try RecordTypeSchema(json: value, roles: knownRoles)
                }
            }
        }
        self.init(roles: Set(roles), recordTypes: recordTypes)
    }
}

extension RecordTypeSchema {
    /// Reads one record type of a schema's JSON, whose grants may name `roles`.
    fileprivate init(json: JSONValue, roles: Set<String>) throws {
        let object = try json.object()
        let members = try withJSONPath(.key("fields")) { try object["fields"]?.object().members ?? [:] }
        var fields: [String: FieldSchema] = [:]
        for (name, value) in members.sorted(by: { $0.key < $1.key }) {
            fields[name] = try withJSONPath(.key("fields")) {
                try withJSONPath(.key(name)) {
                    if let violation = Self.violation(ofFieldName: name) {
                        throw JSONDecodingError(.invalid, "invalid field name: \(violation)")
                    }
                    let field = try FieldSchema(json: value)
                    if let violation = Self.violation(ofSystemField: name, type: field.type) {
                        throw JSONDecodingError(.invalid, violation, at: [.key("type")])
                    }
                    return field
                }
            }
        }
        if fields.keys.count(where: { Self.systemFields[$0] == nil }) > Self.maxFields {
            throw JSONDecodingError(.invalid, "a record type has at most \(Self.maxFields) fields", at: [.key("fields")])
        }
        var grants: Set<SchemaGrant> = []
        if let value = object["grants"] {
            try withJSONPath(.key("grants")) {
                guard case .array(let elements) = value else { throw JSONDecodingError(.wrongType, "an array") }
                for (index, element) in elements.enumerated() {
                    try withJSONPath(.index(index)) {
                        let grant = try element.object()
                        let role: String = try grant.decode("role")
                        guard roles.contains(role) else {
                            throw JSONDecodingError(.invalid, Schema.unknownRole(role), at: [.key("role")])
                        }
                        grants.insert(SchemaGrant(try grant.decode("permission"), to: role))
                    }
                }
            }
        }
        self.init(fields: fields, grants: grants)
    }
}

extension FieldSchema {
    /// Reads `{"type": "STRING", "indexes": ["QUERYABLE"]}`.
    fileprivate init(json: JSONValue) throws {
        let object = try json.object()
        let typeName: String = try object.decode("type")
        guard let type = FieldType(schemaName: typeName) ?? FieldType(wireName: typeName), type != .unknownList else {
            throw JSONDecodingError(.invalid, "'\(typeName)' is not a field type", at: [.key("type")])
        }
        var indexes: FieldIndexes = []
        for (index, keyword) in (try object.decodeIfPresent("indexes", as: [String].self) ?? []).enumerated() {
            guard let option = FieldIndexes(keyword: keyword) else {
                throw JSONDecodingError(
                    .invalid, "'\(keyword)' is not one of QUERYABLE, SEARCHABLE, SORTABLE", at: [.key("indexes"), .index(index)])
            }
            guard FieldIndexes.supported(by: type).contains(option) else {
                throw JSONDecodingError(
                    .invalid, "'\(keyword)' does not apply: " + FieldIndexes.rule(for: type), at: [.key("indexes"), .index(index)])
            }
            indexes.insert(option)
        }
        self.init(type: type, indexes: indexes)
    }
}
