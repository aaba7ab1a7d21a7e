import Foundation
import NIOHTTP1
import StratusModel
import StratusServer
import StratusSQLite
import StratusStorage
import StratusTestSupport
import Testing

@Suite("schema, environments and grants")
struct SchemaTests {
    static let schemaText = """
        DEFINE SCHEMA
            RECORD TYPE Note (
                title     STRING QUERYABLE SORTABLE SEARCHABLE,
                body      STRING,
                modified  TIMESTAMP SORTABLE,
                GRANT WRITE TO "_creator",
                GRANT CREATE TO "_icloud",
                GRANT READ TO "_world"
            );
            RECORD TYPE Secret (
                text STRING,
                GRANT CREATE TO "_icloud",
                GRANT READ, WRITE TO "_creator"
            );
            RECORD TYPE Board (
                text STRING QUERYABLE,
                GRANT CREATE, WRITE TO "_icloud",
                GRANT READ TO "_world"
            );
            RECORD TYPE Locked (
                text STRING,
                GRANT READ TO "_world"
            );
            RECORD TYPE Dropbox (
                text STRING,
                GRANT CREATE, WRITE TO "_icloud",
                GRANT READ TO "_creator"
            );
        """

    /// Calls the admin API.
    static func admin(
        _ server: TestServer, _ method: HTTPMethod, _ path: String, text: String? = nil
    ) async throws -> TestServer.Reply {
        try await server.request(
            method, "/admin/1/containers/\(server.container)/\(path)", rawBody: text,
            headers: ["Authorization": "Bearer \(server.credentials.adminToken)"])
    }

    @Test("development grows its schema on save; export, import and deploy; production refuses the unknown")
    func environments() async throws {
        try await withServer { server async throws in
            let (user, _) = try await server.signUp("devon")

            // Just-in-time schema: saving in development defines the type and its fields.
            let saved = try await server.modify(
                [operation("create", "n1", fields: ["title": ["value": "Hello"], "stars": ["value": 4]])], user: user)
            #expect(saved.status == 200 && saved.records.first?["serverErrorCode"] == nil, "\(saved.text)")
            let exported = try await Self.admin(server, .GET, "environments/development/schema")
            #expect(exported.status == 200 && exported.text.hasPrefix("DEFINE SCHEMA"), "\(exported.text)")
            #expect(exported.text.contains("stars") && exported.text.contains("INT64"))
            let wrongType = try await server.modify(
                [operation("create", "n2", fields: ["stars": ["value": "four"]])], user: user)
            #expect(wrongType.records.first?["serverErrorCode"] as? String == "BAD_REQUEST")
            #expect(wrongType.firstReason.contains("'stars'"), "\(wrongType.text)")

            // Export → import is a round trip.
            let imported = try await Self.admin(server, .PUT, "environments/development/schema", text: exported.text)
            #expect(imported.status == 200 && imported.text == exported.text, "\(imported.text)")
            let broken = try await Self.admin(server, .PUT, "environments/development/schema", text: "DEFINE SCHEMA RECORD TYPE (")
            #expect(broken.status == 400 && broken.reason.contains("line 1"), "\(broken.text)")
            let replaced = try await Self.admin(server, .PUT, "environments/development/schema", text: Self.schemaText)
            #expect(replaced.status == 200, "\(replaced.text)")

            // Production knows nothing until a deploy.
            let beforeDeploy = try await server.modify(
                [operation("create", "p1", fields: ["title": ["value": "x"]])], user: user, environment: "production")
            #expect(beforeDeploy.firstReason.contains("not in the production schema"))
            let deployed = try await Self.admin(server, .POST, "deploy-schema")
            #expect(deployed.status == 200 && deployed.text.contains("RECORD TYPE Secret"), "\(deployed.text)")
            #expect(try await Self.admin(server, .GET, "environments/production/schema").text == deployed.text)

            let good = try await server.modify(
                [operation("create", "p1", fields: ["title": ["value": "x"], "body": ["value": "y"]])], user: user,
                environment: "production")
            #expect(good.records.first?["serverErrorCode"] == nil, "\(good.text)")
            let unknownField = try await server.modify(
                [operation("create", "p2", fields: ["title": ["value": "x"], "color": ["value": "red"]])], user: user,
                environment: "production")
            #expect(unknownField.records.first?["serverErrorCode"] as? String == "BAD_REQUEST")
            #expect(unknownField.firstReason.contains("field 'color'"), "\(unknownField.text)")
            let unknownType = try await server.modify(
                [operation("create", "p3", recordType: "Photo", fields: [:])], user: user, environment: "production")
            #expect(unknownType.firstReason.contains("record type 'Photo'"))
            let wrongProductionType = try await server.modify(
                [operation("create", "p4", fields: ["modified": ["value": "yesterday"]])], user: user, environment: "production")
            #expect(wrongProductionType.firstReason.contains("TIMESTAMP"))

            // Production queries need the index their comparator reads.
            func query(_ filter: [String: Any]) async throws -> TestServer.Reply {
                try await server.database(
                    "private", "records/query", ["query": ["recordType": "Note", "filterBy": [filter]]], user: user,
                    environment: "production")
            }
            let indexed = try await query(QueryTests.filter("EQUALS", "title", "x"))
            #expect(indexed.status == 200 && indexed.records.count == 1, "\(indexed.text)")
            let unindexed = try await query(QueryTests.filter("EQUALS", "body", "y"))
            #expect(unindexed.status == 400 && unindexed.reason.contains("'body'") && unindexed.reason.contains("QUERYABLE"))
            let notSortable = try await query(QueryTests.filter("GREATER_THAN", "title", "a"))
            #expect(notSortable.status == 200, "title is SORTABLE")
            let missing = try await query(QueryTests.filter("EQUALS", "color", "red"))
            #expect(missing.status == 400 && missing.reason.contains("'color'"))
        }
    }

