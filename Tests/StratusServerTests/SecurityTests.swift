import Foundation
import NIOHTTP1
import StratusServer
import StratusStorage
import StratusTestSupport
import Testing

/// The holes a hostile client found (sign-in callback, rate-limit bypass, password guessing), each
/// as the attack that worked.
@Suite("security: the sign-in callback, rate limits, password guessing")
struct SecurityTests {
    /// A server's configuration with a clock that stands still unless the test moves it.
    static func configuration(
        clock: ManualClock, rateLimit: RateLimit? = nil, signInLimits: SignInLimits = SignInLimits(),
        trustedProxies: Set<String> = [], publicURL: String? = nil
    ) -> ServerConfiguration {
        ServerConfiguration(
            port: 0, passwordHashCost: 4, publicURL: publicURL, rateLimit: rateLimit, signInLimits: signInLimits,
            trustedProxies: trustedProxies, clock: clock.serverClock)
    }

    @Test("callbacks a browser could read as another host are refused; loopback and the server's own origin are not")
    func callbacks() async throws {
        try await withServer { server in
            let path = "/auth/1/\(server.container)/signin"
            let refused = [
                #"http://evil.example\@127.0.0.1/cb"#, "http://evil.example@127.0.0.1/cb", "http://user@localhost/cb",
                "http://127.0.0.1%2f@evil.example/cb", "http://127.0.0.1%2eevil.example/cb", "http://evil%2eexample/cb",
                "http://[::ffff:127.0.0.1]/cb", "http://[0:0:0:0:0:0:0:1]/cb", "http://[::1%25eth0]/cb",
                "http://127.0.0.1 .evil.example/cb", " http://evil.example/", "http://127.0.0.1\t.evil.example/cb",
                "http://127.0.0.1\n.evil.example/cb", "\thttp://127.0.0.1/cb", "HTTP://127.0.0.1/cb", "http://LOCALHOST/cb",
                "http://LocalHost/cb", "http://2130706433/cb", "http://127.1/cb", "http://0x7f.0.0.1/cb",
                "http://0177.0.0.1/cb", #"http:\\evil.example/cb"#, "http:///evil.example/cb", "//evil.example/cb",
                "http:/evil.example", "http://localhost./cb", "http://localhost:0080/cb", "http://localhost:99999/cb",
                "https://evil.example/steal", "javascript:alert(1)", "http://127.0.0.1/cb?%zz", "http://ünï.example/cb",
            ]
            for callback in refused {
                let reply = try await server.request(
                    .GET, path, query: ["ckAPIToken": server.apiToken, "callback": callback])
                #expect(reply.status == 400 && reply.code == "BAD_REQUEST", "\(callback): \(reply.text)")
                #expect(reply.reason.hasPrefix("callback "), "\(callback): \(reply.reason)")
            }
            let accepted = [
                ("http://127.0.0.1:9999/done?x=1", "http://127.0.0.1:9999"), ("http://localhost/cb", "http://localhost"),
                ("http://[::1]:8000/cb#top", "http://[::1]:8000"), ("https://localhost:443/cb", "https://localhost"),
                (server.baseURL + "/welcome", server.baseURL),
            ]
            for (callback, origin) in accepted {
                let reply = try await server.request(
                    .GET, path, query: ["ckAPIToken": server.apiToken, "callback": callback])
                #expect(reply.status == 200, "\(callback): \(reply.text)")
                // The page sends the token only where the browser's own parser finds this origin.
                #expect(reply.text.contains(#"const callbackOrigin = "\#(origin)";"#), "\(callback)")
                #expect(reply.text.contains("url.origin === callbackOrigin"))
            }
        }
    }

    @Test("with a public URL, the server's own origin is that URL's, whatever Host the request names")
    func callbackOnPublicURL() async throws {
        try await withServer(
            Self.configuration(clock: ManualClock(), publicURL: "https://sync.example.com")
        ) { server async throws in
            let path = "/auth/1/\(server.container)/signin"
            func status(_ callback: String, host: String? = nil) async throws -> Int {
                try await server.request(
                    .GET, path, query: ["ckAPIToken": server.apiToken, "callback": callback],
                    headers: host.map { ["Host": $0] } ?? [:]
                ).status
            }
            #expect(try await status("https://sync.example.com/app") == 200)
            #expect(try await status("http://sync.example.com/app") == 400)
            #expect(try await status("http://evil.example/cb", host: "evil.example") == 400)
        }
    }

