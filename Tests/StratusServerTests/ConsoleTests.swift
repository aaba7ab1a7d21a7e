import Foundation
import NIOHTTP1
import StratusServer
import StratusTestSupport
import Testing

/// The console at `/console`: only a signed-in session sees its pages, every change it makes carries
/// the session's CSRF token and lands in the audit log, sessions time out, and a person can do the
/// whole round in a real browser.
@Suite("Console")
struct ConsoleTests {
    /// A signed-in console session: its cookie and its CSRF token.
    struct Session {
        var cookie: String
        var csrf: String
    }

    static func signIn(_ server: TestServer) async throws -> Session {
        let reply = try await server.request(
            .POST, "/console/signin", rawBody: "token=" + server.credentials.adminToken,
            headers: ["Content-Type": "application/x-www-form-urlencoded"], followingRedirects: false)
        #expect(reply.status == 303, "\(reply.text)")
        let setCookie = try #require(reply.headers.first(name: "Set-Cookie"))
        #expect(setCookie.contains("HttpOnly") && setCookie.contains("SameSite=Strict"))
        let cookie = String(try #require(setCookie.split(separator: ";").first))
        let page = try await server.request(.GET, "/console/containers", headers: ["Cookie": cookie])
        let csrf = try #require(page.text.firstMatch(of: /<meta name="csrf" content="([^"]+)">/)?.output.1)
        return Session(cookie: cookie, csrf: String(csrf))
    }

    static let pages = [
        "/console/containers", "/console/containers/{c}", "/console/containers/{c}/data", "/console/containers/{c}/schema",
        "/console/containers/{c}/people", "/console/requests", "/console/requests/x", "/console/activity", "/console/health",
        "/console/audit",
    ]

    @Test("without a session every page sends the browser to sign in; with one each page renders")
    func pagesNeedASession() async throws {
        try await withServer { server in
            let encoded = server.container
            for page in Self.pages.map({ $0.replacingOccurrences(of: "{c}", with: encoded) }) {
                let anonymous = try await server.request(.GET, page, followingRedirects: false)
                #expect(anonymous.status == 303 && anonymous.headers.first(name: "Location") == "/console/signin", "\(page)")
                let forged = try await server.request(
                    .GET, page, headers: ["Cookie": "stratus_console=forged"], followingRedirects: false)
                #expect(forged.status == 303, "\(page)")
            }
            let session = try await Self.signIn(server)
            for page in Self.pages.map({ $0.replacingOccurrences(of: "{c}", with: encoded) }) where !page.hasSuffix("/x") {
                let reply = try await server.request(.GET, page, headers: ["Cookie": session.cookie])
                #expect(reply.status == 200, "\(page): \(reply.text)")
                #expect(reply.headers.first(name: "Content-Security-Policy")?.contains("frame-ancestors 'none'") == true)
                #expect(!reply.text.contains(server.credentials.adminToken), "the admin token never appears in a page")
            }
            let wrong = try await server.request(
                .POST, "/console/signin", rawBody: "token=wrong", headers: ["Content-Type": "application/x-www-form-urlencoded"])
            #expect(wrong.status == 401 && wrong.headers.first(name: "Set-Cookie") == nil)
            // Forms that are not well encoded are refused, never taken for anything else.
            for body in ["token=a b", "token=%zz", "token=#\"é", "&&=&token"] {
                let odd = try await server.request(
                    .POST, "/console/signin", rawBody: body, headers: ["Content-Type": "application/x-www-form-urlencoded"])
                #expect(odd.status == 400 || odd.status == 401, "\(body): \(odd.status) \(odd.text)")
            }
            #expect(try await server.request(.GET, "/health").status == 200)
        }
    }

    @Test("the API takes a console session only with its CSRF token; sign-out needs it too; every change is audited")
    func csrfAndAudit() async throws {
        try await withServer { server in
            let session = try await Self.signIn(server)
            let create = ["identifier": "iCloud.com.example.csrf"]
            for headers in [["Cookie": session.cookie], ["Cookie": session.cookie, "X-Stratus-Console-CSRF": "wrong"],
                            ["X-Stratus-Console-CSRF": session.csrf]] {
                let refused = try await server.request(.POST, "/admin/1/containers", body: create, headers: headers)
                #expect(refused.status == 401, "\(headers.keys.sorted()): \(refused.text)")
            }
            let made = try await server.request(
                .POST, "/admin/1/containers", body: create,
                headers: ["Cookie": session.cookie, "X-Stratus-Console-CSRF": session.csrf])
            #expect(made.status == 201, "\(made.text)")

            // Acting as a user on the database endpoints: the same checks as for the user.
            let (_, ada) = try await server.signUp("ada")
            let console = ["Cookie": session.cookie, "X-Stratus-Console-CSRF": session.csrf, "X-Stratus-Console-User": ada]
            let saved = try await server.request(
                .POST, "/database/1/\(server.container)/development/private/records/modify",
                body: ["operations": [["operationType": "create", "record": ["recordType": "Note", "recordName": "n1"]]]],
                headers: console)
            #expect(saved.status == 200 && saved.records.first?["serverErrorCode"] == nil, "\(saved.text)")
            var withoutCSRF = console
            withoutCSRF["X-Stratus-Console-CSRF"] = nil
            let refused = try await server.request(
                .POST, "/database/1/\(server.container)/development/private/records/lookup",
                body: ["records": [["recordName": "n1"]]], headers: withoutCSRF)
            #expect(refused.status == 401, "no API token and no verified console session: \(refused.text)")
            var stranger = console
            stranger["X-Stratus-Console-User"] = "_nobody"
            let unknown = try await server.request(
                .POST, "/database/1/\(server.container)/development/private/records/lookup",
                body: ["records": [["recordName": "n1"]]], headers: stranger)
            #expect(unknown.status == 404)

            let audit = try await server.request(
                .GET, "/admin/1/audit", headers: ["Authorization": "Bearer \(server.credentials.adminToken)"])
            let actions = (audit.body["entries"] as? [[String: Any]] ?? []).compactMap { $0["action"] as? String }
            #expect(actions.contains("POST /admin/1/containers"), "\(actions)")
            #expect(actions.contains { $0.hasSuffix("records/modify as \(ada)") }, "\(actions)")
            #expect(actions.contains("POST /console/signin"))
            let actors = (audit.body["entries"] as? [[String: Any]] ?? []).compactMap { $0["actor"] as? String }
            #expect(actors.allSatisfy { $0.contains(" from ") })

            let noToken = try await server.request(
                .POST, "/console/signout", rawBody: "csrf=wrong",
                headers: ["Cookie": session.cookie, "Content-Type": "application/x-www-form-urlencoded"])
            #expect(noToken.status == 401)
            let out = try await server.request(
                .POST, "/console/signout", rawBody: "csrf=" + session.csrf,
                headers: ["Cookie": session.cookie, "Content-Type": "application/x-www-form-urlencoded"], followingRedirects: false)
            #expect(out.status == 303)
            let after = try await server.request(
                .GET, "/console/containers", headers: ["Cookie": session.cookie], followingRedirects: false)
            #expect(after.status == 303, "the session ended")
        }
    }

    @Test("wrong admin tokens from one address back off, and while they do nothing is compared or audited")
    func adminTokenBackoff() async throws {
        let clock = ManualClock()
        let limits = SignInLimits(freeFailuresPerAddress: 3)
        let configuration = ServerConfiguration(port: 0, passwordHashCost: 4, signInLimits: limits, clock: clock.serverClock)
        try await withServer(configuration) { server in
            func signIn(_ token: String) async throws -> TestServer.Reply {
                try await server.request(
                    .POST, "/console/signin", rawBody: "token=" + token,
                    headers: ["Content-Type": "application/x-www-form-urlencoded"], followingRedirects: false)
            }
            // The free failures, then the one that starts the first lock (1 s).
            for _ in 0...limits.freeFailuresPerAddress {
                #expect(try await signIn("wrong").status == 401)
            }
            let locked = try await signIn(server.credentials.adminToken)
            #expect(locked.status == 429 && locked.headers.first(name: "Retry-After") == "1", "even the right token waits")
            #expect(locked.text.contains("Too many wrong tokens"))
            let admin = ["Authorization": "Bearer \(server.credentials.adminToken)"]
            let api = try await server.request(.GET, "/admin/1/audit", headers: admin)
            #expect(api.status == 429 && api.code == "THROTTLED", "the admin API shares the lock: \(api.text)")
            for _ in 0..<10 { _ = try await signIn("wrong") }

            clock.advance(bySeconds: 2)
            let audit = try await server.request(.GET, "/admin/1/audit", headers: admin)
            #expect(audit.status == 200, "\(audit.text)")
            let refused = (audit.body["entries"] as? [[String: Any]] ?? []).filter {
                ($0["actor"] as? String)?.hasPrefix("console sign-in (refused)") == true
            }
            #expect(refused.count == limits.freeFailuresPerAddress + 1, "only the tokens compared are audited")
            #expect(try await signIn(server.credentials.adminToken).status == 303, "the right token clears the address")
            #expect(try await signIn("wrong").status == 401)
        }
    }

    @Test("a session ends after thirty idle minutes")
    func idleTimeout() async throws {
        let clock = ManualClock()
        try await withServer(ServerConfiguration(port: 0, passwordHashCost: 4, clock: clock.serverClock)) { server in
            let session = try await Self.signIn(server)
            clock.advance(bySeconds: 29 * 60)
            #expect(try await server.request(.GET, "/console/health", headers: ["Cookie": session.cookie]).status == 200)
            clock.advance(bySeconds: 29 * 60)
            #expect(try await server.request(.GET, "/console/health", headers: ["Cookie": session.cookie]).status == 200)
            clock.advance(bySeconds: 31 * 60)
            let expired = try await server.request(
                .GET, "/console/health", headers: ["Cookie": session.cookie], followingRedirects: false)
            #expect(expired.status == 303)
        }
    }

    @Test("why a device is not syncing: its refused requests (even unauthenticated ones), its subscriptions and the notifications waiting for it")
    func deviceDiagnosis() async throws {
        try await withServer { server in
            let alice = try await server.signUp("alice")
            let bob = try await server.signUp("bob")
            try await server.createZone("Notes", user: alice.token)
            let subscribed = try await server.database(
                "private", "subscriptions/modify",
                ["operations": [["operationType": "create", "subscription": ["subscriptionID": "notes", "subscriptionType": "zone", "zoneID": ["zoneName": "Notes"]]]]],
                user: alice.token)
            #expect(subscribed.status == 200, "\(subscribed.text)")
            // The phone made a push token at an earlier launch too: one device, one row.
            _ = try await PollingDevice.register(server, user: alice.token, deviceID: "alices-phone").poll()
            let phone = try await PollingDevice.register(server, user: alice.token, deviceID: "alices-phone")
            _ = try await phone.poll()
            // The laptop writes; the phone, away, does not take the notification.
            let saved = try await server.modify([operation("create", "n1")], zone: "Notes", user: alice.token, device: "alices-laptop")
            #expect(saved.status == 200, "\(saved.text)")
            // The phone's session expired: its requests are refused before the server knows whose they are.
            let refused = try await server.database(
                "private", "records/changes", ["zoneID": ["zoneName": "Notes"]], user: "expired-session",
                headers: ["X-Stratus-Device-ID": "alices-phone"])
            #expect(refused.status == 401 && refused.code == "AUTHENTICATION_FAILED", "\(refused.text)")
            // Bob's device, refused the same way, is not Alice's.
            _ = try await server.database("private", "records/changes", ["zoneID": ["zoneName": "Notes"]], user: bob.token, headers: ["X-Stratus-Device-ID": "bobs-phone"])
            _ = try await server.database("private", "records/changes", [:], user: "expired", headers: ["X-Stratus-Device-ID": "bobs-phone"])

            // Alice shares the zone with Bob, who has not accepted yet.
            let shared = try await server.modify(
                [[
                    "operationType": "create",
                    "record": [
                        "recordName": "cloudkit.zoneshare", "recordType": "cloudkit.share", "fields": [String: Any](),
                        "publicPermission": "NONE",
                        "participants": [[
                            "type": "USER", "permission": "READ_WRITE", "acceptanceStatus": "INVITED",
                            "userIdentity": ["lookupInfo": ["userRecordName": bob.recordName]],
                        ]],
                    ] as [String: Any],
                ]], zone: "Notes", user: alice.token)
            #expect(shared.status == 200 && !shared.text.contains("serverErrorCode"), "\(shared.text)")

            let session = try await Self.signIn(server)
            let people = try await server.request(
                .GET, "/console/containers/\(server.container)/people", query: ["user": alice.recordName],
                headers: ["Cookie": session.cookie])
            #expect(people.status == 200)
            let page = people.text
            #expect(
                page.components(separatedBy: "href=\"/console/requests?device=alices-phone\"").count == 2,
                "the device, with its two tokens, is one row linking to its requests")
            #expect(page.contains("<td>alice (\(alice.recordName))</td>"), "requests name their user by username")
            #expect(page.contains("<td>notes</td><td>private</td><td>Notes</td>"), "the waiting notification is listed: \(page)")
            #expect(page.contains("AUTHENTICATION_FAILED"), "the phone's refused request is among the user's")
            #expect(!page.contains("bobs-phone"), "another user's device is not")
            #expect(page.contains("<td>Notes</td><td>this user</td><td>bob (read-write, invited)</td>"), "the share lists who is invited")
            #expect(
                page.contains("<td>development</td><td>private</td><td>notes</td><td>zone</td><td>zone Notes</td><td>any change</td><td>silent</td>"),
                "the subscription reads as a row, not JSON: \(page)")

            let byName = try await server.request(
                .GET, "/console/requests", query: ["user": "alice", "status": "401"], headers: ["Cookie": session.cookie])
            #expect(!byName.text.contains("AUTHENTICATION_FAILED"), "a refused request has no user to match")
            let byDevice = try await server.request(
                .GET, "/console/requests", query: ["device": "alices-phone", "status": "401"], headers: ["Cookie": session.cookie])
            #expect(byDevice.text.components(separatedBy: "AUTHENTICATION_FAILED").count == 2, "\(byDevice.text)")
            let aliceOK = try await server.request(
                .GET, "/console/requests", query: ["user": "alice", "status": "200"], headers: ["Cookie": session.cookie])
            #expect(aliceOK.text.contains("records/modify") && !aliceOK.text.contains("bobs-phone"))

            // The container's page lists the databases written, by owner, and a way to revoke each API token.
            let containerPage = try await server.request(
                .GET, "/console/containers/\(server.container)", headers: ["Cookie": session.cookie])
            #expect(containerPage.text.contains("<td>development</td><td>private</td><td>alice</td>"), "\(containerPage.text)")
            #expect(containerPage.text.contains("data-method=\"DELETE\" data-confirm=\"Revoke the API token default?"))
            // It shows what each user holds, and the quotas in force, ready to change.
            #expect(containerPage.text.contains("records, "), "\(containerPage.text)")
            #expect(containerPage.text.contains("the server&#39;s defaults"))
            #expect(containerPage.text.contains(#"name="user.records" data-type="limit" value="10000000""#))
            #expect(containerPage.text.contains(#"name="container.records" data-type="limit" value="""#))
        }
    }

    @Test("the activity charts have axes: the peak and 0 on the left, the last hour marked every quarter")
    func activityAxes() async throws {
        try await withServer { server in
            let session = try await Self.signIn(server)
            let page = try await server.request(.GET, "/console/activity", headers: ["Cookie": session.cookie])
            #expect(page.status == 200)
            #expect(page.text.components(separatedBy: "<svg ").count == 7, "six charts")
            for label in [">−60 min</text>", ">−45 min</text>", ">−30 min</text>", ">−15 min</text>", ">now</text>", ">0</text>"] {
                #expect(page.text.components(separatedBy: label).count == 7, "every chart has \(label)")
            }
            #expect(page.text.contains("/s</text>") && page.text.contains(" ms</text>"), "the peak is labelled with its unit")
        }
    }

    @Test("the schema page says what a deploy does, field by field under its own record type")
    func schemaDeployChanges() async throws {
        try await withServer { server in
            let before = """
                DEFINE SCHEMA
                    RECORD TYPE Note (title STRING QUERYABLE, GRANT READ TO "_world");
                    RECORD TYPE List (name STRING, GRANT READ TO "_world");
                """
            #expect(try await SchemaTests.admin(server, .PUT, "environments/development/schema", text: before).status == 200)
            #expect(try await SchemaTests.admin(server, .POST, "deploy-schema").status == 200)
            let after = """
                DEFINE SCHEMA
                    RECORD TYPE Note (title STRING QUERYABLE SORTABLE, editedOn TIMESTAMP, GRANT READ TO "_world");
                    RECORD TYPE List (name STRING, title STRING, GRANT READ TO "_world");
                """
            let replaced = try await SchemaTests.admin(server, .PUT, "environments/development/schema", text: after)
            #expect(replaced.status == 200, "\(replaced.text)")
            let session = try await Self.signIn(server)
            let page = try await server.request(
                .GET, "/console/containers/\(server.container)/schema", headers: ["Cookie": session.cookie])
            for row in [
                "<tr class=\"adds\"><td>Note</td><td>editedOn</td><td>adds</td><td>TIMESTAMP</td></tr>",
                "<tr class=\"adds\"><td>List</td><td>title</td><td>adds</td><td>STRING</td></tr>",
                "<tr class=\"changes\"><td>Note</td><td>title</td><td>changes</td><td>indexes STRING QUERYABLE → STRING QUERYABLE SORTABLE</td></tr>",
            ] {
                #expect(page.text.contains(row), "\(row)\n\(page.text)")
            }
            #expect(!page.text.contains("<td>List</td><td>editedOn</td>"), "a field under another type")
            #expect(
                page.text.components(separatedBy: "<tr class=\"adds\">").count == 3
                    && page.text.components(separatedBy: "<tr class=\"changes\">").count == 2,
                "only what changes: two fields added, one field's indexes")
            // Pages name their icon, so that browsers do not ask for /favicon.ico (a 404 in the log each time).
            #expect(page.text.contains(#"<link rel="icon" href="data:,">"#))
        }
    }

    @Test("in headless Chromium: sign in, create a container and a user, create, edit and query a record, deploy the schema, read the live log and the audit log")
    func browserWalkthrough() async throws {
        try await withServer { server in
            let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent()
            let screenshots = root.appendingPathComponent(".build/test-output/console")
            try? FileManager.default.removeItem(at: screenshots)
            let run = try await runChildProcess(
                URL(fileURLWithPath: "/usr/bin/env"),
                ["python3", root.appendingPathComponent("scripts/console-walkthrough.py").path, server.baseURL,
                 server.credentials.adminToken, screenshots.path])
            #expect(
                run.status == 0,
                "the walkthrough failed (scripts/test installs chromium, chromium-driver and selenium):\n\(run.output)\n\(run.errors)")
            let shots = (try? FileManager.default.contentsOfDirectory(atPath: screenshots.path)) ?? []
            #expect(shots.filter { $0.hasSuffix(".png") }.count >= 16, "\(shots)")
        }
    }
}
