import AsyncHTTPClient
import Crypto
import Foundation
import Hummingbird
import NIOCore
import NIOHTTP1
import StratusModel
import StratusStorage
import Synchronization

/// The browser sign-in at an identity provider: the authorization-code flow with PKCE (RFC 7636),
/// `state` and `nonce`, from the sign-in page's button to the page that hands the session on.
///
/// `signin/web/{provider}` makes a fresh state, nonce and code verifier, keeps them in a cookie
/// sealed with the server's key (AES-GCM; the browser can neither read nor change it, and it lives
/// ten minutes), and sends the browser to the provider. The provider sends it back to
/// `signin/return/{provider}` with a code and the state: the state must be the cookie's (so that a code
/// from another browser's sign-in cannot be planted in this one), the code is traded for an ID
/// token with the verifier, and the token is checked like a native app's, its nonce the cookie's.
final class WebSignIn: Sendable {
    let directory: IdentityProviderDirectory
    let accounts: AccountService
    let storage: any SettingsStorage
    let authenticator: Authenticator
    let clock: ServerClock
    private let key = Mutex<SymmetricKey?>(nil)

    init(
        directory: IdentityProviderDirectory, accounts: AccountService, storage: any SettingsStorage,
        authenticator: Authenticator, clock: ServerClock
    ) {
        self.directory = directory
        self.accounts = accounts
        self.storage = storage
        self.authenticator = authenticator
        self.clock = clock
    }

    static let cookieName = "stratus-signin"
    static let lifetimeSeconds: Int64 = 600
    private static let keySetting = "signin-state-key"

    /// What the cookie keeps between the two legs.
    private struct Pending {
        var container: String
        var provider: String
        var state: String
        var nonce: String
        var verifier: String
        var redirectURI: String
        var handoff: SignInHandoff
        var expires: Int64

        func json() -> [UInt8] {
            var writer = JSONWriter()
            writer.beginObject()
            writer.field("container", container)
            writer.field("provider", provider)
            writer.field("state", state)
            writer.field("nonce", nonce)
            writer.field("verifier", verifier)
            writer.field("redirectURI", redirectURI)
            writer.field("callback", handoff.callback?.url)
            writer.field("callbackOrigin", handoff.callback?.origin)
            writer.field("opener", handoff.openerOrigin)
            writer.field("expires", expires)
            writer.endObject()
            return writer.bytes
        }

        init(
            container: String, provider: String, state: String, nonce: String, verifier: String, redirectURI: String,
            handoff: SignInHandoff, expires: Int64
        ) {
            self.container = container
            self.provider = provider
            self.state = state
            self.nonce = nonce
            self.verifier = verifier
            self.redirectURI = redirectURI
            self.handoff = handoff
            self.expires = expires
        }

        init(json bytes: [UInt8]) throws {
            let object = try JSONValue.parse(bytes).object()
            container = try object.decode("container")
            provider = try object.decode("provider")
            state = try object.decode("state")
            nonce = try object.decode("nonce")
            verifier = try object.decode("verifier")
            redirectURI = try object.decode("redirectURI")
            let callback: String? = try object.decodeIfPresent("callback")
            let callbackOrigin: String? = try object.decodeIfPresent("callbackOrigin")
            handoff = SignInHandoff(
                callback: callback.flatMap { url in callbackOrigin.map { SignInCallback(checked: url, origin: $0) } },
                openerOrigin: try object.decodeIfPresent("opener"))
            expires = try object.decode("expires")
        }
    }

    private func sealingKey() async throws -> SymmetricKey {
        if let key = key.withLock({ $0 }) { return key }
        let hex = try await storage.initializeSetting(Self.keySetting, to: Secrets.makeHexToken())
        let key = SymmetricKey(data: SHA256.hash(data: Data(hex.utf8)))
        self.key.withLock { $0 = key }
        return key
    }

    /// Where the providers send the browser back, each to `…/signin/return/{provider}`: the URL the
    /// operator registers with provider `provider` (each its own, so that a code can come back only
    /// from the provider the sign-in started at, RFC 9700's defence against mix-up attacks).
    static func returnPath(base: String, container: String, provider: String? = nil) -> String {
        let encoded = container.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? container
        return "\(base)/auth/1/\(encoded)/signin/return" + (provider.map { "/" + $0 } ?? "")
    }

    /// How long a callback the cookie keeps may be: a cookie over 4 KiB is dropped by browsers.
    static let maxCallbackBytes = 2048

    // MARK: The two legs

