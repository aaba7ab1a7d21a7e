import StratusModel
import Testing

@Suite("schema language")
struct SchemaLanguageTests {
    /// Every construct of the language: roles, grants, every type, comments, quoted names, any case.
    static let example = """
        // Stratus test schema
        DEFINE SCHEMA
            -- roles come first
            create role Moderator;
            CREATE ROLE "Editors";

            RECORD TYPE Note (
                "___createTime" TIMESTAMP QUERYABLE SORTABLE,
                "___recordID"   REFERENCE QUERYABLE,
                title           STRING SORTABLE QUERYABLE SEARCHABLE, // options in any order
                body            string,
                tags            LIST<STRING> SEARCHABLE,
                count           INT64 QUERYABLE,
                score           DOUBLE SORTABLE,
                rating          NUMBER,
                votes           NUMBER PREFERRED AS INT64,
                weight          number preferred as double,
                due             TIMESTAMP,
                blob            BYTES,
                attachment      ASSET,
                owner           REFERENCE QUERYABLE,
                place           LOCATION QUERYABLE,
                counts          LIST<INT64> QUERYABLE,
                scores          LIST<DOUBLE>,
                dates           LIST<TIMESTAMP>,
                blobs           LIST<BYTES>,
                attachments     LIST<ASSET>,
                owners          LIST<REFERENCE>,
                places          List < Location >,
                "grant"         STRING,
                type            STRING,
                GRANT WRITE TO "_creator",
                GRANT READ, CREATE TO "_icloud",
                GRANT READ TO "_world",
                grant read, write to Moderator,
                GRANT WRITE TO Editors
            );

            RECORD TYPE "Empty" ()
        """

    static let expected: Schema = {
        let note: [String: FieldSchema] = [
            "___createTime": FieldSchema(type: .timestamp, indexes: [.queryable, .sortable]),
            "___recordID": FieldSchema(type: .reference, indexes: .queryable),
            "title": FieldSchema(type: .string, indexes: [.queryable, .sortable, .searchable]),
            "body": FieldSchema(type: .string, indexes: []),
            "tags": FieldSchema(type: .stringList, indexes: .searchable),
            "count": FieldSchema(type: .int64, indexes: .queryable),
            "score": FieldSchema(type: .double, indexes: .sortable),
            "rating": FieldSchema(type: .double, indexes: []),
            "votes": FieldSchema(type: .int64, indexes: []),
            "weight": FieldSchema(type: .double, indexes: []),
            "due": FieldSchema(type: .timestamp, indexes: []),
            "blob": FieldSchema(type: .bytes, indexes: []),
            "attachment": FieldSchema(type: .asset, indexes: []),
            "owner": FieldSchema(type: .reference, indexes: .queryable),
            "place": FieldSchema(type: .location, indexes: .queryable),
            "counts": FieldSchema(type: .int64List, indexes: .queryable),
            "scores": FieldSchema(type: .doubleList, indexes: []),
            "dates": FieldSchema(type: .timestampList, indexes: []),
            "blobs": FieldSchema(type: .bytesList, indexes: []),
            "attachments": FieldSchema(type: .assetList, indexes: []),
            "owners": FieldSchema(type: .referenceList, indexes: []),
            "places": FieldSchema(type: .locationList, indexes: []),
            "grant": FieldSchema(type: .string, indexes: []),
            "type": FieldSchema(type: .string, indexes: []),
        ]
        let grants: Set<SchemaGrant> = [
            SchemaGrant(.write, to: "_creator"), SchemaGrant(.read, to: "_icloud"), SchemaGrant(.create, to: "_icloud"),
            SchemaGrant(.read, to: "_world"), SchemaGrant(.read, to: "Moderator"), SchemaGrant(.write, to: "Moderator"),
            SchemaGrant(.write, to: "Editors"),
        ]
        return Schema(roles: ["Moderator", "Editors"], recordTypes: [
            "Note": RecordTypeSchema(fields: note, grants: grants),
            "Empty": RecordTypeSchema(grants: []),
        ])
    }()

