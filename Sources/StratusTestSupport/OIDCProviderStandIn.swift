import AsyncHTTPClient
import Crypto
import Foundation
import NIOCore
import NIOHTTP1
import StratusProcess
import StratusServer

/// A real OpenID Connect provider on loopback: `scripts/oidc-provider.py`, which runs
/// oidc-provider-mock (PyPI, built on authlib) with client registration, a nonce and PKCE (S256)
/// required. It issues RS256 ID tokens, with the `kid` of the one key its JWKS publishes, through its
/// own authorization and token endpoints; ``identityToken(clientID:clientSecret:subject:nonce:redirectURI:)``
/// goes through them as a native app does.
///
/// Its ID tokens carry `iss` (``issuer``), `aud` (an array holding the client ID), `sub`, `nonce`,
/// `iat`, `exp` (an hour later), `auth_time`, `at_hash`, and the user's claims of the `email` and
/// `profile` scopes (``setUser(_:claims:)``).
package final class OIDCProviderStandIn: Sendable {
    private let standIn: StandInProcess
    /// `http://127.0.0.1:PORT`, where the provider listens.
    private let baseURL: String

    /// The provider's issuer, `http://127.0.0.1:PORT`: exactly its discovery document's `issuer` and
    /// the `iss` of every token it signs (whatever `Host` a request names).
    package let issuer: String

    /// The provider's discovery document (`/.well-known/openid-configuration` under ``issuer``).
    package var discoveryURL: String { "\(issuer)/.well-known/openid-configuration" }

    /// The provider's JSON Web Key Set: one RSA key, made when the provider started.
    package var jwksURL: String { "\(baseURL)/jwks" }

    /// What the provider wrote to standard error so far: a line per request, and why it refused one.
    package var log: String { standIn.log }

    /// A client that hands back a redirect instead of following it: the authorization endpoint
    /// answers with one, whose `Location` carries the code (kept for the process's life).
    private static let http = HTTPClient(
        eventLoopGroupProvider: .singleton, configuration: HTTPClient.Configuration(redirectConfiguration: .disallow))

    /// Starts the provider; it ends with ``stop()``.
    package static func start() async throws -> OIDCProviderStandIn {
        let (standIn, listening) = try await StandInProcess.start(script: "oidc-provider.py", needs: "pip's oidc-provider-mock")
        guard let port = listening["port"] as? Int, let issuer = listening["issuer"] as? String else {
            standIn.stop(signal: SIGKILL)
            throw StandInError("scripts/oidc-provider.py named no port and issuer: \(listening)")
        }
        return OIDCProviderStandIn(standIn: standIn, baseURL: "http://127.0.0.1:\(port)", issuer: issuer)
    }

    private init(standIn: StandInProcess, baseURL: String, issuer: String) {
        self.standIn = standIn
        self.baseURL = baseURL
        self.issuer = issuer
    }

    /// Ends the provider (it keeps everything in memory, so nothing is lost by killing it) and
    /// removes its log.
    package func stop() {
        standIn.stop(signal: SIGKILL)
    }

    // MARK: Clients and users

    /// Registers a client with `redirectURIs` and configures it as `server`'s container's OpenID
    /// Connect provider `name` (its secret included, nonces `plain` or `sha256`, the addresses it
    /// verifies trusted or not); answers the client.
    package func configure(
        on server: TestServer, name: String = "corp", redirectURIs: [String], nonce: String = "plain",
        trustsEmail: Bool = true
    ) async throws -> (id: String, secret: String) {
        let client = try await registerClient(redirectURIs: redirectURIs)
        let configured = try await server.request(
            .PUT, "/admin/1/containers/\(server.container)/signin/oidc/\(name)",
            body: [
                "issuer": issuer, "clientID": client.id, "clientSecret": client.secret, "nonce": nonce,
                "trustsEmail": trustsEmail,
            ],
            headers: ["Authorization": "Bearer \(server.credentials.adminToken)"])
        guard configured.status == 200 else { throw StandInError("the server refused provider \(name): \(configured.text)") }
        return client
    }

    /// Registers a client (OAuth 2.0 Dynamic Client Registration, `POST /oauth2/clients`) and
    /// answers its ID and secret.
    ///
    /// - Parameters:
    ///   - redirectURIs: The client's redirect URIs: `http` or `https` only (the provider refuses a
    ///     custom scheme), each with a path, since a bare origin is stored with a `/` added and then
    ///     matches only that spelling.
    ///   - authMethod: How the client authenticates at the token endpoint: `client_secret_basic`,
    ///     `client_secret_post`, or `none` (a public client, which proves itself with PKCE alone).
    ///     The provider accepts only the method a client registered with.
    package func registerClient(
        redirectURIs: [String], authMethod: String = "client_secret_basic"
    ) async throws -> (id: String, secret: String) {
        let registration: [String: Any] = ["redirect_uris": redirectURIs, "token_endpoint_auth_method": authMethod]
        let body = try JSONSerialization.data(withJSONObject: registration)
        let reply = try await send(
            .POST, "/oauth2/clients", contentType: "application/json", body: ByteBuffer(bytes: body))
        guard reply.status == .created, let client = try? JSONSerialization.jsonObject(with: reply.data) as? [String: Any],
            let id = client["client_id"] as? String, let secret = client["client_secret"] as? String
        else { throw StandInError("client registration answered \(reply.status): \(reply.text)") }
        return (id, secret)
    }

    /// Sets the claims of the user `subject` (`PUT /users/SUBJECT`), replacing any set before.
    ///
    /// A user never set signs in with `{"email": subject}` alone. Only the claims of the scopes
    /// ``identityToken(clientID:clientSecret:subject:nonce:redirectURI:)`` asks for reach a token:
    /// `email` and `email_verified` (scope `email`), `name`, `given_name`, `picture` and the rest of
    /// the `profile` scope, and any claim OpenID Connect does not define.
    ///
    /// - Parameters:
    ///   - subject: The user's `sub`, without a `/`.
    ///   - claims: The claims as JSON values: `String`, `Bool`, `Int`, `Double`, and arrays and
    ///     dictionaries (`[String: any Sendable]`) of them; for example
    ///     `["email": "ada@example.com", "email_verified": true]`. A claim may have a type a
    ///     provider should not send (`"email_verified": "true"`), for a test of what Stratus makes
    ///     of it.
    package func setUser(_ subject: String, claims: [String: any Sendable]) async throws {
        let object: [String: Any] = claims
        guard JSONSerialization.isValidJSONObject(object) else {
            throw StandInError("the claims of \(subject) are not all JSON values: \(claims)")
        }
        let body = try JSONSerialization.data(withJSONObject: object)
        let reply = try await send(
            .PUT, "/users/\(Self.percentEncoded(subject))", contentType: "application/json",
            body: ByteBuffer(bytes: body))
        guard reply.status == .noContent else {
            throw StandInError("setting the user \(subject) answered \(reply.status): \(reply.text)")
        }
    }

    // MARK: Signing in

    /// Signs `subject` in to the client as a native app does, through the provider's own endpoints,
    /// and answers the ID token: the authorization request (`POST /oauth2/authorize` with the scopes
    /// `openid email profile`, `nonce`, a `state`, and a PKCE `code_challenge` with `S256`, the
    /// consent given for `subject`), the code read from the redirect (not followed), then the code
    /// exchanged at `POST /oauth2/token` with the `code_verifier`.
    ///
    /// - Parameters:
    ///   - clientID: A client from ``registerClient(redirectURIs:authMethod:)``.
    ///   - clientSecret: Its secret, sent with HTTP Basic authentication (`client_secret_basic`);
    ///     `nil` for a public client (`none`), which sends its `client_id` in the form instead.
    ///   - subject: The user who signs in (see ``setUser(_:claims:)``).
    ///   - nonce: The `nonce` the ID token carries back (as sent: an app that signs in with Apple
    ///     sends the SHA-256 of its own).
    ///   - redirectURI: One of the client's registered redirect URIs.
    package func identityToken(
        clientID: String, clientSecret: String?, subject: String, nonce: String, redirectURI: String
    ) async throws -> String {
        let verifier = Self.base64URL(Self.randomBytes(32))
        let challenge = Self.base64URL(Array(SHA256.hash(data: Data(verifier.utf8))))
        let state = Self.base64URL(Self.randomBytes(16))
        let query = Self.formEncoded([
            ("response_type", "code"), ("client_id", clientID), ("redirect_uri", redirectURI),
            ("scope", "openid email profile"), ("nonce", nonce), ("state", state),
            ("code_challenge", challenge), ("code_challenge_method", "S256"),
        ])
        let consent = try await send(
            .POST, "/oauth2/authorize?\(query)", contentType: "application/x-www-form-urlencoded",
            body: ByteBuffer(string: Self.formEncoded([("sub", subject)])))
        guard consent.status == .found, let location = consent.headers.first(name: "location") else {
            throw StandInError("the authorization endpoint answered \(consent.status): \(consent.text)")
        }
        let parameters = URLComponents(string: location)?.queryItems ?? []
        func parameter(_ name: String) -> String? { parameters.first { $0.name == name }?.value }
        if let error = parameter("error") {
            throw StandInError("the authorization endpoint refused: \(error): \(parameter("error_description") ?? "")")
        }
        guard let code = parameter("code"), parameter("state") == state else {
            throw StandInError("the authorization endpoint redirected to \(location) without the code and state")
        }

        var form = [
            ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", redirectURI),
            ("code_verifier", verifier),
        ]
        var headers: [(String, String)] = []
        if let clientSecret {
            // RFC 6749, 2.3.1: the ID and secret are form-encoded before they are joined.
            let credentials = "\(Self.percentEncoded(clientID)):\(Self.percentEncoded(clientSecret))"
            headers.append(("authorization", "Basic \(Data(credentials.utf8).base64EncodedString())"))
        } else {
            form.append(("client_id", clientID))
        }
        let exchange = try await send(
            .POST, "/oauth2/token", contentType: "application/x-www-form-urlencoded",
            body: ByteBuffer(string: Self.formEncoded(form)), headers: headers)
        guard exchange.status == .ok, let tokens = try? JSONSerialization.jsonObject(with: exchange.data) as? [String: Any],
            let idToken = tokens["id_token"] as? String
        else { throw StandInError("the token endpoint answered \(exchange.status): \(exchange.text)") }
        return idToken
    }

    // MARK: HTTP

    /// A reply of the provider.
    private struct Reply {
        var status: HTTPResponseStatus
        var headers: HTTPHeaders
        var body: ByteBuffer
        var data: Data { Data(body.readableBytesView) }
        var text: String { String(buffer: body) }
    }

    private func send(
        _ method: HTTPMethod, _ pathAndQuery: String, contentType: String, body: ByteBuffer,
        headers: [(String, String)] = []
    ) async throws -> Reply {
        var request = HTTPClientRequest(url: baseURL + pathAndQuery)
        request.method = method
        request.headers.add(name: "content-type", value: contentType)
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        request.body = .bytes(body)
        let response = try await Self.http.execute(request, timeout: .seconds(60))
        let bytes = try await response.body.collect(upTo: 1 << 20)
        return Reply(status: response.status, headers: response.headers, body: bytes)
    }

    /// `application/x-www-form-urlencoded`, which is also how a query is written.
    private static func formEncoded(_ fields: [(String, String)]) -> String {
        fields.map { "\(percentEncoded($0.0))=\(percentEncoded($0.1))" }.joined(separator: "&")
    }

    /// `string` with every byte outside RFC 3986's unreserved characters percent-encoded (so a `+`,
    /// `&`, `=` or `/` in a value stays in it).
    private static func percentEncoded(_ string: String) -> String {
        let hex = Array("0123456789ABCDEF".unicodeScalars)
        var encoded = String.UnicodeScalarView()
        for byte in string.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"):
                encoded.append(Unicode.Scalar(byte))
            default:
                encoded.append("%")
                encoded.append(hex[Int(byte >> 4)])
                encoded.append(hex[Int(byte & 0x0f)])
            }
        }
        return String(encoded)
    }

    /// base64url without padding (RFC 7636's encoding of the verifier and the challenge).
    private static func base64URL(_ bytes: [UInt8]) -> String {
        String(
            Data(bytes).base64EncodedString().compactMap { character -> Character? in
                switch character {
                case "+": return "-"
                case "/": return "_"
                case "=": return nil
                default: return character
                }
            })
    }

    /// `count` bytes from the system's cryptographically secure generator.
    private static func randomBytes(_ count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
    }
}
