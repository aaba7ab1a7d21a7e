public import Foundation
import Crypto
import StratusModel

/// Sign-in with identity providers: Sign in with Apple and OpenID Connect providers (Google,
/// Microsoft, Keycloak, …) that the container's operator configured.
extension Container {
    /// A single-use value that ties an identity token to one sign-in, so that a token cannot be
    /// replayed. Give the provider ``sha256`` (Sign in with Apple, and OpenID Connect providers by
    /// default: the hash goes to the provider, the value only to the server) or ``value`` for a
    /// provider configured with plain nonces, and pass the nonce to
    /// ``signIn(identityToken:provider:nonce:givenName:familyName:)``.
    public struct SignInNonce: Hashable, Sendable {
        /// The random value (32 bytes, base64url).
        public let value: String
        /// Its SHA-256 in lowercase hex, as a Sign in with Apple request's `nonce`.
        public var sha256: String {
            SHA256.hash(data: Data(value.utf8)).map { String($0, radix: 16).leftPadded(to: 2) }.joined()
        }

        /// A nonce made before, such as one a script passed to the provider
        /// (`--identity-token` in the examples).
        public init(value: String) {
            self.value = value
        }

        /// A new random nonce.
        public init() {
            var generator = SystemRandomNumberGenerator()
            let bytes = (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
            value = Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
                .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        }
    }

    /// An identity at a provider that signs the user in.
    public struct SignInIdentity: Hashable, Sendable {
        /// The provider's name in the container's configuration (`apple`, or an OpenID Connect
        /// provider's name).
        public let provider: String
        /// The provider's issuer.
        public let issuer: String
        /// The user's subject at the provider.
        public let subject: String
        /// The e-mail address the provider last gave, if any.
        public let emailAddress: String?
        /// Whether the provider verified it.
        public let emailVerified: Bool
        /// When it was linked.
        public let creationDate: Date
        /// When it last signed in.
        public let lastSignInDate: Date

        init(_ identity: LinkedIdentity) {
            provider = identity.provider
            issuer = identity.issuer
            subject = identity.subject
            emailAddress = identity.emailAddress
            emailVerified = identity.emailVerified
            creationDate = Date(timeIntervalSince1970: Double(identity.created) / 1000)
            lastSignInDate = Date(timeIntervalSince1970: Double(identity.lastSignIn) / 1000)
        }
    }

    /// Signs in with an identity provider's ID token, creating the account on the first sign-in;
    /// returns the user's record ID.
    ///
    /// With Sign in with Apple, pass `ASAuthorizationAppleIDCredential.identityToken` as text, and
    /// the name Apple gives the app on the first sign-in only. The token must carry `nonce` (for
    /// Apple, its ``SignInNonce/sha256``), and signs in once.
    ///
    /// - Throws: ``CloudError`` `notAuthenticated` with the reason when the server refuses the
    ///   token (signature, issuer, audience, expiry, nonce), `constraintViolation` when the token's
    ///   e-mail address belongs to another account (sign in to it and ``linkIdentity(identityToken:provider:nonce:)``
    ///   there), `permissionFailure` when the account is disabled.
    @discardableResult
    public func signIn(
        identityToken: String, provider: String, nonce: SignInNonce, givenName: String? = nil, familyName: String? = nil
    ) async throws -> Record.ID {
        try await start(
            connection.call(
                .container(Endpoints.signInWithIdentityToken.erased),
                body: IdentityTokenCredentials(
                    provider: provider, identityToken: identityToken, nonce: nonce.value, givenName: givenName,
                    familyName: familyName),
                idempotent: false, as: WebAuthSession.self))
    }

    /// The server's sign-in page for the browser sign-in of a native app (for
    /// `ASWebAuthenticationSession` or a custom tab): it offers the container's providers and hands
    /// the session to `cloudkit-{container}://signin`, the app's URL scheme. Give the URL the
    /// browser ends at to ``signIn(callbackURL:)``.
    public var webSignInURL: URL {
        let scheme = "cloudkit-" + containerIdentifier.lowercased()
        var url = connection.url(.container(Endpoints.signInPage.erased))
        url += "&callback=" + (scheme + "://signin").queryValueEncoded
        return URL(string: url)!
    }

    /// Signs in with the URL the sign-in page sent the browser to (``webSignInURL``); returns the
    /// user's record ID.
    @discardableResult
    public func signIn(callbackURL: URL) async throws -> Record.ID {
        let items = URLComponents(url: callbackURL, resolvingAgainstBaseURL: false)?.queryItems ?? []
        guard let token = items.first(where: { $0.name == "ckWebAuthToken" })?.value, !token.isEmpty else {
            throw CloudError(.invalidArguments, "the callback URL carries no ckWebAuthToken")
        }
        return try await signIn(webAuthToken: token)
    }

    /// The signed-in user's identities at providers, oldest first, and whether the account also
    /// has a password.
    public func signInIdentities() async throws -> (identities: [SignInIdentity], hasPassword: Bool) {
        Self.identities(try await connection.call(.container(Endpoints.identities.erased), as: LinkedIdentities.self))
    }

    /// Links another provider's identity to the signed-in user, who may then sign in with either.
    @discardableResult
    public func linkIdentity(identityToken: String, provider: String, nonce: SignInNonce) async throws -> SignInIdentity {
        SignInIdentity(
            try await connection.call(
                .container(Endpoints.identitiesLink.erased),
                body: IdentityTokenCredentials(provider: provider, identityToken: identityToken, nonce: nonce.value),
                idempotent: false, as: LinkedIdentity.self))
    }

    /// Unlinks one of the signed-in user's identities; refused (``CloudError`` `invalidArguments`)
    /// when it is the user's last way to sign in.
    public func unlinkIdentity(_ identity: SignInIdentity) async throws {
        _ = try await connection.call(
            .container(Endpoints.identitiesUnlink.erased),
            body: UnlinkIdentityRequest(issuer: identity.issuer, subject: identity.subject), idempotent: true,
            as: LinkedIdentities.self)
    }

    /// Gives an account made by a provider a username and password to sign in with as well.
    public func setPassword(username: String, password: String) async throws {
        _ = try await connection.call(
            .container(Endpoints.setPassword.erased), body: PasswordCredentials(username: username, password: password),
            idempotent: false, as: LinkedIdentities.self)
    }

    private static func identities(_ answer: LinkedIdentities) -> (identities: [SignInIdentity], hasPassword: Bool) {
        (answer.identities.map(SignInIdentity.init), answer.hasPassword)
    }
}

extension String {
    fileprivate func leftPadded(to length: Int) -> String {
        String(repeating: "0", count: max(0, length - count)) + self
    }
}