    @Test("made-up web auth tokens are refused everywhere and buy no fresh rate-limit budget")
    func fakeTokensDoNotBypassTheRateLimit() async throws {
        let clock = ManualClock()
        try await withServer(
            Self.configuration(clock: clock, rateLimit: RateLimit(requestsPerSecond: 5, burst: 5))
        ) { server async throws in
            let (alice, _) = try await server.signUp("alice")
            clock.advance(bySeconds: 10)
            let routes: [(String, [String: Any])] = [
                ("/auth/1/\(server.container)/signin", ["username": "alice", "password": "wrong password"]),
                ("/auth/1/\(server.container)/signup", ["username": "mallory", "password": "correct horse"]),
                ("/database/1/\(server.container)/development/tokens/create", ["apnsEnvironment": "development"]),
            ]
            for (route, body) in routes {
                var statuses: [Int] = []
                for attempt in 0..<20 {
                    let reply = try await server.request(
                        .POST, route, body: body,
                        query: ["ckAPIToken": server.apiToken, "ckWebAuthToken": "forged-\(route)-\(attempt)"])
                    statuses.append(reply.status)
                    if reply.status == 401 { #expect(reply.code == "AUTHENTICATION_FAILED", "\(reply.text)") }
                    if reply.status == 429 {
                        #expect(reply.code == "THROTTLED" && reply.headers.first(name: "Retry-After") != nil)
                    }
                }
                #expect(statuses == Array(repeating: 401, count: 5) + Array(repeating: 429, count: 15), "\(route): \(statuses)")
                clock.advance(bySeconds: 10)
            }
            #expect(try await server.storage.user(container: server.container, username: "mallory") == nil)
            // A signed-in user is counted on their own: the flood from this address does not starve them.
            for _ in 0..<20 {
                _ = try await server.request(
                    .GET, "/database/1/\(server.container)/development/public/zones/list",
                    query: ["ckAPIToken": server.apiToken, "ckWebAuthToken": "forged"])
            }
            #expect(try await server.database("private", "zones/list", user: alice).status == 200)
        }
    }

    @Test("password guessing backs off with the same answers for existing and unknown accounts")
    func passwordGuessing() async throws {
        let clock = ManualClock()
        try await withServer(Self.configuration(clock: clock)) { server async throws in
            _ = try await server.signUp("alice")
            func guesses(_ username: String) async throws -> [String] {
                var answers: [String] = []
                for _ in 0..<50 {
                    let reply = try await server.request(
                        .POST, "/auth/1/\(server.container)/signin",
                        body: ["username": username, "password": "wrong password"], query: ["ckAPIToken": server.apiToken])
                    answers.append(
                        "\(reply.status) \(reply.code ?? "") \(reply.reason) \(reply.body["retryAfter"] ?? "")"
                            + " \(reply.headers.first(name: "Retry-After") ?? "")")
                }
                return answers
            }
            let existing = try await guesses("alice")
            let unknown = try await guesses("nobody")
            #expect(existing == unknown)
            #expect(existing.prefix(6).allSatisfy { $0.hasPrefix("401 AUTHENTICATION_FAILED") }, "\(existing)")
            #expect(existing.dropFirst(6).allSatisfy { $0.hasPrefix("429 THROTTLED") }, "\(existing)")

            func signIn(_ username: String, _ password: String) async throws -> TestServer.Reply {
                try await server.request(
                    .POST, "/auth/1/\(server.container)/signin", body: ["username": username, "password": password],
                    query: ["ckAPIToken": server.apiToken])
            }
            #expect(try await signIn("alice", "correct horse").status == 429, "the right password waits out the lock too")
            clock.advance(bySeconds: 2)
            #expect(try await signIn("alice", "correct horse").status == 200)

            // The next failures back off exponentially: 1 s after the sixth, 2 s after the seventh.
            clock.advance(bySeconds: 3600)
            for _ in 0..<6 { #expect(try await signIn("bob", "wrong password").status == 401) }
            #expect(try await signIn("bob", "wrong password").body["retryAfter"] as? Int == 1)
            clock.advance(bySeconds: 1)
            #expect(try await signIn("bob", "wrong password").status == 401)
            #expect(try await signIn("bob", "wrong password").body["retryAfter"] as? Int == 2)
        }
    }

    @Test("a name with U+0000 or another character no username holds never reaches an account's lock: 400, never a sign-in")
    func usernamesOutsideTheRule() async throws {
        let clock = ManualClock()
        try await withServer(Self.configuration(clock: clock)) { server async throws in
            _ = try await server.signUp("victim")
            func signIn(_ username: String, _ password: String) async throws -> TestServer.Reply {
                try await server.request(
                    .POST, "/auth/1/\(server.container)/signin", body: ["username": username, "password": password],
                    query: ["ckAPIToken": server.apiToken])
            }
            for _ in 0..<12 { _ = try await signIn("victim", "wrong password") }
            #expect(try await signIn("victim", "correct horse").status == 429, "locked")
            // The right password under a name SQLite would compare only up to its NUL: refused, not signed in.
            let suffixed = try await signIn("victim\u{0}zzz", "correct horse")
            #expect(suffixed.status == 400 && suffixed.text.contains("U+0000"), "\(suffixed.text)")
            // Guesses under names no account can have are refused without touching the lock or an account.
            for index in 0..<30 {
                #expect(try await signIn("victim\u{0}\(index)", "guess \(index)").status == 400)
                let outside = try await signIn("victim \(index)", "guess \(index)")
                #expect(outside.status == 400 && outside.text.contains("username must be"), "\(outside.text)")
            }
            // The same text in a URL's query is refused before any handler reads it.
            let query = try await server.request(
                .GET, "/database/1/\(server.container)/development/public/zones/list",
                query: ["ckAPIToken": server.apiToken + "\u{0}"])
            #expect(query.status == 400 && query.text.contains("ckAPIToken"), "\(query.text)")
            clock.advance(bySeconds: 3600)
            #expect(try await signIn("victim", "correct horse").status == 200, "the account's one lock ran out")
        }
    }

    @Test("weak passwords are refused with the rule they break")
    func passwordPolicy() async throws {
        try await withServer { server in
            let cases = [
                ("12345678", "common"), ("Password1", "common"), ("qwertyuiop", "common"),
                // U+0000 is refused in all text, before any password rule.
                ("\0\0\0\0\0\0\0\0", "U+0000"), ("\u{1}\u{2}\u{3}\u{4}\u{5}\u{6}\u{7}\u{8}", "control"),
                ("aaaaaaaaaaaa", "repeated"), ("short", "at least 8"),
                (String(repeating: "é", count: 40), "72 bytes"),
            ]
            for (index, (password, rule)) in cases.enumerated() {
                let reply = try await server.request(
                    .POST, "/auth/1/\(server.container)/signup", body: ["username": "user\(index)", "password": password],
                    query: ["ckAPIToken": server.apiToken])
                #expect(reply.status == 400 && reply.reason.contains(rule), "\(password): \(reply.text)")
            }
        }
    }

    @Test("each client address may create only so many accounts; behind a trusted proxy, the forwarded address counts")
    func signUpsPerAddress() async throws {
        let clock = ManualClock()
        try await withServer(Self.configuration(clock: clock)) { server async throws in
            for index in 0..<20 { _ = try await server.signUp("user\(index)") }
            let refused = try await server.request(
                .POST, "/auth/1/\(server.container)/signup", body: ["username": "one-more", "password": "correct horse"],
                query: ["ckAPIToken": server.apiToken])
            #expect(refused.status == 429 && refused.code == "THROTTLED", "\(refused.text)")
            clock.advance(bySeconds: 180)
            _ = try await server.signUp("one-more")
        }
        let limits = SignInLimits(signUpsPerAddress: RateLimit(requestsPerSecond: 0.001, burst: 1))
        for trusted in [true, false] {
            try await withServer(
                Self.configuration(
                    clock: ManualClock(), signInLimits: limits, trustedProxies: trusted ? ["127.0.0.1"] : [])
            ) { server async throws in
                func signUp(_ username: String, from address: String) async throws -> Int {
                    try await server.request(
                        .POST, "/auth/1/\(server.container)/signup", body: ["username": username, "password": "correct horse"],
                        query: ["ckAPIToken": server.apiToken], headers: ["X-Forwarded-For": "203.0.113.9, \(address)"]
                    ).status
                }
                #expect(try await signUp("ann", from: "198.51.100.1") == 200)
                #expect(try await signUp("ben", from: "198.51.100.1") == 429)
                #expect(try await signUp("cat", from: "198.51.100.2") == (trusted ? 200 : 429))
                guard trusted else { return }
                // An IPv6 host picks any address of its /64: they count as one; another /64 is another.
                #expect(try await signUp("dan", from: "2001:db8:0:1::1") == 200)
                #expect(try await signUp("eve", from: "2001:db8:0:1::2") == 429)
                #expect(try await signUp("fay", from: "2001:db8:0:1:ffff:ffff:ffff:ffff") == 429)
                #expect(try await signUp("gus", from: "2001:db8:0:2::1") == 200)
                #expect(try await signUp("hal", from: "::ffff:198.51.100.2") == 429, "an IPv4 address mapped into IPv6 is itself")
            }
        }
    }

    @Test("the rate limit leaves the admin API and health checks alone")
    func rateLimitExemptions() async throws {
        try await withServer(
            Self.configuration(clock: ManualClock(), rateLimit: RateLimit(requestsPerSecond: 0.01, burst: 2))
        ) { server async throws in
            for _ in 0..<2 {
                _ = try await server.request(.GET, "/database/1/\(server.container)/development/public/zones/list", query: ["ckAPIToken": "made-up"])
            }
            let limited = try await server.request(
                .GET, "/database/1/\(server.container)/development/public/zones/list", query: ["ckAPIToken": "made-up"])
            #expect(limited.status == 429, "made-up tokens count against the address: \(limited.text)")
            #expect(try await server.request(.GET, "/health").status == 200)
            let admin = try await server.request(
                .GET, "/admin/1/containers", headers: ["Authorization": "Bearer \(server.credentials.adminToken)"])
            #expect(admin.status == 200, "\(admin.text)")
        }
    }
}
