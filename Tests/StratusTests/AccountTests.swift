import Foundation
import Stratus
import StratusModel
import StratusServer
import StratusTestSupport
import Testing

@Suite("SDK: accounts and sessions")
struct AccountTests {
    @Test("sign up, account status, user record ID, sign out, sign in, and a restored session")
    func accountLifecycle() async throws {
        try await withServer { server in
            let container = server.makeContainer()
            #expect(try await container.accountStatus() == .noAccount)
            let error = await cloudError { _ = try await container.privateCloudDatabase.allRecordZones() }
            #expect(error?.code == .notAuthenticated)
            #expect(error?.redirectURL?.contains("/signin") == true, "421 carries the sign-in page")

            let user = try await container.signUp(username: "mei", password: "correct horse")
            #expect(try await container.accountStatus() == .available)
            #expect(try await container.userRecordID() == user)
            let session = try #require(container.session)
            #expect(session.userRecordName == user.recordName)
            #expect(session.expirationDate > Date().addingTimeInterval(13 * 86_400))

            // A session saved to disk and restored in a new process keeps working.
            let restored = server.makeContainer(
                session: try JSONDecoder().decode(Container.Session.self, from: JSONEncoder().encode(session)))
            #expect(try await restored.userRecordID() == user)

            // A token from the sign-in page signs in another container object.
            let other = server.makeContainer()
            #expect(try await other.signIn(webAuthToken: session.webAuthToken) == user)

            try await container.signOut()
            #expect(container.session == nil)
            #expect(try await container.accountStatus() == .noAccount)
            #expect(try await restored.accountStatus() == .noAccount, "signing out ends the session on the server")

            #expect(try await container.signIn(username: "mei", password: "correct horse") == user)
            #expect(try await container.accountStatus() == .available)
        }
    }

    @Test("wrong password, taken username and a bad API token are clear errors")
    func accountErrors() async throws {
        try await withServer { server in
            let container = server.makeContainer()
            try await container.signUp(username: "ann", password: "correct horse")
            let wrong = await cloudError { try await server.makeContainer().signIn(username: "ann", password: "wrong password") }
            #expect(wrong?.code == .notAuthenticated)
            let taken = await cloudError { try await server.makeContainer().signUp(username: "ann", password: "another one") }
            #expect(taken?.code == .constraintViolation)
            #expect(taken?.serverErrorCode == "EXISTS")
            let rule = await cloudError { try await server.makeContainer().signUp(username: "a b", password: "correct horse") }
            #expect(rule?.code == .invalidArguments)
            #expect(rule?.message.contains("username") == true)

            let badToken = Container(
                identifier: server.container, serverURL: URL(string: server.baseURL)!, apiToken: "not-a-token")
            let refused = await cloudError { _ = try await badToken.serverLimits() }
            #expect(refused?.code == .notAuthenticated)
            #expect(refused?.message.contains("ckAPIToken") == true)
        }
    }

    @Test("the server's advertised limits are read once")
    func limits() async throws {
        var configuration = ServerConfiguration(port: 0, passwordHashCost: 4)
        configuration.limits = .init(maxOperationsPerRequest: 37, maxRecordsPerResponse: 41)
        try await withServer(configuration) { server in
            let limits = try await server.makeContainer().serverLimits()
            #expect(limits.maxOperationsPerRequest == 37)
            #expect(limits.maxRecordsPerResponse == 41)
        }
    }
}

@Suite("SDK: sign-in with identity providers")
struct IdentitySignInSDKTests {
    @Test("an OpenID Connect ID token signs in; a second provider identity links; a password is added; refusals are CloudErrors")
    func identityTokens() async throws {
        let provider = try await OIDCProviderStandIn.start()
        defer { provider.stop() }
        try await withServer { server in
            let redirect = "http://127.0.0.1:1/callback"
            let client = try await provider.configure(on: server, redirectURIs: [redirect])
            // A second provider whose tokens carry the nonce's SHA-256, as Apple's do.
            let partner = try await provider.configure(on: server, name: "partner", redirectURIs: [redirect], nonce: "sha256")
            let container = server.makeContainer()
            let nonce = Container.SignInNonce()
            let token = try await provider.identityToken(
                clientID: client.id, clientSecret: client.secret, subject: "kai", nonce: nonce.value, redirectURI: redirect)
            let user = try await container.signIn(identityToken: token, provider: "corp", nonce: nonce)
            #expect(try await container.userRecordID() == user)

            // The same token again, or with another nonce: refused with the server's reason.
            let replay = await cloudError { try await server.makeContainer().signIn(identityToken: token, provider: "corp", nonce: nonce) }
            #expect(replay?.code == .notAuthenticated && replay?.message.contains("used before") == true, "\(String(describing: replay))")

            // The second provider: the token carries the nonce's hash, the app sends the value.
            let hashed = Container.SignInNonce()
            let other = try await provider.identityToken(
                clientID: partner.id, clientSecret: partner.secret, subject: "kai-work", nonce: hashed.sha256, redirectURI: redirect)
            let linked = try await container.linkIdentity(identityToken: other, provider: "partner", nonce: hashed)
            #expect(linked.subject == "kai-work" && linked.provider == "partner")
            var listed = try await container.signInIdentities()
            #expect(listed.identities.map(\.provider) == ["corp", "partner"] && !listed.hasPassword)

            try await container.setPassword(username: "kai", password: "correct horse")
            try await container.unlinkIdentity(linked)
            listed = try await container.signInIdentities()
            #expect(listed.identities.map(\.provider) == ["corp"] && listed.hasPassword)
            #expect(try await server.makeContainer().signIn(username: "kai", password: "correct horse") == user)

            // The browser sign-in's URL hands the session to the app's scheme; its callback signs in.
            let url = container.webSignInURL.absoluteString
            #expect(url.contains("/auth/1/\(server.container)/signin?") && url.contains("callback=cloudkit-"), "\(url)")
            let session = try #require(container.session)
            let callback = URL(string: "cloudkit-\(server.container.lowercased())://signin?ckWebAuthToken=\(session.webAuthToken)")!
            #expect(try await server.makeContainer().signIn(callbackURL: callback) == user)
        }
    }
}