    @Test("deploy refuses changes that are not additive, naming them; reset reverts development")
    func deployAndReset() async throws {
        try await withServer { server async throws in
            let (user, _) = try await server.signUp("rita")
            #expect(try await Self.admin(server, .PUT, "environments/development/schema", text: Self.schemaText).status == 200)
            #expect(try await Self.admin(server, .POST, "deploy-schema").status == 200)

            // Importing a development schema that production could never take is refused.
            let shrunk = Self.schemaText.replacingOccurrences(of: "body      STRING,", with: "")
                .replacingOccurrences(of: "modified  TIMESTAMP SORTABLE", with: "modified  INT64 SORTABLE")
            let refusedImport = try await Self.admin(server, .PUT, "environments/development/schema", text: shrunk)
            #expect(refusedImport.status == 400 && refusedImport.reason.contains("'Note.body'"), "\(refusedImport.text)")

            // A development schema that lost a field (possible only through storage) cannot be deployed.
            _ = try await server.storage.updateSchema(container: server.container, environment: .development) { schema in
                var schema = schema
                schema.recordTypes["Note"]?.fields["body"] = nil
                schema.recordTypes["Board"] = nil
                return schema
            }
            let refusedDeploy = try await Self.admin(server, .POST, "deploy-schema")
            #expect(refusedDeploy.status == 400, "\(refusedDeploy.text)")
            #expect(refusedDeploy.reason.contains("'Note.body'") && refusedDeploy.reason.contains("'Board'"))

            // Reset wipes development's data and restores production's schema.
            try await server.createZone("Z", user: user)
            _ = try await server.modify(
                [operation("create", "d1", fields: ["title": ["value": "draft"], "extra": ["value": 1]])], zone: "Z", user: user)
            let reset = try await Self.admin(server, .POST, "reset-development")
            #expect(reset.status == 204, "\(reset.text)")
            let zones = try await server.database("private", "zones/list", user: user)
            #expect(zones.zones.compactMap { ($0["zoneID"] as? [String: Any])?["zoneName"] as? String } == ["_defaultZone"])
            let development = try await Self.admin(server, .GET, "environments/development/schema")
            let production = try await Self.admin(server, .GET, "environments/production/schema")
            #expect(development.text == production.text && !development.text.contains("extra"))
            let unauthorized = try await server.request(.POST, "/admin/1/containers/\(server.container)/deploy-schema")
            #expect(unauthorized.status == 401)
        }
    }

