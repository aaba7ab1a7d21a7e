/// Why CloudKit Schema Language text could not be parsed: the position of the offending token and
/// the rule it breaks.
public struct SchemaSyntaxError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The line of the offending token, from 1.
    public var line: Int
    /// The column of the offending token in characters, from 1.
    public var column: Int
    /// What is wrong.
    public var reason: String

    /// Creates an error at `line` and `column`.
    public init(line: Int, column: Int, reason: String) {
        self.line = line
        self.column = column
        self.reason = reason
    }

    /// `line L, column C: reason`.
    public var description: String { "line \(line), column \(column): \(reason)" }
}

extension FieldType {
    /// The schema-language name: `STRING`, `INT64`, `DOUBLE`, `TIMESTAMP`, `BYTES`, `REFERENCE`,
    /// `ASSET`, `LOCATION`, `LIST<STRING>` and so on. `UNKNOWN_LIST` has no schema-language form and
    /// is named `LIST<UNKNOWN>`.
    public var schemaName: String {
        switch self {
        case .asset: "ASSET"
        case .unknownList: "LIST<UNKNOWN>"
        default: elementType.map { "LIST<\($0.schemaName)>" } ?? rawValue
        }
    }

    /// The type whose ``schemaName`` is `schemaName`; `nil` for `LIST<UNKNOWN>` and unknown names.
    init?(schemaName: String) {
        guard let type = FieldType.allCases.first(where: { $0 != .unknownList && $0.schemaName == schemaName }) else {
            return nil
        }
        self = type
    }
}

extension Schema {
    /// Parses CloudKit Schema Language text, as `cktool export-schema` writes it:
    ///
    /// ```
    /// DEFINE SCHEMA
    ///     CREATE ROLE Moderator;
    ///     RECORD TYPE Note (
    ///         "___recordID" REFERENCE QUERYABLE,
    ///         title         STRING QUERYABLE SORTABLE SEARCHABLE,
    ///         tags          LIST<STRING>,
    ///         GRANT READ TO "_world",
    ///         GRANT READ, CREATE, WRITE TO Moderator
    ///     );
    /// ```
    ///
    /// Keywords are case-insensitive; `//` and `--` start comments. Types are `ASSET`, `BYTES`,
    /// `DOUBLE`, `INT64`, `LOCATION`, `REFERENCE`, `STRING`, `TIMESTAMP`, `NUMBER [PREFERRED AS
    /// INT64|DOUBLE]` and `LIST<…>` of those; `ENCRYPTED` types are rejected. A type without `GRANT`
    /// has no grants. System fields need not be listed; they are added.
    public init(parsing text: String) throws(SchemaSyntaxError) {
        var lexer = SchemaLexer(text)
        var parser = SchemaParser(tokens: try lexer.tokens())
        self = try parser.parse()
    }