    /// Sends the browser to `provider`'s authorization endpoint, with the pending sign-in sealed in a
    /// cookie.
    func start(
        provider name: String, container: String, handoff: SignInHandoff, request: Request
    ) async throws -> Response {
        guard (handoff.callback?.url.utf8.count ?? 0) <= Self.maxCallbackBytes else {
            throw StratusError.badRequest("callback must be at most \(Self.maxCallbackBytes) bytes")
        }
        let methods = try await directory.methods(container: container)
        let provider = try methods.provider(named: name, container: container)
        let endpoints = try await directory.endpoints(of: provider)
        let base = authenticator.baseURL(request)
        let pending = Pending(
            container: container, provider: provider.name, state: Secrets.makeToken(), nonce: Secrets.makeToken(),
            verifier: Secrets.makeToken() + Secrets.makeToken(),
            redirectURI: Self.returnPath(base: base, container: container, provider: provider.name),
            handoff: handoff, expires: clock.milliseconds / 1000 + Self.lifetimeSeconds)
        var query: [(String, String)] = [
            ("response_type", "code"), ("client_id", provider.clientIDs[0]), ("redirect_uri", pending.redirectURI),
            ("scope", provider.scopes.joined(separator: " ")),
            ("state", pending.state), ("nonce", provider.expectedNonce(for: pending.nonce)),
            ("code_challenge", Base64URL.encode(SHA256.hash(data: Data(pending.verifier.utf8)))),
            ("code_challenge_method", "S256"),
        ]
        // Apple sends the user's name and e-mail only to a form post.
        if provider.isApple { query.append(("response_mode", "form_post")) }
        let location =
            endpoints.authorization + (endpoints.authorization.contains("?") ? "&" : "?")
            + query.map { "\($0.0)=\($0.1.queryValueEncoded)" }.joined(separator: "&")
        let sealed = try AES.GCM.seal(pending.json(), using: try await sealingKey()).combined ?? Data()
        var headers = HTTPFields()
        headers[.location] = location
        headers[.cacheControl] = "no-store"
        headers[.setCookie] = cookie(Base64URL.encode(sealed), base: base, container: container, maxAge: Self.lifetimeSeconds)
        return Response(status: .found, headers: headers)
    }

    /// Ends a browser sign-in at `provider`'s return path: checks the provider's answer against the
    /// cookie (its state, used once; the provider it started at; the `iss` the provider names, when
    /// it names one, RFC 9207), then, through `guarded` (the sign-in backoff), trades the code for an
    /// ID token and signs the user in, and answers the page that hands the session on. Any refusal
    /// is a page that says why.
    func finish(
        container: String, provider name: String, parameters: [String: String], request: Request,
        guarded: (() async throws -> IssuedSession) async throws -> IssuedSession
    ) async -> Response {
        let base = authenticator.baseURL(request)
        var headers = ConsoleEndpoints.unframedPageHeaders
        headers[.setCookie] = cookie("", base: base, container: container, maxAge: 0)
        guard let pending = await pending(from: request), pending.container == container, pending.provider == name else {
            return page(container, SignInHandoff(), headers, problem: "This sign-in expired or was started elsewhere; start again.")
        }
        guard let state = parameters["state"], Secrets.constantTimeEquals(Array(state.utf8), Array(pending.state.utf8)) else {
            return page(container, pending.handoff, headers, problem: "The provider's answer does not belong to this sign-in; start again.")
        }
        do {
            // Each state signs in once: a copy of the cookie cannot try codes again.
            guard try await accounts.storage.claimNonce(
                Secrets.hash("state\n\(pending.state)"), expiresAt: (pending.expires + 60) * 1000, now: clock.milliseconds)
            else { throw StratusError(.authenticationFailed, "this sign-in was used already; start again") }
            if let error = parameters["error"] {
                throw StratusError(
                    .authenticationFailed,
                    "the provider did not sign you in: " + IdentityToken.quoted(parameters["error_description"] ?? error))
            }
            guard let code = parameters["code"], !code.isEmpty else {
                throw StratusError(.authenticationFailed, "the provider's answer has no code; start again")
            }
            let provider = try await directory.methods(container: container).provider(named: pending.provider, container: container)
            if let issuer = parameters["iss"], issuer != provider.issuer {
                throw StratusError(.authenticationFailed, "the answer comes from another issuer than \(provider.name)'s; start again")
            }
            let session = try await guarded {
                let idToken = try await exchange(code: code, pending: pending, provider: provider)
                let subject = try await directory.verify(idToken, of: provider, nonce: pending.nonce)
                let name = Self.appleUserName(parameters["user"])
                return try await accounts.signIn(
                    subject, provider: provider, container: container, givenName: name.given, familyName: name.family)
            }
            return page(container, pending.handoff, headers, session: session.webAuthToken)
        } catch let error as StratusError {
            return page(container, pending.handoff, headers, problem: error.reason)
        } catch {
            return page(container, pending.handoff, headers, problem: "The sign-in failed: \(error)")
        }
    }

