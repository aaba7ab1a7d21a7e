import NIOHTTP1
import Foundation
import StratusServer
import StratusTestSupport
import Testing

@Suite("authentication and access")
struct AccessTests {
    @Test("API tokens, web auth tokens, sign-in redirects")
    func authentication() async throws {
        try await withServer { server async throws in
            let path = "/database/1/\(server.container)/development/private/zones/list"
            let noToken = try await server.request(.GET, path)
            #expect(noToken.status == 401 && noToken.code == "AUTHENTICATION_FAILED" && noToken.reason.contains("ckAPIToken"))
            let badToken = try await server.request(.GET, path, query: ["ckAPIToken": "nope"])
            #expect(badToken.status == 401 && badToken.code == "AUTHENTICATION_FAILED")

            let noUser = try await server.database("private", "zones/list")
            #expect(noUser.status == 421 && noUser.code == "AUTHENTICATION_REQUIRED")
            let redirect = try #require(noUser.body["redirectURL"] as? String)
            #expect(redirect.hasPrefix(server.baseURL + "/auth/1/\(server.container)/signin?ckAPIToken="))
            let page = try await server.request(.GET, String(redirect.dropFirst(server.baseURL.count)).components(separatedBy: "?")[0],
                                                query: ["ckAPIToken": server.apiToken])
            #expect(page.status == 200 && page.text.contains("<form"))
            #expect(page.headers.first(name: "X-Frame-Options") == "DENY", "no other site frames the page a password is typed in")
            #expect(page.text.contains("const openerOrigin = null;"), "without an admitted origin the token goes to no other window")
            let signInPath = "/auth/1/\(server.container)/signin"
            let foreign = try await server.request(
                .GET, signInPath, query: ["ckAPIToken": server.apiToken, "callback": "https://evil.example/steal"])
            #expect(foreign.status == 400 && foreign.reason.contains("loopback"), "\(foreign.text)")
            let native = try await server.request(
                .GET, signInPath, query: ["ckAPIToken": server.apiToken, "callback": "http://127.0.0.1:9999/done?x=</script>"])
            #expect(native.status == 200 && native.text.contains(#""http://127.0.0.1:9999/done?x=\u003c/script>""#))

            let badSession = try await server.database("private", "zones/list", user: "forged")
            #expect(badSession.status == 401 && badSession.code == "AUTHENTICATION_FAILED")

            let (alice, aliceName) = try await server.signUp("alice")
            let duplicate = try await server.request(
                .POST, "/auth/1/\(server.container)/signup", body: ["username": "alice", "password": "another pass"],
                query: ["ckAPIToken": server.apiToken])
            #expect(duplicate.status == 409 && duplicate.code == "EXISTS")
            let weak = try await server.request(
                .POST, "/auth/1/\(server.container)/signup", body: ["username": "bob", "password": "short"],
                query: ["ckAPIToken": server.apiToken])
            #expect(weak.status == 400 && weak.reason.contains("password"))
            let wrongPassword = try await server.request(
                .POST, "/auth/1/\(server.container)/signin", body: ["username": "alice", "password": "wrong password"],
                query: ["ckAPIToken": server.apiToken])
            #expect(wrongPassword.status == 401)
            let signIn = try await server.request(
                .POST, "/auth/1/\(server.container)/signin", body: ["username": "alice", "password": "correct horse"],
                query: ["ckAPIToken": server.apiToken])
            #expect(signIn.status == 200 && signIn.body["userRecordName"] as? String == aliceName)

            let caller = try await server.database("private", "users/caller", user: alice)
            #expect(caller.body["userRecordName"] as? String == aliceName)
            #expect((caller.body["users"] as? [[String: Any]])?.map { $0["userRecordName"] as? String } == [aliceName],
                    "Apple's reference answers an array of one identity: \(caller.text)")
            let current = try await server.database("public", "users/current", user: alice)
            #expect(current.body["userRecordName"] as? String == aliceName && current.body["firstName"] == nil)
            _ = try await server.database(
                "public", "users/discoverability",
                ["discoverable": true, "nameComponents": ["givenName": "Alice", "familyName": "Liddell"]], user: alice)
            let named = try await server.database("public", "users/current", user: alice)
            #expect(named.body["firstName"] as? String == "Alice" && named.body["lastName"] as? String == "Liddell",
                    "a discoverable user's names, as Apple answers them: \(named.text)")