    @Test("a full example parses into the expected schema")
    func fullExample() throws {
        let schema = try Schema(parsing: Self.example)
        #expect(schema == Self.expected)
        #expect(schema.recordTypes["Note"]?.fields["___etag"] == FieldSchema(type: .string, indexes: []))
        #expect(schema.recordTypes["Empty"]?.fields.count == RecordTypeSchema.systemFields.count)
        #expect(schema.recordTypes["Empty"]?.grants == [], "a type without GRANT has no grants")
    }

    @Test("text parses back to an equal schema and is stable")
    func roundTrip() throws {
        let text = Self.expected.text
        let reparsed = try Schema(parsing: text)
        #expect(reparsed == Self.expected)
        #expect(reparsed.text == text)
        #expect(text.hasSuffix(");\n"))
        #expect(Schema().text == "DEFINE SCHEMA\n")
        #expect(try Schema(parsing: Schema().text) == Schema())
    }

    @Test("text is canonical: sorted, system fields first, aligned, grants grouped by role")
    func canonicalText() {
        let schema = Schema(roles: ["Moderator"], recordTypes: [
            "Note": RecordTypeSchema(
                fields: [
                    "title": FieldSchema(type: .string, indexes: [.sortable, .queryable]),
                    "grant": FieldSchema(type: .int64List, indexes: []),
                    "___recordID": FieldSchema(type: .reference, indexes: .queryable),
                ],
                grants: RecordTypeSchema.defaultGrants.union([SchemaGrant(.write, to: "Moderator"), SchemaGrant(.read, to: "Moderator")])),
            "Alpha": RecordTypeSchema(fields: ["photo": FieldSchema(type: .asset, indexes: [])], grants: []),
        ])
        #expect(schema.text == """
            DEFINE SCHEMA

                CREATE ROLE Moderator;

                RECORD TYPE Alpha (
                    "___createTime" TIMESTAMP,
                    "___createdBy"  REFERENCE,
                    "___etag"       STRING,
                    "___modTime"    TIMESTAMP,
                    "___modifiedBy" REFERENCE,
                    "___recordID"   REFERENCE,
                    photo           ASSET
                );

                RECORD TYPE Note (
                    "___createTime" TIMESTAMP,
                    "___createdBy"  REFERENCE,
                    "___etag"       STRING,
                    "___modTime"    TIMESTAMP,
                    "___modifiedBy" REFERENCE,
                    "___recordID"   REFERENCE QUERYABLE,
                    "grant"         LIST<INT64>,
                    title           STRING QUERYABLE SORTABLE,
                    GRANT READ, WRITE TO Moderator,
                    GRANT WRITE TO "_creator",
                    GRANT CREATE TO "_icloud",
                    GRANT READ TO "_world"
                );

            """)
    }

    @Test("statements: a trailing ';' is optional, roles may be used before they are created")
    func statements() throws {
        #expect(try Schema(parsing: "define schema") == Schema())
        let withSemicolon = try Schema(parsing: "DEFINE SCHEMA\nCREATE ROLE A;\nRECORD TYPE T (GRANT READ TO B);\nCREATE ROLE B;")
        let without = try Schema(parsing: "DEFINE SCHEMA\nCREATE ROLE A;\nRECORD TYPE T (GRANT READ TO B);\nCREATE ROLE B")
        #expect(withSemicolon == without)
        #expect(without.roles == ["A", "B"])
        #expect(without.recordTypes["T"]?.grants == [SchemaGrant(.read, to: "B")])
    }

    @Test("a record type takes 256 fields besides the system fields")
    func fieldLimit() throws {
        let fields = (1...256).map { "f\($0) STRING" } + RecordTypeSchema.systemFields.map { "\"\($0.key)\" \($0.value.schemaName)" }
        let schema = try Schema(parsing: "DEFINE SCHEMA RECORD TYPE Big (\(fields.joined(separator: ", ")))")
        #expect(schema.recordTypes["Big"]?.fields.count == 262)
    }

    static let tooManyFields = "DEFINE SCHEMA\nRECORD TYPE Big (\n" + (1...257).map { "  f\($0) STRING" }.joined(separator: ",\n") + "\n)"

    @Test("errors name the rule and the position of the offending token", arguments: [
        ("RECORD TYPE A ( x STRING )", 1, 1, "expected DEFINE"),
        ("DEFINE SCHEMA\nRECORD TYPE _Note ( x STRING )", 2, 13, "names starting with '_' are reserved"),
        ("DEFINE SCHEMA\nRECORD TYPE Note (\n  _x STRING\n)", 3, 3, "invalid field name '_x': names starting with '_' are reserved"),
        ("DEFINE SCHEMA\nRECORD TYPE Note ( ___foo STRING )", 2, 20, "names starting with '_' are reserved"),
        ("DEFINE SCHEMA\nRECORD TYPE \"1Note\" ( x STRING )", 2, 13, "must start with a letter"),
        ("DEFINE SCHEMA\nRECORD TYPE Note ( \"___etag\" INT64 )", 2, 30, "system field '___etag' must be STRING"),
        ("DEFINE SCHEMA\nRECORD TYPE Note ( secret ENCRYPTED STRING )", 2, 27,
         "encrypted fields are not supported: Stratus stores fields unencrypted"),
        ("DEFINE SCHEMA\nRECORD TYPE Note ( n INT64 SEARCHABLE )", 2, 28, "field 'n' cannot be SEARCHABLE"),
        ("DEFINE SCHEMA\nRECORD TYPE Note ( n LIST<INT64> SORTABLE )", 2, 34, "field 'n' cannot be SORTABLE"),
        ("DEFINE SCHEMA\nRECORD TYPE Note ( a ASSET QUERYABLE )", 2, 28,
         "field 'a' cannot be QUERYABLE: ASSET fields take no index options"),
        ("DEFINE SCHEMA\nRECORD TYPE Note ( b BYTES QUERYABLE )", 2, 28, "field 'b' cannot be QUERYABLE"),
        ("DEFINE SCHEMA\nRECORD TYPE Note ( r REFERENCE SORTABLE )", 2, 32, "field 'r' cannot be SORTABLE"),
        ("DEFINE SCHEMA\nRECORD TYPE Note ( p LOCATION SORTABLE )", 2, 31, "field 'p' cannot be SORTABLE"),
        ("DEFINE SCHEMA\nRECORD TYPE Note ( x STRING QUERYABLE queryable )", 2, 39, "lists QUERYABLE twice"),
        ("DEFINE SCHEMA\nRECORD TYPE Note ( l LIST<LIST<STRING>> )", 2, 27, "lists cannot be nested"),
        ("DEFINE SCHEMA\nRECORD TYPE Note ( x TEXT )", 2, 22, "unknown type 'TEXT'"),
        ("DEFINE SCHEMA\nRECORD TYPE Note ( n NUMBER PREFERRED AS STRING )", 2, 42, "expected INT64 or DOUBLE"),
        ("DEFINE SCHEMA\nRECORD TYPE Note ( x STRING, GRANT READ TO Admins )", 2, 44, "unknown role 'Admins'"),
        ("DEFINE SCHEMA\nRECORD TYPE Note ( GRANT READ TO \"_everyone\" )", 2, 34, "unknown role '_everyone'"),
        ("DEFINE SCHEMA\nRECORD TYPE Note ( GRANT DELETE TO \"_world\" )", 2, 26, "expected READ, CREATE or WRITE"),
        ("DEFINE SCHEMA\nRECORD TYPE Note ( x STRING );\nRECORD TYPE Note ( y STRING )", 3, 13,
         "record type 'Note' is defined twice"),
        ("DEFINE SCHEMA\nRECORD TYPE Note ( x STRING, x INT64 )", 2, 30, "field 'x' is defined twice"),
        ("DEFINE SCHEMA\nCREATE ROLE Admins;\nCREATE ROLE \"Admins\"", 3, 13, "role 'Admins' is created twice"),
        ("DEFINE SCHEMA\nCREATE ROLE \"_world\"", 2, 13, "names starting with '_' are reserved"),
        (tooManyFields, 259, 3, "record type 'Big' has more than 256 fields"),
        ("DEFINE SCHEMA\nRECORD TYPE \"Note ( x STRING )", 2, 13, "unterminated quoted name"),
        ("DEFINE SCHEMA\nCREATE ROLE A\nCREATE ROLE B", 3, 1, "expected ';'"),
        ("DEFINE SCHEMA\nRECORD TYPE Note ( x STRING = 1 )", 2, 29, "unexpected character '='"),
        ("DEFINE SCHEMA\nRECORD TYPE Note ( x STRING, )", 2, 30, "expected a field name or GRANT"),
        ("DEFINE SCHEMA\nRECORD TYPE Note ( x STRING QUERYBLE )", 2, 29, "expected ',' or ')'"),
        ("DEFINE SCHEMA -- comment\n// another\n  RECORD TYPE Note ( x BAD )", 3, 24, "unknown type 'BAD'"),
    ])
    func errors(_ text: String, _ line: Int, _ column: Int, _ reason: String) {
        #expect {
            try Schema(parsing: text)
        } throws: { error in
            guard let error = error as? SchemaSyntaxError else { return false }
            #expect(error.line == line && error.column == column, "\(error)")
            #expect(error.reason.contains(reason), "\(error)")
            #expect(error.description == "line \(error.line), column \(error.column): \(error.reason)")
            return true
        }
    }

    @Test("nonAdditiveChanges reports removed types and fields and changed types")
    func nonAdditive() {
        let production = Schema(recordTypes: [
            "Note": RecordTypeSchema(fields: [
                "title": FieldSchema(type: .string, indexes: .queryable), "body": FieldSchema(type: .string, indexes: []),
            ]),
            "Tag": RecordTypeSchema(fields: ["name": FieldSchema(type: .string, indexes: [])]),
        ])
        let development = Schema(recordTypes: [
            "Note": RecordTypeSchema(fields: [
                "title": FieldSchema(type: .int64, indexes: .queryable), "extra": FieldSchema(type: .string, indexes: []),
            ]),
        ])
        #expect(development.nonAdditiveChanges(from: production) == [
            "field 'Note.body' is missing (production has it)",
            "field 'Note.title' changes type from STRING to INT64",
            "record type 'Tag' is missing (production has it)",
        ])

        var additive = production
        additive.roles.insert("Moderator")
        additive.recordTypes["Note"]?.fields["extra"] = FieldSchema(type: .stringList, indexes: .searchable)
        additive.recordTypes["Note"]?.fields["body"]?.indexes = .automatic(for: .string)
        additive.recordTypes["Note"]?.grants.insert(SchemaGrant(.read, to: "Moderator"))
        additive.recordTypes["Folder"] = RecordTypeSchema()
        #expect(additive.nonAdditiveChanges(from: production) == [])
        #expect(production.nonAdditiveChanges(from: production) == [])
    }

    @Test("JSON round-trips and has the documented shape")
    func json() throws {
        let decoded = try Schema(jsonBytes: Self.expected.jsonBytes)
        #expect(decoded == Self.expected)

        let small = Schema(roles: ["Moderator"], recordTypes: [
            "Note": RecordTypeSchema(fields: ["tags": FieldSchema(type: .stringList, indexes: [.searchable, .queryable])],
                                     grants: [SchemaGrant(.read, to: "_world")]),
        ])
        let text = String(decoding: small.jsonBytes, as: UTF8.self)
        #expect(text.hasPrefix(#"{"recordTypes":{"Note":{"fields":{"___createTime":{"type":"TIMESTAMP","indexes":[]},"#))
        #expect(text.contains(#""tags":{"type":"LIST<STRING>","indexes":["QUERYABLE","SEARCHABLE"]}}"#))
        #expect(text.hasSuffix(#""grants":[{"permission":"READ","role":"_world"}]}},"roles":["Moderator"]}"#))

        let documented = try Schema(jsonBytes: Array("""
            {"recordTypes": {"Note": {"fields": {"title": {"type": "STRING", "indexes": ["QUERYABLE","SORTABLE"]},
              "files": {"type": "ASSETID_LIST"}}, "grants": [{"permission": "READ", "role": "_world"}]}},
             "roles": ["Moderator"]}
            """.utf8))
        #expect(documented == Schema(roles: ["Moderator"], recordTypes: [
            "Note": RecordTypeSchema(
                fields: ["title": FieldSchema(type: .string, indexes: [.queryable, .sortable]),
                         "files": FieldSchema(type: .assetList, indexes: [])],
                grants: [SchemaGrant(.read, to: "_world")]),
        ]))
        #expect(try Schema(jsonBytes: Array("{}".utf8)) == Schema())
    }

    @Test("bad schema JSON fails with the path and the rule", arguments: [
        (#"{"recordTypes": {"Note": {"fields": {"photo": {"type": "ASSET", "indexes": ["QUERYABLE"]}}}}}"#,
         "recordTypes.Note.fields.photo.indexes[0]: 'QUERYABLE' does not apply: ASSET fields take no index options"),
        (#"{"recordTypes": {"Note": {"grants": [{"permission": "READ", "role": "Admins"}]}}}"#,
         "recordTypes.Note.grants[0].role: unknown role 'Admins'"),
        (#"{"recordTypes": {"Note": {"grants": [{"permission": "DELETE", "role": "_world"}]}}}"#,
         "recordTypes.Note.grants[0].permission: 'DELETE' is not one of READ, CREATE, WRITE"),
        (#"{"recordTypes": {"_Note": {}}}"#, "recordTypes._Note: invalid record type name: names starting with '_'"),
        (#"{"recordTypes": {"Note": {"fields": {"x": {"type": "TEXT"}}}}}"#,
         "recordTypes.Note.fields.x.type: 'TEXT' is not a field type"),
        (#"{"recordTypes": {"Note": {"fields": {"x": {"type": "UNKNOWN_LIST"}}}}}"#, "'UNKNOWN_LIST' is not a field type"),
        (#"{"recordTypes": {"Note": {"fields": {"___etag": {"type": "INT64"}}}}}"#,
         "recordTypes.Note.fields.___etag.type: system field '___etag' must be STRING"),
        (#"{"roles": ["_world"]}"#, "roles[0]: invalid role name"),
        (#"{"recordTypes": {"Note": {"fields": []}}}"#, "recordTypes.Note.fields must be an object"),
    ])
    func badJSON(_ json: String, _ message: String) {
        #expect {
            try Schema(jsonBytes: Array(json.utf8))
        } throws: { error in
            #expect((error as? JSONDecodingError)?.description.contains(message) == true, "\(error)")
            return error is JSONDecodingError
        }
    }

    @Test("record types get the system fields and, from code, the default grants")
    func recordTypeDefaults() {
        let recordType = RecordTypeSchema(fields: ["___recordID": FieldSchema(type: .reference, indexes: .queryable)])
        #expect(recordType.grants == [
            SchemaGrant(.write, to: "_creator"), SchemaGrant(.create, to: "_icloud"), SchemaGrant(.read, to: "_world"),
        ])
        #expect(Set(recordType.fields.keys) == Set(RecordTypeSchema.systemFields.keys))
        #expect(recordType.fields["___recordID"]?.indexes == .queryable, "a given system field is kept")
        #expect(recordType.fields["___modTime"] == FieldSchema(type: .timestamp, indexes: []))
    }

    @Test("schema names and automatic indexes of every field type")
    func typeNames() {
        let expected: [FieldType: (String, FieldIndexes)] = [
            .string: ("STRING", [.queryable, .sortable, .searchable]), .int64: ("INT64", [.queryable, .sortable]),
            .double: ("DOUBLE", [.queryable, .sortable]), .timestamp: ("TIMESTAMP", [.queryable, .sortable]),
            .bytes: ("BYTES", []), .reference: ("REFERENCE", .queryable), .asset: ("ASSET", []),
            .location: ("LOCATION", .queryable), .stringList: ("LIST<STRING>", [.queryable, .searchable]),
            .int64List: ("LIST<INT64>", .queryable), .doubleList: ("LIST<DOUBLE>", .queryable),
            .timestampList: ("LIST<TIMESTAMP>", .queryable), .bytesList: ("LIST<BYTES>", []),
            .referenceList: ("LIST<REFERENCE>", .queryable), .assetList: ("LIST<ASSET>", []),
            .locationList: ("LIST<LOCATION>", .queryable), .unknownList: ("LIST<UNKNOWN>", []),
        ]
        for type in FieldType.allCases {
            #expect(type.schemaName == expected[type]?.0, "\(type)")
            #expect(FieldIndexes.automatic(for: type) == expected[type]?.1, "\(type)")
        }
        #expect(SchemaPermission.allCases.sorted() == [.read, .create, .write])
        #expect(SchemaGrant(.write, to: "A") < SchemaGrant(.read, to: "B"))
    }

    @Test("a deploy's changes are told by record type and field: each field under its own type, indexes, grants, roles, and what blocks it")
    func deployChanges() throws {
        let production = try Schema(parsing: """
            DEFINE SCHEMA
                CREATE ROLE Old;
                RECORD TYPE Note (title STRING QUERYABLE, body STRING, GRANT READ TO "_world");
                RECORD TYPE List (name STRING, GRANT READ TO "_world");
                RECORD TYPE Contact (name STRING, GRANT READ TO "_world");
            """)
        let development = try Schema(parsing: """
            DEFINE SCHEMA
                CREATE ROLE Editors;
                RECORD TYPE Note (title STRING QUERYABLE SORTABLE, body STRING, editedOn TIMESTAMP QUERYABLE, GRANT READ TO "_world");
                RECORD TYPE List (name STRING, title STRING, GRANT READ TO "_world", GRANT WRITE TO Editors);
                RECORD TYPE Contact (name INT64, modified TIMESTAMP, GRANT READ TO "_world");
                RECORD TYPE Tag (label STRING SEARCHABLE);
            """)
        let changes = development.deployChanges(from: production).map {
            "\($0.kind.rawValue) \($0.recordType).\($0.field ?? "") \($0.detail)"
        }
        #expect(
            changes == [
                "adds . role Editors",
                "removes . role Old",
                "adds Contact.modified TIMESTAMP",
                "blocks Contact.name field 'Contact.name' changes type from STRING to INT64",
                "changes List. grants READ to _world → WRITE to Editors, READ to _world",
                "adds List.title STRING",
                "adds Note.editedOn TIMESTAMP QUERYABLE",
                "changes Note.title indexes STRING QUERYABLE → STRING QUERYABLE SORTABLE",
                "adds Tag. record type",
                "adds Tag.label STRING SEARCHABLE",
            ], "\(changes)")
        #expect(development.nonAdditiveChanges(from: production) == ["field 'Contact.name' changes type from STRING to INT64"])
        #expect(production.deployChanges(from: production).isEmpty)
        let removal = production.deployChanges(from: development).filter { $0.kind == .blocks }.map(\.detail)
        #expect(removal.contains("record type 'Tag' is missing (production has it)"))
        #expect(removal.contains("field 'Note.editedOn' is missing (production has it)"))
    }
}