    private func page(
        _ container: String, _ handoff: SignInHandoff, _ headers: HTTPFields, session: String? = nil, problem: String? = nil
    ) -> Response {
        Response(
            status: .ok, headers: headers,
            body: ResponseBody(
                byteBuffer: ByteBuffer(
                    string: SignInPage.html(
                        container: container, handoff: handoff, passwords: false, session: session, problem: problem))))
    }

    /// The cookie of the pending sign-in, sent back only to `signin/return/…`. It crosses sites on
    /// the way back: a redirect (a top-level GET, which `SameSite=Lax` allows) or Apple's form
    /// post, which only `SameSite=None` allows, and that only over HTTPS.
    private func cookie(_ value: String, base: String, container: String, maxAge: Int64) -> String {
        let path = URLComponents(string: Self.returnPath(base: base, container: container))?.percentEncodedPath ?? "/"
        let secure = base.hasPrefix("https://") ? "; Secure; SameSite=None" : "; SameSite=Lax"
        return "\(Self.cookieName)=\(value); Path=\(path); Max-Age=\(maxAge); HttpOnly" + secure
    }

    /// The pending sign-in the request's cookie seals; `nil` when it has none, or several (another
    /// site of the same domain may plant one), or one this server did not seal, or one expired.
    private func pending(from request: Request) async -> Pending? {
        let cookies = request.headers[values: .cookie].flatMap { $0.split(separator: ";") }
            .map { $0.trimmingCharacters(in: .whitespaces) }.filter { $0.hasPrefix(Self.cookieName + "=") }
        guard cookies.count == 1, let sealed = Base64URL.decode(String(cookies[0].dropFirst(Self.cookieName.count + 1))),
            let box = try? AES.GCM.SealedBox(combined: sealed),
            let opened = try? AES.GCM.open(box, using: try await sealingKey()),
            let pending = try? Pending(json: Array(opened)),
            pending.expires > clock.milliseconds / 1000
        else { return nil }
        return pending
    }

    /// Trades `code` at the provider's token endpoint for its ID token. The client authenticates
    /// with its secret when it has one (Apple's in the body, as Apple requires; others' with HTTP
    /// Basic), and always with the PKCE verifier.
    private func exchange(code: String, pending: Pending, provider: IdentityProvider) async throws -> String {
        let endpoint = try await directory.endpoints(of: provider).token
        let clientID = provider.clientIDs[0]
        var form: [(String, String)] = [
            ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", pending.redirectURI),
            ("code_verifier", pending.verifier), ("client_id", clientID),
        ]
        var request = HTTPClientRequest(url: endpoint)
        request.method = .POST
        request.headers.add(name: "content-type", value: "application/x-www-form-urlencoded")
        request.headers.add(name: "accept", value: "application/json")
        if let secret = try provider.exchangeSecret(clientID: clientID, now: clock.milliseconds) {
            if provider.isApple {
                form.append(("client_secret", secret))
            } else {
                let credentials = "\(clientID.queryValueEncoded):\(secret.queryValueEncoded)"
                request.headers.add(name: "authorization", value: "Basic " + Data(credentials.utf8).base64EncodedString())
            }
        }
        request.body = .bytes(ByteBuffer(string: form.map { "\($0.0)=\($0.1.queryValueEncoded)" }.joined(separator: "&")))
        let answer = try await directory.post(request)
        guard let token = try? answer.object().decode("id_token", as: String.self) else {
            let reason = (try? answer.object().decode("error_description", as: String.self))
                ?? (try? answer.object().decode("error", as: String.self)) ?? "no id_token"
            throw StratusError(.authenticationFailed, "\(provider.name) refused the sign-in code: \(reason)")
        }
        return token
    }

    /// The name in the `user` form field Apple posts on a user's first sign-in:
    /// `{"name": {"firstName", "lastName"}, "email"}`.
    static func appleUserName(_ field: String?) -> (given: String?, family: String?) {
        guard let field, let user = try? JSONValue.parse(Array(field.utf8)).object(),
            let name = try? user.decode("name", as: JSONValue.self).object()
        else { return (nil, nil) }
        return (try? name.decode("firstName"), try? name.decode("lastName"))
    }
}
