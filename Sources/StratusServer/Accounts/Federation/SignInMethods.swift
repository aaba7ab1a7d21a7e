import Crypto
import Foundation
package import StratusModel

/// An identity provider users of a container may sign in with: Sign in with Apple (named `apple`)
/// or an OpenID Connect provider, named by the operator.
package struct IdentityProvider: Sendable, Equatable {
    /// Sign in with Apple's issuer, the `iss` of its identity tokens.
    static let appleIssuer = "https://appleid.apple.com"
    /// The name of the Sign in with Apple provider.
    static let appleName = "apple"

    /// `apple`, or the OpenID Connect provider's name (lowercase letters, digits and hyphens).
    package var name: String
    /// The `iss` of its tokens; an OpenID Connect provider's discovery document is found under it.
    package var issuer: String
    /// The client IDs tokens may be meant for (`aud`): Apple's bundle IDs and services IDs; the
    /// first is the one the browser sign-in uses.
    package var clientIDs: [String]
    /// The client secret of a confidential client, for the browser sign-in's code exchange; `nil`
    /// for a public client, which proves itself with PKCE alone.
    package var clientSecret: String?
    /// The scopes the browser sign-in asks for.
    package var scopes: [String]
    /// Whether the token's `nonce` is the SHA-256 (hex) of the value the app sends, as Apple's is
    /// (then a token seen elsewhere cannot be redeemed without the value, which only the app has).
    package var hashesNonce: Bool
    /// Whether an address the provider says it verified is taken as the user's (for discovery and
    /// invitations by e-mail): Apple's are; an OpenID Connect provider's when the operator says so.
    package var trustsEmail: Bool
    /// The key set's URL when it is known without discovery (Apple's, or a stand-in for it).
    package var keysURL: String?
    /// Apple's team ID, key ID and private key (a `.p8`), which sign the client secret of Apple's
    /// code exchange.
    package var appleKey: AppleKey?
    /// When the provider was set, in milliseconds since 1970.
    package var updatedAt: Int64

    /// The key Apple issued for Sign in with Apple.
    package struct AppleKey: Sendable, Equatable {
        /// The developer team's ID.
        package var teamID: String
        /// The key's ID.
        package var keyID: String
        /// The `.p8` file's text: a P-256 private key in PEM.
        package var privateKey: String
    }

    var isApple: Bool { name == Self.appleName }

    /// The `nonce` claim a token must carry for the value `raw` the app sent.
    func expectedNonce(for raw: String) -> String {
        hashesNonce ? Secrets.hash(raw) : raw
    }

    /// The client secret of the code exchange: the configured one, or for Apple a JWT signed with
    /// its key (iss the team, sub the client, aud Apple, valid five minutes).
    func exchangeSecret(clientID: String, now: Int64) throws -> String? {
        guard let appleKey else { return clientSecret }
        let key = try P256.Signing.PrivateKey(pemRepresentation: appleKey.privateKey)
        return try JSONWebToken.sign(
            claims: { claims in
                claims.field("iss", appleKey.teamID)
                claims.field("iat", now / 1000)
                claims.field("exp", now / 1000 + 300)
                claims.field("aud", Self.appleIssuer)
                claims.field("sub", clientID)
            }, keyID: appleKey.keyID, with: .es256(key))
    }
}