            let signOut = try await server.request(
                .POST, "/auth/1/\(server.container)/signout", query: ["ckAPIToken": server.apiToken, "ckWebAuthToken": alice])
            #expect(signOut.status == 200)
            let afterSignOut = try await server.database("private", "zones/list", user: alice)
            #expect(afterSignOut.status == 401)

            let badEnvironment = try await server.database("private", "zones/list", user: alice, environment: "staging")
            #expect(badEnvironment.status == 400 && badEnvironment.reason.contains("environment"))
            let badDatabase = try await server.database("global", "zones/list", user: alice)
            #expect(badDatabase.status == 400 && badDatabase.reason.contains("database"))
        }
    }

    @Test("web auth tokens expire")
    func sessionExpiry() async throws {
        try await withServer(.init(port: 0, sessionLifetimeSeconds: 0, passwordHashCost: 4)) { server async throws in
            let alice = try await server.signUp("alice").token
            let reply = try await server.database("private", "zones/list", user: alice)
            #expect(reply.status == 401 && reply.reason.contains("expired"))
        }
    }

    @Test("user B cannot read or change user A's private data through any endpoint")
    func isolation() async throws {
        try await withServer { server async throws in
            let (alice, aliceName) = try await server.signUp("alice")
            let bob = try await server.signUp("bob").token
            try await server.createZone("Secret", user: alice)
            _ = try await server.modify([operation("create", "s1", fields: ["pin": ["value": "1234"]])], zone: "Secret", user: alice)
            _ = try await server.modify([operation("create", "d1")], user: alice)
            let aliceFeed = try await server.readFeed(zone: "Secret", user: alice)
            let aliceDatabaseToken = try #require(
                try await server.database("private", "changes/database", [String: Any](), user: alice).syncToken)
            let owned: [String: Any] = ["zoneName": "Secret", "ownerRecordName": aliceName]
            let unowned: [String: Any] = ["zoneName": "Secret"]

            let list = try await server.database("private", "zones/list", user: bob)
            #expect(list.zones.count == 1, "bob sees only his own default zone")
            #expect(try await server.database("private", "zones/lookup", ["zones": [owned]], user: bob).status == 403)
            #expect(try await server.database("private", "zones/lookup", ["zones": [unowned]], user: bob)
                .zones.first?["serverErrorCode"] as? String == "ZONE_NOT_FOUND")
            let deleteZone = try await server.database(
                "private", "zones/modify", ["operations": [["operationType": "delete", "zone": ["zoneID": owned]]]], user: bob)
            #expect(deleteZone.status == 403)
            #expect(try await server.database("private", "records/lookup", ["zoneID": owned, "records": [["recordName": "s1"]]], user: bob).status == 403)
            #expect(try await server.database("private", "records/lookup", ["zoneID": unowned, "records": [["recordName": "s1"]]], user: bob).status == 404)
            #expect(try await server.database("private", "records/lookup", ["records": [["recordName": "d1"]]], user: bob)
                .records.first?["serverErrorCode"] as? String == "NOT_FOUND")
            for type in ["forceUpdate", "forceReplace", "forceDelete"] {
                #expect(try await server.modify([operation(type, "s1")], user: bob, extra: ["zoneID": owned]).status == 403)
                #expect(try await server.modify([operation(type, "s1")], zone: "Secret", user: bob).status == 404)
            }
            #expect(try await server.modify([operation("forceDelete", "d1", recordType: nil)], user: bob)
                .records.first?["serverErrorCode"] as? String == "NOT_FOUND")
            #expect(try await server.database("private", "records/changes", ["zoneID": owned], user: bob).status == 403)
            #expect(try await server.database("private", "changes/zone", ["zones": [["zoneID": owned]]], user: bob)
                .zones.first?["serverErrorCode"] as? String == "ACCESS_DENIED")
            let stolenDatabaseToken = try await server.database("private", "changes/database", ["syncToken": aliceDatabaseToken], user: bob)
            #expect(stolenDatabaseToken.status == 410 && stolenDatabaseToken.zones.isEmpty)
            try await server.createZone("Secret", user: bob)
            let stolenZoneToken = try await server.database(
                "private", "records/changes", ["zoneID": unowned, "syncToken": aliceFeed.token], user: bob)
            #expect(stolenZoneToken.status == 410, "another user's zone token reveals nothing")
            #expect(try await server.readFeed(zone: "Secret", user: bob).records.isEmpty)
            #expect(try await server.database("private", "users/caller", user: bob).body["userRecordName"] as? String != aliceName)

            let aliceStill = try await server.readFeed(zone: "Secret", user: alice)
            #expect(aliceStill.records.count == 1 && aliceStill.token == aliceFeed.token, "alice's data is untouched")

            let admin = try await server.request(
                .POST, "/admin/1/containers", body: ["identifier": "iCloud.other"],
                headers: ["Authorization": "Bearer \(server.credentials.adminToken)"])
            let otherToken = try #require(admin.body["apiToken"] as? String)
            let crossContainer = try await server.request(
                .GET, "/database/1/iCloud.other/development/private/zones/list",
                query: ["ckAPIToken": otherToken, "ckWebAuthToken": alice])
            #expect(crossContainer.status == 401, "a session works only in its own container")
            let wrongContainer = try await server.request(
                .GET, "/database/1/iCloud.other/development/private/zones/list",
                query: ["ckAPIToken": server.apiToken, "ckWebAuthToken": alice])
            #expect(wrongContainer.status == 401, "an API token works only for its own container")
        }
    }

    @Test("public database: read with the API token, signed-in users create, only creators change")
    func publicDatabase() async throws {
        try await withServer { server async throws in
            let alice = try await server.signUp("alice").token
            let bob = try await server.signUp("bob").token
            let anonymousWrite = try await server.modify([operation("create", "p1")], user: nil, database: "public")
            #expect(anonymousWrite.status == 421)
            let created = try await server.modify([operation("create", "p1", fields: ["v": ["value": 1]])], user: alice, database: "public")
            let tag = try #require(created.records.first?["recordChangeTag"] as? String)
            #expect((created.records.first?["zoneID"] as? [String: Any])?["ownerRecordName"] as? String == "__defaultOwner__")

            let anonymousRead = try await server.database("public", "records/lookup", ["records": [["recordName": "p1"]]])
            #expect(anonymousRead.status == 200 && anonymousRead.records.first?["recordName"] as? String == "p1")
            let bobUpdate = try await server.modify(
                [operation("update", "p1", recordType: nil, tag: tag, fields: ["v": ["value": 2]])], user: bob, database: "public")
            #expect(bobUpdate.records.first?["serverErrorCode"] as? String == "ACCESS_DENIED")
            let bobDelete = try await server.modify([operation("forceDelete", "p1", recordType: nil)], user: bob, database: "public")
            #expect(bobDelete.records.first?["serverErrorCode"] as? String == "ACCESS_DENIED")
            let bobOwn = try await server.modify([operation("create", "p2")], user: bob, database: "public")
            #expect(bobOwn.records.first?["serverErrorCode"] == nil)
            let aliceUpdate = try await server.modify(
                [operation("update", "p1", recordType: nil, tag: tag, fields: ["v": ["value": 3]])], user: alice, database: "public")
            #expect(aliceUpdate.records.first?["serverErrorCode"] == nil)

            let zone = try await server.database(
                "public", "zones/modify", ["operations": [["operationType": "create", "zone": ["zoneID": ["zoneName": "Z"]]]]],
                user: alice)
            #expect(zone.status == 400)
            let production = try await server.database("public", "records/lookup", ["records": [["recordName": "p1"]]], environment: "production")
            #expect(production.records.first?["serverErrorCode"] as? String == "NOT_FOUND", "environments hold separate data")
        }
    }

    @Test("public database: another user's VALIDATE or DELETE_SELF reference binds nothing of the owner's")
    func publicReferencesBindOneCreator() async throws {
        try await withServer { server async throws in
            let alice = try await server.signUp("alice").token
            let bob = try await server.signUp("bob").token
            func pointing(_ name: String, to target: String, _ action: String) -> [String: Any] {
                operation("create", name, fields: ["to": ["value": ["recordName": target, "action": action], "type": "REFERENCE"]])
            }
            _ = try await server.modify([operation("create", "post")], user: alice, database: "public")
            let strangers = try await server.modify(
                [pointing("pin", to: "post", "VALIDATE"), pointing("reply", to: "post", "DELETE_SELF")], user: bob,
                database: "public")
            #expect(strangers.records.allSatisfy { $0["serverErrorCode"] == nil }, "\(strangers.text)")
            let own = try await server.modify([pointing("comment", to: "post", "DELETE_SELF")], user: alice, database: "public")
            #expect(own.records.first?["serverErrorCode"] == nil)
            let deleted = try await server.modify([operation("forceDelete", "post", recordType: nil)], user: alice, database: "public")
            #expect(deleted.records.first?["deleted"] as? Bool == true, "bob's VALIDATE does not keep alice's post: \(deleted.text)")
            let left = try await server.database(
                "public", "records/lookup", ["records": ["comment", "pin", "reply"].map { ["recordName": $0] }])
            #expect(left.records.map { $0["serverErrorCode"] as? String } == ["NOT_FOUND", nil, nil],
                    "alice's own DELETE_SELF record goes with the post, bob's records stay: \(left.text)")
        }
    }

    @Test("the shared database is empty until sharing exists")
    func sharedDatabase() async throws {
        try await withServer { server async throws in
            let alice = try await server.signUp("alice").token
            #expect(try await server.database("shared", "zones/list", user: alice).zones.isEmpty)
            let changes = try await server.database("shared", "changes/database", [String: Any](), user: alice)
            #expect(changes.status == 200 && changes.zones.isEmpty && changes.syncToken != nil)
            #expect(try await server.modify([operation("create", "x")], zone: "Z", user: alice, database: "shared").status == 404)
            let create = try await server.database(
                "shared", "zones/modify", ["operations": [["operationType": "create", "zone": ["zoneID": ["zoneName": "Z"]]]]],
                user: alice)
            #expect(create.status == 400)
            #expect(try await server.database("shared", "zones/list").status == 421)
        }
    }

    @Test("admin endpoints need the admin token and manage containers, tokens and users")
    func admin() async throws {
        try await withServer { server async throws in
            #expect(try await server.request(.GET, "/admin/1/containers").status == 401)
            #expect(try await server.request(.GET, "/admin/1/containers", headers: ["Authorization": "Bearer wrong"]).status == 401)
            let bearer = ["Authorization": "Bearer \(server.credentials.adminToken)"]
            let list = try await server.request(.GET, "/admin/1/containers", headers: bearer)
            #expect((list.body["containers"] as? [[String: Any]])?.first?["identifier"] as? String == ServerBootstrap.defaultContainer)

            let created = try await server.request(
                .POST, "/admin/1/containers", body: ["identifier": "iCloud.closed", "allowsSignUp": false], headers: bearer)
            #expect(created.status == 201)
            let token = try #require(created.body["apiToken"] as? String)
            let signUp = try await server.request(
                .POST, "/auth/1/iCloud.closed/signup", body: ["username": "eve", "password": "correct horse"],
                query: ["ckAPIToken": token])
            #expect(signUp.status == 403 && signUp.code == "ACCESS_DENIED")
            let user = try await server.request(
                .POST, "/admin/1/containers/iCloud.closed/users", body: ["username": "eve", "password": "correct horse"],
                headers: bearer)
            #expect(user.status == 201)
            let signIn = try await server.request(
                .POST, "/auth/1/iCloud.closed/signin", body: ["username": "eve", "password": "correct horse"],
                query: ["ckAPIToken": token])
            #expect(signIn.status == 200 && signIn.body["userRecordName"] as? String == user.body["userRecordName"] as? String)
            let second = try await server.request(
                .POST, "/admin/1/containers/iCloud.closed/tokens", body: ["name": "web"], headers: bearer)
            #expect(second.status == 201 && second.body["apiToken"] as? String != token)
            let duplicate = try await server.request(.POST, "/admin/1/containers", body: ["identifier": "iCloud.closed"], headers: bearer)
            #expect(duplicate.status == 409)
            let missing = try await server.request(
                .POST, "/admin/1/containers/iCloud.none/tokens", body: [String: Any](), headers: bearer)
            #expect(missing.status == 404)
        }
    }
}