    @Test("public-database grants decide who creates, changes and reads")
    func grants() async throws {
        try await withServer { server async throws in
            let (alice, _) = try await server.signUp("alice")
            let (bob, _) = try await server.signUp("bob")
            #expect(try await Self.admin(server, .PUT, "environments/development/schema", text: Self.schemaText).status == 200)
            func save(_ operations: [[String: Any]], as user: String) async throws -> [String: Any] {
                try await server.modify(operations, user: user, database: "public").records.first ?? [:]
            }
            #expect(try await save([operation("create", "s1", recordType: "Secret", fields: ["text": ["value": "mine"]])],
                                   as: alice)["serverErrorCode"] == nil)
            #expect(try await save([operation("create", "b1", recordType: "Board", fields: ["text": ["value": "hello"]])],
                                   as: alice)["serverErrorCode"] == nil)
            let locked = try await save(
                [operation("create", "l1", recordType: "Locked", fields: ["text": ["value": "x"]])], as: alice)
            #expect(locked["serverErrorCode"] as? String == "ACCESS_DENIED" && (locked["reason"] as? String ?? "").contains("CREATE"))

            // WRITE to _icloud: anyone signed in may change the record; WRITE to _creator: only alice.
            let boardEdit = try await save(
                [operation("forceUpdate", "b1", recordType: "Board", fields: ["text": ["value": "bob was here"]])], as: bob)
            #expect(boardEdit["serverErrorCode"] == nil, "\(boardEdit)")
            let secretEdit = try await save(
                [operation("forceUpdate", "s1", recordType: "Secret", fields: ["text": ["value": "stolen"]])], as: bob)
            #expect(secretEdit["serverErrorCode"] as? String == "ACCESS_DENIED")

            // READ to _creator: bob neither finds nor reads alice's secret; READ to _world: anyone reads.
            let bobQuery = try await QueryTests.run(server, user: bob, recordType: "Secret", zone: nil, database: "public")
            #expect(bobQuery.names.isEmpty)
            let aliceQuery = try await QueryTests.run(server, user: alice, recordType: "Secret", zone: nil, database: "public")
            #expect(aliceQuery.names == ["s1"])
            let bobLookup = try await server.database("public", "records/lookup", ["records": [["recordName": "s1"]]], user: bob)
            #expect(bobLookup.records.first?["serverErrorCode"] as? String == "ACCESS_DENIED")
            let anonymous = try await server.database("public", "records/lookup", ["records": [["recordName": "b1"]]])
            #expect(anonymous.records.first?["recordName"] as? String == "b1", "\(anonymous.text)")
            let anonymousSecret = try await server.database(
                "public", "records/query", ["query": ["recordType": "Secret"]])
            #expect(anonymousSecret.status == 403 && anonymousSecret.code == "ACCESS_DENIED")

            // A refused write hands out the stored record only to whoever may read it: bob's create
            // over alice's secret is EXISTS without it, alice's own gets it, and bob's create over
            // the board (READ to _world) gets the board.
            let bobCreate = try await save([operation("create", "s1", recordType: "Secret", fields: [:])], as: bob)
            #expect(bobCreate["serverErrorCode"] as? String == "EXISTS" && bobCreate["serverRecord"] == nil, "\(bobCreate)")
            let aliceCreate = try await save([operation("create", "s1", recordType: "Secret", fields: [:])], as: alice)
            let aliceServerRecord = aliceCreate["serverRecord"] as? [String: Any]
            #expect(aliceCreate["serverErrorCode"] as? String == "EXISTS" && aliceServerRecord?["recordName"] as? String == "s1")
            let boardCreate = try await save([operation("create", "b1", recordType: "Board", fields: [:])], as: bob)
            #expect((boardCreate["serverRecord"] as? [String: Any])?["recordName"] as? String == "b1", "\(boardCreate)")

            // A record one may write but not read comes back from the write with its system fields
            // alone: bob's note in alice's dropbox does not show him what else is in it.
            #expect(try await save([operation("create", "d1", recordType: "Dropbox", fields: ["text": ["value": "alice's"]])],
                                   as: alice)["fields"] != nil)
            let dropped = try await save(
                [operation("forceUpdate", "d1", recordType: "Dropbox", fields: ["note": ["value": "from bob"]])], as: bob)
            #expect(dropped["serverErrorCode"] == nil && dropped["recordChangeTag"] is String, "\(dropped)")
            #expect(dropped["fields"] == nil || (dropped["fields"] as? [String: Any])?.isEmpty == true, "\(dropped)")
        }
    }
}