    /// The schema as canonical schema-language text: roles, record types and fields sorted by name,
    /// system fields first, one field per line with names aligned, grants last (one line per role),
    /// ending with a newline. Parsing it gives back an equal schema whenever the schema follows the
    /// language's rules, as every parsed or JSON-decoded schema does.
    public var text: String {
        var lines = ["DEFINE SCHEMA"]
        for role in roles.sorted() {
            lines += ["", "    CREATE ROLE \(Self.quotedIfNeeded(role));"]
        }
        for (typeName, recordType) in recordTypes.sorted(by: { $0.key < $1.key }) {
            lines += ["", "    RECORD TYPE \(Self.quotedIfNeeded(typeName)) ("]
            let fields = recordType.fields.sorted {
                let (lhsSystem, rhsSystem) = (RecordTypeSchema.systemFields[$0.key] != nil, RecordTypeSchema.systemFields[$1.key] != nil)
                return lhsSystem == rhsSystem ? $0.key < $1.key : lhsSystem
            }
            let printedNames = fields.map { Self.quotedIfNeeded($0.key) }
            let width = printedNames.map(\.count).max() ?? 0
            var items: [String] = []
            for ((_, field), printedName) in zip(fields, printedNames) {
                let padding = String(repeating: " ", count: width - printedName.count + 1)
                items.append(([printedName + padding + field.type.schemaName] + field.indexes.keywordList).joined(separator: " "))
            }
            let grantsByRole = Dictionary(grouping: recordType.grants, by: \.role)
            for (role, grants) in grantsByRole.sorted(by: { $0.key < $1.key }) {
                let permissions = grants.map(\.permission).sorted().map(\.rawValue).joined(separator: ", ")
                items.append("GRANT \(permissions) TO \(Self.quotedIfNeeded(role))")
            }
            lines += items.enumerated().map { index, item in
                "        " + item + (index == items.count - 1 ? "" : ",")
            }
            lines.append("    );")
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// The words of the language; names spelled like one are quoted when printed.
    private static let keywords: Set<String> = [
        "AS", "ASSET", "BYTES", "CREATE", "DEFINE", "DOUBLE", "ENCRYPTED", "GRANT", "INT64", "LIST", "LOCATION",
        "NUMBER", "PREFERRED", "QUERYABLE", "READ", "RECORD", "REFERENCE", "ROLE", "SCHEMA", "SEARCHABLE",
        "SORTABLE", "STRING", "TIMESTAMP", "TO", "TYPE", "WRITE",
    ]

    /// `name` as is when it is a plain identifier that starts with a letter and is no keyword,
    /// otherwise in double quotes.
    private static func quotedIfNeeded(_ name: String) -> String {
        let isPlain = name.first?.isASCIILetter == true && name.allSatisfy(\.isIdentifierCharacter)
            && !keywords.contains(name.uppercased())
        return isPlain ? name : "\"\(name)\""
    }
}

/// One token of schema-language text and where it starts.
private struct SchemaToken: CustomStringConvertible {
    enum Kind: Equatable {
        /// An unquoted identifier or keyword.
        case word(String)
        /// A double-quoted name, without its quotes.
        case quoted(String)
        /// One of `( ) , ; < >`.
        case symbol(Character)
        /// The end of the text.
        case end
    }

    var kind: Kind
    var line: Int
    var column: Int

    /// Whether this is the unquoted keyword `keyword` (given in upper case), in any case.
    func isKeyword(_ keyword: String) -> Bool {
        if case .word(let word) = kind { word.uppercased() == keyword } else { false }
    }

    /// The name this token spells, quoted or not.
    var name: String? {
        switch kind {
        case .word(let name), .quoted(let name): name
        case .symbol, .end: nil
        }
    }

    var description: String {
        switch kind {
        case .word(let word): "'\(word)'"
        case .quoted(let name): "'\"\(name)\"'"
        case .symbol(let symbol): "'\(symbol)'"
        case .end: "the end of the text"
        }
    }
}

/// Splits schema-language text into tokens, dropping whitespace and comments.
private struct SchemaLexer {
    private let characters: [Character]
    private var index = 0
    private var line = 1
    private var column = 1

    init(_ text: String) {
        characters = Array(text)
    }

    /// All tokens, ending with `.end`.
    mutating func tokens() throws(SchemaSyntaxError) -> [SchemaToken] {
        var tokens: [SchemaToken] = []
        while true {
            skipWhitespaceAndComments()
            let (line, column) = (self.line, self.column)
            guard let character = peek() else {
                tokens.append(SchemaToken(kind: .end, line: line, column: column))
                return tokens
            }
            let kind: SchemaToken.Kind
            if character == "\"" {
                advance()
                var name = ""
                while let next = peek(), next != "\"" {
                    name.append(next)
                    advance()
                }
                guard peek() != nil else {
                    throw SchemaSyntaxError(line: line, column: column, reason: "unterminated quoted name")
                }
                advance()
                kind = .quoted(name)
            } else if character.isIdentifierStart {
                var word = ""
                while let next = peek(), next.isIdentifierCharacter {
                    word.append(next)
                    advance()
                }
                kind = .word(word)
            } else if "(),;<>".contains(character) {
                advance()
                kind = .symbol(character)
            } else {
                throw SchemaSyntaxError(line: line, column: column, reason: "unexpected character '\(character)'")
            }
            tokens.append(SchemaToken(kind: kind, line: line, column: column))
        }
    }

    private func peek(_ offset: Int = 0) -> Character? {
        index + offset < characters.count ? characters[index + offset] : nil
    }

    private mutating func advance() {
        if characters[index].isNewline {
            line += 1
            column = 1
        } else {
            column += 1
        }
        index += 1
    }

    private mutating func skipWhitespaceAndComments() {
        while let character = peek() {
            if character.isWhitespace {
                advance()
            } else if (character == "/" && peek(1) == "/") || (character == "-" && peek(1) == "-") {
                while let next = peek(), !next.isNewline { advance() }
            } else {
                return
            }
        }
    }
}

extension Character {
    /// Whether this is one of `A`–`Z` and `a`–`z`.
    var isASCIILetter: Bool { isASCII && isLetter }

    /// Whether an unquoted identifier may start with this character: an ASCII letter or `_`.
    fileprivate var isIdentifierStart: Bool { isASCIILetter || self == "_" }

    /// Whether an unquoted identifier may contain this character: an ASCII letter, digit or `_`.
    fileprivate var isIdentifierCharacter: Bool { isIdentifierStart || (isASCII && isNumber) }
}

/// Builds a ``Schema`` from tokens, checking every rule of the language.
private struct SchemaParser {
    private let tokens: [SchemaToken]
    private var position = 0
    private var schema = Schema()
    /// The role of every grant and its token, checked once all `CREATE ROLE` statements are known.
    private var grantedRoles: [(role: String, token: SchemaToken)] = []

    init(tokens: [SchemaToken]) {
        self.tokens = tokens
    }

    private var current: SchemaToken { tokens[position] }

    private func error(_ reason: String, at token: SchemaToken) -> SchemaSyntaxError {
        SchemaSyntaxError(line: token.line, column: token.column, reason: reason)
    }

    private mutating func advance() {
        position += 1
    }

    private mutating func expectKeyword(_ keyword: String) throws(SchemaSyntaxError) {
        guard current.isKeyword(keyword) else { throw error("expected \(keyword), found \(current)", at: current) }
        advance()
    }

    private mutating func expectSymbol(_ symbol: Character) throws(SchemaSyntaxError) {
        guard current.kind == .symbol(symbol) else { throw error("expected '\(symbol)', found \(current)", at: current) }
        advance()
    }

    /// Consumes a name token, quoted or not; `what` describes it for the error.
    private mutating func expectName(_ what: String) throws(SchemaSyntaxError) -> (name: String, token: SchemaToken) {
        let token = current
        guard let name = token.name else { throw error("expected \(what), found \(token)", at: token) }
        advance()
        return (name, token)
    }

    mutating func parse() throws(SchemaSyntaxError) -> Schema {
        try expectKeyword("DEFINE")
        try expectKeyword("SCHEMA")
        while current.kind != .end {
            try parseStatement()
            if current.kind == .symbol(";") {
                advance()
            } else if current.kind != .end {
                throw error("expected ';' after the statement, found \(current)", at: current)
            }
        }
        let knownRoles = Schema.implicitRoles.union(schema.roles)
        if let unknown = grantedRoles.first(where: { !knownRoles.contains($0.role) }) {
            throw error(Schema.unknownRole(unknown.role), at: unknown.token)
        }
        return schema
    }

    private mutating func parseStatement() throws(SchemaSyntaxError) {
        if current.isKeyword("CREATE") {
            advance()
            try expectKeyword("ROLE")
            let (role, token) = try expectName("a role name")
            if let violation = Schema.violation(ofName: role) {
                throw error("invalid role name '\(role)': \(violation)", at: token)
            }
            guard schema.roles.insert(role).inserted else { throw error("role '\(role)' is created twice", at: token) }
        } else if current.isKeyword("RECORD") {
            advance()
            try expectKeyword("TYPE")
            try parseRecordType()
        } else {
            throw error("expected CREATE ROLE or RECORD TYPE, found \(current)", at: current)
        }
    }

    private mutating func parseRecordType() throws(SchemaSyntaxError) {
        let (typeName, token) = try expectName("a record type name")
        if let violation = Schema.violation(ofName: typeName) {
            throw error("invalid record type name '\(typeName)': \(violation)", at: token)
        }
        guard schema.recordTypes[typeName] == nil else {
            throw error("record type '\(typeName)' is defined twice", at: token)
        }
        try expectSymbol("(")
        var fields: [String: FieldSchema] = [:]
        var grants: Set<SchemaGrant> = []
        var userFieldCount = 0
        if current.kind != .symbol(")") {
            repeat {
                if current.isKeyword("GRANT") {
                    grants.formUnion(try parseGrant())
                    continue
                }
                let (fieldName, nameToken) = try expectName("a field name or GRANT")
                guard fields[fieldName] == nil else {
                    throw error("field '\(fieldName)' is defined twice in record type '\(typeName)'", at: nameToken)
                }
                if let violation = RecordTypeSchema.violation(ofFieldName: fieldName) {
                    throw error("invalid field name '\(fieldName)': \(violation)", at: nameToken)
                }
                if RecordTypeSchema.systemFields[fieldName] == nil {
                    userFieldCount += 1
                    guard userFieldCount <= RecordTypeSchema.maxFields else {
                        throw error(
                            "record type '\(typeName)' has more than \(RecordTypeSchema.maxFields) fields", at: nameToken)
                    }
                }
                fields[fieldName] = try parseField(named: fieldName)
            } while try consumeComma()
        }
        guard current.kind == .symbol(")") else {
            throw error("expected ',' or ')' in record type '\(typeName)', found \(current)", at: current)
        }
        advance()
        schema.recordTypes[typeName] = RecordTypeSchema(fields: fields, grants: grants)
    }

    private mutating func consumeComma() throws(SchemaSyntaxError) -> Bool {
        guard current.kind == .symbol(",") else { return false }
        advance()
        return true
    }

    /// Parses a field's type and index options.
    private mutating func parseField(named name: String) throws(SchemaSyntaxError) -> FieldSchema {
        let typeToken = current
        let type = try parseType(allowingList: true)
        if let violation = RecordTypeSchema.violation(ofSystemField: name, type: type) {
            throw error(violation, at: typeToken)
        }
        var indexes: FieldIndexes = []
        while case .word(let word) = current.kind, let option = FieldIndexes(keyword: word.uppercased()) {
            guard !indexes.contains(option) else {
                throw error("field '\(name)' lists \(word.uppercased()) twice", at: current)
            }
            guard FieldIndexes.supported(by: type).contains(option) else {
                throw error(
                    "field '\(name)' cannot be \(word.uppercased()): " + FieldIndexes.rule(for: type), at: current)
            }
            indexes.insert(option)
            advance()
        }
        return FieldSchema(type: type, indexes: indexes)
    }

    private mutating func parseType(allowingList: Bool) throws(SchemaSyntaxError) -> FieldType {
        let token = current
        guard case .word(let word) = token.kind else { throw error("expected a type, found \(token)", at: token) }
        advance()
        switch word.uppercased() {
        case "ENCRYPTED":
            throw error("encrypted fields are not supported: Stratus stores fields unencrypted", at: token)
        case "LIST":
            guard allowingList else { throw error("lists cannot be nested", at: token) }
            try expectSymbol("<")
            let element = try parseType(allowingList: false)
            try expectSymbol(">")
            return element.listType!  // `element` is a scalar type, which always has a list type.
        case "NUMBER":
            guard current.isKeyword("PREFERRED") else { return .double }
            advance()
            try expectKeyword("AS")
            let preferred = current
            advance()
            if preferred.isKeyword("INT64") { return .int64 }
            if preferred.isKeyword("DOUBLE") { return .double }
            throw error("expected INT64 or DOUBLE after PREFERRED AS, found \(preferred)", at: preferred)
        case let name:
            guard let type = FieldType(schemaName: name), !type.isList else {
                throw error(
                    "unknown type \(token); expected ASSET, BYTES, DOUBLE, INT64, LOCATION, NUMBER, REFERENCE, "
                        + "STRING, TIMESTAMP or LIST<…>", at: token)
            }
            return type
        }
    }

    /// Parses `GRANT permission [, permission …] TO role`.
    private mutating func parseGrant() throws(SchemaSyntaxError) -> [SchemaGrant] {
        advance()
        var permissions = [try parsePermission()]
        // A comma followed by a permission continues the list; any other comma ends the grant.
        while current.kind == .symbol(","), permission(of: tokens[position + 1]) != nil {
            advance()
            permissions.append(try parsePermission())
        }
        try expectKeyword("TO")
        let (role, token) = try expectName("a role")
        grantedRoles.append((role, token))
        return permissions.map { SchemaGrant($0, to: role) }
    }

    private func permission(of token: SchemaToken) -> SchemaPermission? {
        guard case .word(let word) = token.kind else { return nil }
        return SchemaPermission(rawValue: word.uppercased())
    }

    private mutating func parsePermission() throws(SchemaSyntaxError) -> SchemaPermission {
        guard let permission = permission(of: current) else {
            throw error("expected READ, CREATE or WRITE, found \(current)", at: current)
        }
        advance()
        return permission
    }
}
