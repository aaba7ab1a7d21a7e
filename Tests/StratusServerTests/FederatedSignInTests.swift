import Crypto
import Foundation
import Hummingbird
import NIOHTTP1
import StratusServer
import StratusTestSupport
import Synchronization
import Testing
import _CryptoExtras

/// Sign-in without a password: Sign in with Apple (against a local issuer standing in for Apple's
/// keys URL, with Apple's documented claims) and a real OpenID Connect provider on loopback
/// (`scripts/oidc-provider.py`), hostile tokens, linking, the operator's view, and Apple's
/// account notifications.
@Suite("Sign in with Apple and OpenID Connect")
struct FederatedSignInTests {
    static let bundleID = "com.example.notes"

    /// Apple's key set on loopback: an RSA and a P-256 key, the JWKS they publish (which a test
    /// may change, as Apple rotates keys), and how many times it was fetched.
    final class AppleStandIn: Sendable {
        let rsa = try! _RSA.Signing.PrivateKey(keySize: .bits2048)
        let ec = P256.Signing.PrivateKey()
        let fetches = Atomic<Int>(0)
        let published: Mutex<[String]>
        let port: Int
        private let task: Task<Void, any Error>

        var keysURL: String { "http://127.0.0.1:\(port)/auth/keys" }

        static func start() async throws -> AppleStandIn {
            let (ports, continuation) = AsyncStream<Int>.makeStream()
            let box = Mutex<AppleStandIn?>(nil)
            let router = Router()
            router.get("auth/keys") { _, _ -> Response in
                let standIn = box.withLock { $0 }!
                standIn.fetches.add(1, ordering: .relaxed)
                let keys = standIn.published.withLock { $0 }.joined(separator: ",")
                return Response(
                    status: .ok, headers: [.contentType: "application/json"],
                    body: ResponseBody(byteBuffer: ByteBuffer(string: #"{"keys":[\#(keys)]}"#)))
            }
            let app = Application(
                router: router, configuration: ApplicationConfiguration(address: .hostname("127.0.0.1", port: 0)),
                onServerRunning: { continuation.yield($0.localAddress?.port ?? 0) })
            let task = Task { try await app.runService() }
            var iterator = ports.makeAsyncIterator()
            let port = await iterator.next() ?? 0
            let standIn = AppleStandIn(port: port, task: task)
            box.withLock { $0 = standIn }
            return standIn
        }

        private init(port: Int, task: Task<Void, any Error>) {
            self.port = port
            self.task = task
            published = Mutex([])
            published.withLock { $0 = [Self.jwk(rsa.publicKey, id: "apple-rsa-1"), Self.jwk(ec.publicKey, id: "apple-ec-1")] }
        }

        func stop() { task.cancel() }

        static func jwk(_ key: _RSA.Signing.PublicKey, id: String) -> String {
            let primitives = try! key.getKeyPrimitives()
            return #"{"kty":"RSA","kid":"\#(id)","use":"sig","alg":"RS256","n":"\#(b64(primitives.modulus))","e":"\#(b64(primitives.publicExponent))"}"#
        }

        static func jwk(_ key: P256.Signing.PublicKey, id: String) -> String {
            let point = key.x963Representation
            return #"{"kty":"EC","kid":"\#(id)","use":"sig","crv":"P-256","x":"\#(b64(point[1..<33]))","y":"\#(b64(point[33...]))"}"#
        }

        /// An identity token as Apple issues it for `subject`, at `now` (seconds), its nonce the
        /// SHA-256 of `nonce`, signed with the RSA key unless `sign` says otherwise.
        func token(
            subject: String, nonce: String, now: Int64, email: String? = "x7f2k9@privaterelay.appleid.com",
            extra: [String: Any] = [:], header: [String: Any] = ["alg": "RS256", "kid": "apple-rsa-1"],
            sign: ((Data) throws -> Data)? = nil
        ) throws -> String {
            var claims: [String: Any] = [
                "iss": "https://appleid.apple.com", "aud": FederatedSignInTests.bundleID, "sub": subject,
                "iat": now, "exp": now + 600, "nonce": sha256Hex(nonce), "nonce_supported": true,
                "auth_time": now, "real_user_status": 2,
            ]
            if let email {
                claims["email"] = email
                claims["email_verified"] = "true"
                claims["is_private_email"] = "true"
            }
            for (key, value) in extra { claims[key] = value }
            return try FederatedSignInTests.jwt(header: header, claims: claims) { input in
                if let sign { return try sign(input) }
                return try self.rsa.signature(for: input, padding: .insecurePKCS1v1_5).rawRepresentation
            }
        }
    }

    static func b64<Bytes: Sequence<UInt8>>(_ bytes: Bytes) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    static func sha256Hex(_ text: String) -> String {
        SHA256.hash(data: Data(text.utf8)).map { String(format: "%02x", $0) }.joined()
    }

    static func jwt(header: [String: Any], claims: [String: Any], sign: (Data) throws -> Data) throws -> String {
        let input =
            b64(try JSONSerialization.data(withJSONObject: header, options: .sortedKeys)) + "."
            + b64(try JSONSerialization.data(withJSONObject: claims, options: .sortedKeys))
        return input + "." + b64(try sign(Data(input.utf8)))
    }

    static func admin(
        _ server: TestServer, _ method: HTTPMethod, _ path: String, _ body: Any? = nil, query: [String: String] = [:]
    ) async throws -> TestServer.Reply {
        try await server.request(
            method, "/admin/1/containers/\(server.container)/\(path)", body: body, query: query,
            headers: ["Authorization": "Bearer \(server.credentials.adminToken)"])
    }

    static func tokenSignIn(
        _ server: TestServer, provider: String = "apple", token: String, nonce: String, extra: [String: Any] = [:]
    ) async throws -> TestServer.Reply {
        var body: [String: Any] = ["provider": provider, "identityToken": token, "nonce": nonce]
        for (key, value) in extra { body[key] = value }
        return try await server.request(
            .POST, "/auth/1/\(server.container)/signin/token", body: body, query: ["ckAPIToken": server.apiToken])
    }

    static func userCount(_ server: TestServer) async throws -> Int {
        (try await admin(server, .GET, "users").body["users"] as? [[String: Any]])?.count ?? -1
    }

    static func withApple(
        _ body: (TestServer, AppleStandIn, ManualClock) async throws -> Void
    ) async throws {
        let clock = ManualClock()
        let apple = try await AppleStandIn.start()
        defer { apple.stop() }
        try await withServer(ServerConfiguration(port: 0, passwordHashCost: 4, clock: clock.serverClock)) { server in
            let configured = try await admin(
                server, .PUT, "signin/apple", ["clientIDs": [bundleID, "com.example.notes.web"], "keysURL": apple.keysURL])
            #expect(configured.status == 200, "\(configured.text)")
            try await body(server, apple, clock)
        }
    }

    @Test("an Apple identity token signs in, creating the account once; later tokens without an e-mail find it by (issuer, subject)")
    func appleSignIn() async throws {
        try await Self.withApple { server, apple, clock in
            let now = clock.milliseconds / 1000
            let first = try await Self.tokenSignIn(
                server, token: try apple.token(subject: "001234.abcd", nonce: "n-1", now: now), nonce: "n-1",
                extra: ["givenName": "Mei", "familyName": "Chen"])
            #expect(first.status == 200, "\(first.text)")
            let session = try #require(first.body["ckWebAuthToken"] as? String)
            let user = try #require(first.body["userRecordName"] as? String)
            let caller = try await server.database("private", "users/caller", user: session)
            #expect(caller.status == 200 && caller.text.contains(user), "\(caller.text)")

            // Apple leaves the e-mail out of later tokens: the same account, the address kept.
            clock.advance(bySeconds: 3600)
            let later = try await Self.tokenSignIn(
                server, token: try apple.token(subject: "001234.abcd", nonce: "n-2", now: now + 3600, email: nil),
                nonce: "n-2")
            #expect(later.status == 200 && later.body["userRecordName"] as? String == user, "\(later.text)")
            #expect(try await Self.userCount(server) == 1)
            let identities = try await Self.admin(server, .GET, "users/\(user)/identities")
            let identity = try #require((identities.body["identities"] as? [[String: Any]])?.first, "\(identities.text)")
            #expect(identity["provider"] as? String == "apple" && identity["subject"] as? String == "001234.abcd")
            #expect(identity["emailAddress"] as? String == "x7f2k9@privaterelay.appleid.com")
            #expect(identity["lastSignIn"] as? Int64 == clock.milliseconds || identity["lastSignIn"] as? Int == Int(clock.milliseconds))

            // The user signs in with the provider; the account lists it and has no password.
            let listed = try await server.request(
                .GET, "/auth/1/\(server.container)/identities", query: ["ckAPIToken": server.apiToken, "ckWebAuthToken": session])
            #expect(listed.status == 200 && listed.body["hasPassword"] as? Bool == false, "\(listed.text)")

            // An ES256 token of Apple's other key signs in too.
            let es256 = try apple.token(
                subject: "001234.abcd", nonce: "n-3", now: now + 3600, header: ["alg": "ES256", "kid": "apple-ec-1"]
            ) { try apple.ec.signature(for: $0).rawRepresentation }
            #expect(try await Self.tokenSignIn(server, token: es256, nonce: "n-3").status == 200)
        }
    }

    @Test("hostile tokens are refused with a reason and create no account; an unknown kid costs one refresh of the key set a minute")
    func hostileTokens() async throws {
        try await Self.withApple { server, apple, clock in
            let now = clock.milliseconds / 1000
            _ = try await server.signUp("ada")
            let ada = try #require((try await Self.admin(server, .GET, "users").body["users"] as? [[String: Any]])?.first)
            let adaName = try #require(ada["userRecordName"] as? String)
            #expect(try await Self.admin(server, .PATCH, "users/\(adaName)", ["emailAddress": "ada@example.com"]).status == 200)
            let before = try await Self.userCount(server)
            let other = try _RSA.Signing.PrivateKey(keySize: .bits2048)
            let publicPEM = Data(apple.rsa.publicKey.pemRepresentation.utf8)

            // Each case: what it is, the nonce sent, the token, and what the refusal names.
            let cases: [(String, String, String, String)] = [
                ("wrong signature", "a",
                 try apple.token(subject: "s1", nonce: "a", now: now) { try other.signature(for: $0, padding: .insecurePKCS1v1_5).rawRepresentation },
                 "signature"),
                ("alg none", "b",
                 try apple.token(subject: "s1", nonce: "b", now: now, header: ["alg": "none"]) { _ in Data() }, "alg 'none'"),
                ("HS256 keyed with the public key", "c",
                 try apple.token(subject: "s1", nonce: "c", now: now, header: ["alg": "HS256", "kid": "apple-rsa-1"]) { input in
                     Data(HMAC<SHA256>.authenticationCode(for: input, using: SymmetricKey(data: publicPEM)))
                 }, "alg 'HS256'"),
                ("wrong audience", "d", try apple.token(subject: "s1", nonce: "d", now: now, extra: ["aud": "com.evil.app"]), "meant for"),
                ("wrong issuer", "e", try apple.token(subject: "s1", nonce: "e", now: now, extra: ["iss": "https://evil.example"]), "issued by"),
                ("expired", "f", try apple.token(subject: "s1", nonce: "f", now: now, extra: ["exp": now - 3600, "iat": now - 4200]), "expired"),
                ("issued in the future", "g", try apple.token(subject: "s1", nonce: "g", now: now, extra: ["iat": now + 3600]), "future"),
                ("another nonce", "not-h", try apple.token(subject: "s1", nonce: "h", now: now), "nonce"),
            ]
            for (name, nonce, token, reason) in cases {
                let reply = try await Self.tokenSignIn(server, token: token, nonce: nonce)
                #expect(reply.status == 401 && reply.code == "AUTHENTICATION_FAILED", "\(name): \(reply.text)")
                #expect(reply.reason.contains(reason), "\(name): \(reply.reason)")
            }

            // A replayed token: the first use signs in, the second is refused.
            let once = try apple.token(subject: "s2", nonce: "once", now: now)
            #expect(try await Self.tokenSignIn(server, token: once, nonce: "once").status == 200)
            let replayed = try await Self.tokenSignIn(server, token: once, nonce: "once")
            #expect(replayed.status == 401 && replayed.reason.contains("used before"), "\(replayed.text)")

            // An unverified address that is another account's creates nothing.
            let claimed = try apple.token(
                subject: "s3", nonce: "claim", now: now, email: "ada@example.com", extra: ["email_verified": "false"])
            let refusedClaim = try await Self.tokenSignIn(server, token: claimed, nonce: "claim")
            #expect(refusedClaim.status == 409 && refusedClaim.reason.contains("not verified"), "\(refusedClaim.text)")
            #expect(try await Self.userCount(server) == before + 1, "only the replayed token's first use made an account")

            // An unknown kid: one refresh, then refusal; another within the minute fetches nothing.
            let fetches = apple.fetches.load(ordering: .relaxed)
            let unknown = try apple.token(subject: "s4", nonce: "k1", now: now, email: nil, header: ["alg": "RS256", "kid": "apple-rsa-9"])
            let first = try await Self.tokenSignIn(server, token: unknown, nonce: "k1")
            #expect(first.status == 401 && first.reason.contains("apple-rsa-9"), "\(first.text)")
            #expect(apple.fetches.load(ordering: .relaxed) == fetches + 1)
            let again = try apple.token(subject: "s4", nonce: "k2", now: now, header: ["alg": "RS256", "kid": "apple-rsa-9"])
            #expect(try await Self.tokenSignIn(server, token: again, nonce: "k2").status == 401)
            #expect(apple.fetches.load(ordering: .relaxed) == fetches + 1, "no second fetch within the minute")

            // Apple rotates: the new key is published, and after the minute a token signed with it works.
            let rotated = try _RSA.Signing.PrivateKey(keySize: .bits2048)
            apple.published.withLock { $0.append(AppleStandIn.jwk(rotated.publicKey, id: "apple-rsa-9")) }
            clock.advance(bySeconds: 61)
            let fresh = try apple.token(
                subject: "s4", nonce: "k3", now: now + 61, email: nil, header: ["alg": "RS256", "kid": "apple-rsa-9"]
            ) { try rotated.signature(for: $0, padding: .insecurePKCS1v1_5).rawRepresentation }
            let signedIn = try await Self.tokenSignIn(server, token: fresh, nonce: "k3")
            #expect(signedIn.status == 200, "\(signedIn.text)")
            #expect(apple.fetches.load(ordering: .relaxed) == fetches + 2)
        }
    }

    @Test("a real OpenID Connect provider: its ID token signs in once per nonce; passwords can be linked and turned off")
    func openIDConnect() async throws {
        let provider = try await OIDCProviderStandIn.start()
        defer { provider.stop() }
        // The provider stamps its tokens with the real time, so the server reads the real time too:
        // a clock that stood still would see them as issued in the future on a slow run.
        try await withServer { server in
            let (ada, _) = try await server.signUp("ada")
            let redirect = "http://127.0.0.1:1/callback"
            let client = try await provider.configure(on: server, redirectURIs: [redirect])
            let summary = try await Self.admin(server, .GET, "signin")
            #expect(summary.text.contains(client.id) && !summary.text.contains(client.secret), "\(summary.text)")
            try await provider.setUser("emp-42", claims: ["email": "Lin@Corp.example", "email_verified": true, "given_name": "Lin"])

            let token = try await provider.identityToken(
                clientID: client.id, clientSecret: client.secret, subject: "emp-42", nonce: "nonce-1", redirectURI: redirect)
            let signedIn = try await Self.tokenSignIn(server, provider: "corp", token: token, nonce: "nonce-1")
            #expect(signedIn.status == 200, "\(signedIn.text) \(provider.log.suffix(2000))")
            let session = try #require(signedIn.body["ckWebAuthToken"] as? String)
            let user = try #require(signedIn.body["userRecordName"] as? String)
            let replay = try await Self.tokenSignIn(server, provider: "corp", token: token, nonce: "nonce-1")
            #expect(replay.status == 401, "\(replay.text)")
            let unknownProvider = try await Self.tokenSignIn(server, provider: "nope", token: token, nonce: "nonce-1")
            #expect(unknownProvider.status == 400 && unknownProvider.reason.contains("corp"), "\(unknownProvider.text)")

            // The verified address is the account's, found by others only once they opt in.
            let users = try await Self.admin(server, .GET, "users")
            let row = (users.body["users"] as? [[String: Any]] ?? []).first { $0["userRecordName"] as? String == user }
            #expect(row?["emailAddress"] as? String == "lin@corp.example", "\(users.text)")

            // A password linked to the account signs in too; the provider's identity can then go.
            let query = ["ckAPIToken": server.apiToken, "ckWebAuthToken": session]
            let set = try await server.request(
                .POST, "/auth/1/\(server.container)/password", body: ["username": "lin", "password": "correct horse"], query: query)
            #expect(set.status == 200 && set.body["hasPassword"] as? Bool == true, "\(set.text)")
            let password = try await server.request(
                .POST, "/auth/1/\(server.container)/signin", body: ["username": "lin", "password": "correct horse"],
                query: ["ckAPIToken": server.apiToken])
            #expect(password.body["userRecordName"] as? String == user, "\(password.text)")

            // The operator turns passwords off: sign-up and sign-in refused, the page offers the provider only.
            #expect(try await Self.admin(server, .PUT, "signin/passwords", ["enabled": false]).status == 200)
            let signUp = try await server.request(
                .POST, "/auth/1/\(server.container)/signup", body: ["username": "new", "password": "correct horse"],
                query: ["ckAPIToken": server.apiToken])
            #expect(signUp.status == 403 && signUp.reason.contains("does not use passwords"), "\(signUp.text)")
            let refused = try await server.request(
                .POST, "/auth/1/\(server.container)/signin", body: ["username": "lin", "password": "correct horse"],
                query: ["ckAPIToken": server.apiToken])
            #expect(refused.status == 403, "\(refused.text)")
            let page = try await server.request(.GET, "/auth/1/\(server.container)/signin", query: ["ckAPIToken": server.apiToken])
            #expect(page.text.contains("Continue with Corp") && !page.text.contains("id=\"password\""), "\(page.text)")

            // Discovery by the verified address, once lin opts in (off by default, as in CloudKit).
            let lookup = ["users": [["emailAddress": "lin@corp.example"]]]
            let hidden = try await server.database("public", "users/lookup/email", lookup, user: ada)
            #expect(!hidden.text.contains(user), "\(hidden.text)")
            let optIn = try await server.database("public", "users/discoverability", ["discoverable": true], user: session)
            #expect(optIn.status == 200, "\(optIn.text)")
            let found = try await server.database("public", "users/lookup/email", lookup, user: ada)
            #expect(found.text.contains(user), "\(found.text)")

            // A provider not trusted with addresses: its verified address is not taken as the user's.
            let guestClient = try await provider.configure(on: server, name: "guest", redirectURIs: [redirect], trustsEmail: false)
            try await provider.setUser("visitor", claims: ["email": "visitor@guest.example", "email_verified": true])
            let guestToken = try await provider.identityToken(
                clientID: guestClient.id, clientSecret: guestClient.secret, subject: "visitor", nonce: "g-1", redirectURI: redirect)
            let guest = try await Self.tokenSignIn(server, provider: "guest", token: guestToken, nonce: "g-1")
            let guestName = try #require(guest.body["userRecordName"] as? String, "\(guest.text)")
            let everyone = try await Self.admin(server, .GET, "users")
            let guestRow = (everyone.body["users"] as? [[String: Any]] ?? []).first { $0["userRecordName"] as? String == guestName }
            #expect(guestRow != nil && guestRow?["emailAddress"] == nil, "\(everyone.text)")

            // The operator sees the identity in the console and revokes it.
            let console = try await ConsoleTests.signIn(server)
            let containerPage = try await server.request(
                .GET, "/console/containers/\(server.container)", headers: ["Cookie": console.cookie])
            #expect(containerPage.text.contains("corp <code>emp-42</code> lin@corp.example"))
            #expect(containerPage.text.contains("Turn passwords on"))
            let issuer = provider.issuer
            let revoked = try await Self.admin(
                server, .DELETE, "users/\(user)/identities", query: ["issuer": issuer, "subject": "emp-42"])
            #expect(revoked.status == 200 && (revoked.body["identities"] as? [Any])?.isEmpty == true, "\(revoked.text)")
        }
    }

    @Test("a signed-in user links another provider, cannot unlink the last way in; Apple's notifications sign out, unlink, or delete an Apple-only account")
    func linkingAndNotifications() async throws {
        try await Self.withApple { server, apple, clock in
            let now = clock.milliseconds / 1000
            let (session, user) = try await server.signUp("ada")
            let query = ["ckAPIToken": server.apiToken, "ckWebAuthToken": session]
            let link = try await server.request(
                .POST, "/auth/1/\(server.container)/identities/link",
                body: ["provider": "apple", "identityToken": try apple.token(subject: "ada.apple", nonce: "l1", now: now), "nonce": "l1"],
                query: query)
            #expect(link.status == 200 && link.body["subject"] as? String == "ada.apple", "\(link.text)")
            let viaApple = try await Self.tokenSignIn(server, token: try apple.token(subject: "ada.apple", nonce: "l2", now: now), nonce: "l2")
            #expect(viaApple.body["userRecordName"] as? String == user, "\(viaApple.text)")

            // Adding a way in needs a fresh sign-in: a session six minutes old (or stolen) cannot.
            clock.advance(bySeconds: 360)
            let stale = try await server.request(
                .POST, "/auth/1/\(server.container)/identities/link",
                body: ["provider": "apple", "identityToken": try apple.token(subject: "ada.other", nonce: "l9", now: now + 360), "nonce": "l9"],
                query: query)
            #expect(stale.status == 401 && stale.reason.contains("minutes old"), "\(stale.text)")

            // An Apple-only account cannot drop its only identity.
            let mei = try await Self.tokenSignIn(server, token: try apple.token(subject: "mei.apple", nonce: "m1", now: now, email: nil), nonce: "m1")
            let meiSession = try #require(mei.body["ckWebAuthToken"] as? String)
            let meiName = try #require(mei.body["userRecordName"] as? String)
            let unlink = try await server.request(
                .POST, "/auth/1/\(server.container)/identities/unlink",
                body: ["issuer": "https://appleid.apple.com", "subject": "mei.apple"],
                query: ["ckAPIToken": server.apiToken, "ckWebAuthToken": meiSession])
            #expect(unlink.status == 400 && unlink.reason.contains("only way"), "\(unlink.text)")

            // mei writes a private record; Apple says her account is deleted; it is, with her data.
            try await server.createZone("Notes", user: meiSession)
            func notify(_ type: String, _ subject: String, id: String = UUID().uuidString) async throws -> TestServer.Reply {
                let events = #"{"type":"\#(type)","sub":"\#(subject)","event_time":\#(clock.milliseconds)}"#
                let payload = try Self.jwt(
                    header: ["alg": "RS256", "kid": "apple-rsa-1"],
                    claims: [
                        "iss": "https://appleid.apple.com", "aud": Self.bundleID, "iat": clock.milliseconds / 1000,
                        "jti": id, "events": events,
                    ]
                ) { try apple.rsa.signature(for: $0, padding: .insecurePKCS1v1_5).rawRepresentation }
                return try await server.request(
                    .POST, "/auth/1/\(server.container)/signin/apple/notifications", body: ["payload": payload])
            }
            let forged = try await server.request(
                .POST, "/auth/1/\(server.container)/signin/apple/notifications",
                body: ["payload": try apple.token(subject: "x", nonce: "z", now: now) { _ in Data(repeating: 1, count: 256) }])
            #expect(forged.status == 401, "\(forged.text)")
            #expect(try await notify("account-delete", "mei.apple").status == 200)
            #expect(try await server.database("private", "users/caller", user: meiSession).status == 401)
            let gone = try await Self.admin(server, .GET, "users/\(meiName)/identities")
            #expect(gone.status == 404, "\(gone.text)")

            // consent-revoked signs ada out everywhere; she signs in with Apple again.
            #expect(try await notify("consent-revoked", "ada.apple", id: "revoked-1").status == 200)
            #expect(try await server.database("private", "users/caller", user: session).status == 401)
            let again = try await Self.tokenSignIn(server, token: try apple.token(subject: "ada.apple", nonce: "l3", now: now), nonce: "l3")
            #expect(again.status == 200 && again.body["userRecordName"] as? String == user, "\(again.text)")
            // The same notification again (its jti) acts no more: the new session stays.
            #expect(try await notify("consent-revoked", "ada.apple", id: "revoked-1").status == 200)
            let againSession = try #require(again.body["ckWebAuthToken"] as? String)
            #expect(try await server.database("private", "users/caller", user: againSession).status == 200)

            // ada deletes her Apple ID: she has a password, so only the Apple identity goes.
            #expect(try await notify("account-delete", "ada.apple").status == 200)
            let left = try await Self.admin(server, .GET, "users/\(user)/identities")
            #expect(left.status == 200 && (left.body["identities"] as? [Any])?.isEmpty == true, "\(left.text)")
            let password = try await server.request(
                .POST, "/auth/1/\(server.container)/signin", body: ["username": "ada", "password": "correct horse"],
                query: ["ckAPIToken": server.apiToken])
            #expect(password.status == 200, "\(password.text)")
        }
    }
}