/// How the users of a container sign in: with passwords (unless the operator turned them off),
/// and with the identity providers configured.
package struct SignInMethods: Sendable, Equatable {
    /// Whether password sign-up and sign-in are allowed.
    package var passwordsEnabled = true
    /// The providers, by name.
    package var providers: [IdentityProvider] = []

    /// Passwords only, as a container starts.
    package init() {}

    /// The provider named `name`; `BAD_REQUEST` naming the configured ones otherwise.
    func provider(named name: String, container: String) throws -> IdentityProvider {
        guard let provider = providers.first(where: { $0.name == name }) else {
            let names = providers.map(\.name)
            throw StratusError.badRequest(
                "provider '\(name)' is not configured for container '\(container)'"
                    + (names.isEmpty ? "; it has no identity providers" : "; it has " + names.joined(separator: ", ")))
        }
        return provider
    }

    /// Sets `provider`, replacing the one of its name.
    package mutating func set(_ provider: IdentityProvider) {
        providers.removeAll { $0.name == provider.name }
        providers.append(provider)
        providers.sort { $0.name < $1.name }
    }

    // MARK: Administration

    /// Sign in with Apple from `PUT …/signin/apple`: `clientIDs` (bundle IDs and services IDs),
    /// and optionally `teamID`, `keyID` and `privateKey` (the `.p8`) for the browser sign-in's code
    /// exchange, and `keysURL` (a stand-in for Apple's key set).
    package static func apple(json: JSONValue, at now: Int64) throws -> IdentityProvider {
        let object = try json.object()
        var provider = IdentityProvider(
            name: IdentityProvider.appleName, issuer: IdentityProvider.appleIssuer,
            clientIDs: try clientIDs(object.decode("clientIDs")), clientSecret: nil,
            scopes: ["name", "email"], hashesNonce: true, trustsEmail: true,
            keysURL: try object.decodeIfPresent("keysURL").map { try checkedURL($0, field: "keysURL") }, appleKey: nil,
            updatedAt: now)
        let teamID: String? = try object.decodeIfPresent("teamID")
        let keyID: String? = try object.decodeIfPresent("keyID")
        let privateKey: String? = try object.decodeIfPresent("privateKey")
        if teamID != nil || keyID != nil || privateKey != nil {
            guard let teamID, let keyID, let privateKey else {
                throw StratusError.badRequest("teamID, keyID and privateKey go together: give all three or none")
            }
            for (field, value) in [("teamID", teamID), ("keyID", keyID)] {
                guard value.count == 10, value.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) else {
                    throw StratusError.badRequest("\(field) must be the ten letters and digits Apple issued, not '\(value)'")
                }
            }
            guard (try? P256.Signing.PrivateKey(pemRepresentation: privateKey)) != nil else {
                throw StratusError.badRequest(
                    "privateKey must be the text of the .p8 key file (a P-256 private key, -----BEGIN PRIVATE KEY-----)")
            }
            provider.appleKey = IdentityProvider.AppleKey(teamID: teamID, keyID: keyID, privateKey: privateKey)
        }
        return provider
    }

    /// An OpenID Connect provider from `PUT …/signin/oidc/{name}`: `issuer` (its discovery
    /// document is `{issuer}/.well-known/openid-configuration`), `clientID`, optionally
    /// `clientSecret` (a confidential client), `audiences` (more client IDs tokens may be meant
    /// for, such as an Android app's), `scopes` (`openid email profile` by default), `nonce`
    /// (`sha256`, the default: the token carries the SHA-256 of the app's value; or `plain`) and
    /// `trustsEmail` (false by default: whether addresses it verified are taken as the user's).
    package static func openIDConnect(name: String, json: JSONValue, at now: Int64) throws -> IdentityProvider {
        guard isProviderName(name), name != IdentityProvider.appleName else {
            throw StratusError.badRequest(
                "the provider's name must be 1 to 32 lowercase letters, digits and hyphens, and not 'apple', not '\(name)'")
        }
        let object = try json.object()
        let issuer = try checkedURL(try object.decode("issuer"), field: "issuer")
        let clientID: String = try object.decode("clientID")
        let audiences: [String] = try object.decodeIfPresent("audiences") ?? []
        let scopes: [String] = try object.decodeIfPresent("scopes") ?? ["openid", "email", "profile"]
        guard scopes.contains("openid"), scopes.allSatisfy({ !$0.isEmpty && !$0.contains(" ") }) else {
            throw StratusError.badRequest("scopes must include 'openid', each scope without spaces")
        }
        let nonce: String = try object.decodeIfPresent("nonce") ?? "sha256"
        guard nonce == "plain" || nonce == "sha256" else {
            throw StratusError.badRequest("nonce must be 'plain' (the token carries the app's value) or 'sha256', not '\(nonce)'")
        }
        let secret: String? = try object.decodeIfPresent("clientSecret")
        return IdentityProvider(
            name: name, issuer: issuer, clientIDs: try clientIDs([clientID] + audiences),
            clientSecret: secret.flatMap { $0.isEmpty ? nil : $0 }, scopes: scopes, hashesNonce: nonce == "sha256",
            trustsEmail: try object.decodeIfPresent("trustsEmail") ?? false,
            keysURL: nil, appleKey: nil, updatedAt: now)
    }

    /// Whether `name` can name a provider: 1 to 32 lowercase ASCII letters, digits and hyphens.
    static func isProviderName(_ name: String) -> Bool {
        (1...32).contains(name.count)
            && name.allSatisfy { $0.isASCII && (("a"..."z").contains($0) || ("0"..."9").contains($0) || $0 == "-") }
    }

    private static func clientIDs(_ ids: [String]) throws -> [String] {
        guard !ids.isEmpty, ids.allSatisfy({ (1...255).contains($0.utf8.count) && !$0.contains(where: \.isWhitespace) })
        else {
            throw StratusError.badRequest("client IDs must be 1 to 255 characters without spaces, at least one")
        }
        return ids
    }

    /// `text` when it is an `https` URL, or, with `loopback`, an `http` URL of a loopback host (a
    /// provider on this machine); `BAD_REQUEST` naming `field` otherwise. The URL is kept as given:
    /// an issuer must match a token's `iss` exactly, trailing `/` and all.
    static func checkedURL(_ text: String, field: String, loopback: Bool = true) throws -> String {
        guard let url = URLComponents(string: text), let host = url.host, !host.isEmpty, url.user == nil,
            url.scheme == "https" || (loopback && url.scheme == "http" && isLoopback(host))
        else {
            throw StratusError.badRequest(
                "\(field) must be an https URL\(loopback ? " (http only on a loopback address)" : ""), not '\(text)'")
        }
        return text
    }

    /// Whether `host` is this machine.
    static func isLoopback(_ host: String) -> Bool {
        ["127.0.0.1", "localhost", "::1", "[::1]"].contains(host)
    }

    /// What `GET …/signin` answers: everything but secrets, which show only as present.
    package func summary(to writer: inout JSONWriter) {
        write(to: &writer, secrets: false)
    }

    /// The stored form: the summary with the secrets.
    func storedJSON() -> String {
        var writer = JSONWriter()
        write(to: &writer, secrets: true)
        return String(decoding: writer.bytes, as: UTF8.self)
    }

    private func write(to writer: inout JSONWriter, secrets: Bool) {
        writer.beginObject()
        writer.field("passwords", passwordsEnabled)
        writer.key("providers")
        writer.beginArray()
        for provider in providers {
            writer.beginObject()
            writer.field("name", provider.name)
            writer.field("issuer", provider.issuer)
            writer.field("clientIDs", array: provider.clientIDs)
            writer.field("scopes", array: provider.scopes)
            writer.field("nonce", provider.hashesNonce ? "sha256" : "plain")
            writer.field("trustsEmail", provider.trustsEmail)
            writer.field("keysURL", provider.keysURL)
            writer.field("teamID", provider.appleKey?.teamID)
            writer.field("keyID", provider.appleKey?.keyID)
            writer.field("updated", provider.updatedAt)
            if secrets {
                writer.field("clientSecret", provider.clientSecret)
                writer.field("privateKey", provider.appleKey?.privateKey)
            } else {
                writer.field("hasClientSecret", provider.clientSecret != nil || provider.appleKey != nil)
            }
            writer.endObject()
        }
        writer.endArray()
        writer.endObject()
    }

    init(stored text: String) throws {
        let object = try JSONValue.parse(Array(text.utf8)).object()
        passwordsEnabled = try object.decode("passwords")
        let providers: [JSONValue] = try object.decode("providers")
        self.providers = try providers.map { value in
            let provider = try value.object()
            let teamID: String? = try provider.decodeIfPresent("teamID")
            let keyID: String? = try provider.decodeIfPresent("keyID")
            let privateKey: String? = try provider.decodeIfPresent("privateKey")
            return IdentityProvider(
                name: try provider.decode("name"), issuer: try provider.decode("issuer"),
                clientIDs: try provider.decode("clientIDs"), clientSecret: try provider.decodeIfPresent("clientSecret"),
                scopes: try provider.decode("scopes"), hashesNonce: try provider.decode("nonce", as: String.self) == "sha256",
                trustsEmail: try provider.decode("trustsEmail"),
                keysURL: try provider.decodeIfPresent("keysURL"),
                appleKey: teamID.flatMap { teamID in
                    keyID.flatMap { keyID in
                        privateKey.map { IdentityProvider.AppleKey(teamID: teamID, keyID: keyID, privateKey: $0) }
                    }
                }, updatedAt: try provider.decode("updated"))
        }
    }
}
