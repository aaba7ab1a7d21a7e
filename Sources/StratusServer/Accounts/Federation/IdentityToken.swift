import Crypto
import Foundation
import StratusModel
import _CryptoExtras

/// A public key of an identity provider's key set (RFC 7517), as ID tokens name it by `kid`.
struct JSONWebKey: Sendable {
    enum Key: Sendable {
        case rsa(_RSA.Signing.PublicKey)
        case p256(P256.Signing.PublicKey)
    }

    let id: String?
    let key: Key
    /// The algorithm the key set binds the key to (`alg`), when it says.
    let algorithm: String?

    /// The signature algorithm a token must name to be checked with this key.
    var expectedAlgorithm: String {
        switch key {
        case .rsa: "RS256"
        case .p256: "ES256"
        }
    }

    /// The keys of a JWKS document (`{"keys": [...]}`) that can check ID tokens: RSA keys and
    /// P-256 keys for signatures; keys of other types or uses are passed over.
    static func keySet(from json: JSONValue) throws -> [JSONWebKey] {
        let object = try json.object()
        let keys: [JSONValue] = try object.decode("keys")
        return keys.compactMap { value -> JSONWebKey? in
            guard let key = try? value.object(), (try? key.decodeIfPresent("use", as: String.self)) ?? "sig" == "sig"
            else { return nil }
            let id = try? key.decodeIfPresent("kid", as: String.self)
            let algorithm = try? key.decodeIfPresent("alg", as: String.self)
            switch try? key.decode("kty", as: String.self) {
            case "RSA":
                guard let n = (try? key.decode("n", as: String.self)).flatMap(Base64URL.decode),
                    let e = (try? key.decode("e", as: String.self)).flatMap(Base64URL.decode),
                    let publicKey = try? _RSA.Signing.PublicKey(n: n, e: e)
                else { return nil }
                return JSONWebKey(id: id, key: .rsa(publicKey), algorithm: algorithm)
            case "EC":
                guard (try? key.decode("crv", as: String.self)) == "P-256",
                    let x = (try? key.decode("x", as: String.self)).flatMap(Base64URL.decode), x.count == 32,
                    let y = (try? key.decode("y", as: String.self)).flatMap(Base64URL.decode), y.count == 32,
                    let publicKey = try? P256.Signing.PublicKey(x963Representation: [0x04] + x + y)
                else { return nil }
                return JSONWebKey(id: id, key: .p256(publicKey), algorithm: algorithm)
            default:
                return nil
            }
        }
    }

    /// Whether `signature` over `input` is this key's, by `algorithm`.
    func verifies(_ signature: Data, of input: Data) -> Bool {
        switch key {
        case .rsa(let key):
            key.isValidSignature(_RSA.Signing.RSASignature(rawRepresentation: signature), for: input, padding: .insecurePKCS1v1_5)
        case .p256(let key):
            (try? P256.Signing.ECDSASignature(rawRepresentation: signature)).map { key.isValidSignature($0, for: input) }
                ?? false
        }
    }
}

/// An ID token (a JWS in compact form, RFC 7515) as a provider issued it: read, not yet trusted.
///
/// Only what an identity provider signs with a public key is accepted: `RS256` and `ES256`. A
/// token naming `none`, an HMAC algorithm (which would let anyone holding the public key forge
/// one) or any other is refused before a key is looked for.
struct IdentityToken: Sendable {
    /// The algorithms ID tokens are accepted with.
    static let acceptedAlgorithms: Set<String> = ["RS256", "ES256"]

    let algorithm: String
    let keyID: String?
    let claims: JSONObject
    private let signingInput: Data
    private let signature: Data

    /// Reads `compact`; refuses what is not a signed JWT with an accepted algorithm.
    init(compact: String) throws {
        let parts = compact.split(separator: ".", omittingEmptySubsequences: false)
        guard compact.utf8.count <= 16 << 10, parts.count == 3,
            let headerBytes = Base64URL.decode(String(parts[0])), let claimBytes = Base64URL.decode(String(parts[1])),
            let signature = Base64URL.decode(String(parts[2])),
            let header = try? JSONValue.parse(Array(headerBytes)).object(),
            let claims = try? JSONValue.parse(Array(claimBytes)).object()
        else {
            throw Self.refusal("is not a JWT (three base64url parts, header and claims JSON objects, at most 16 KiB)")
        }
        let algorithm = (try? header.decode("alg", as: String.self)) ?? ""
        guard Self.acceptedAlgorithms.contains(algorithm) else {
            throw Self.refusal(
                "is signed with alg '\(Self.quoted(algorithm))'; only RS256 and ES256 (the provider's public keys) are accepted")
        }
        guard header["crit"] == nil else { throw Self.refusal("has critical header parameters (crit), which are not supported") }
        // An access token in JWT form (`at+jwt`) may be signed with the same keys; only ID tokens sign in.
        if let type = try? header.decode("typ", as: String.self), !["JWT", "jwt", "application/jwt"].contains(type) {
            throw Self.refusal("is of type '\(Self.quoted(type))', not an ID token (JWT)")
        }
        self.algorithm = algorithm
        keyID = try? header.decodeIfPresent("kid", as: String.self)
        self.claims = claims
        signingInput = Data(parts[0].utf8) + Data(".".utf8) + Data(parts[1].utf8)
        self.signature = signature
    }

    /// The key of `keys` that signed the token: the one its `kid` names (or the only key of its
    /// algorithm when it names none). `nil` when the set has no such key.
    func signingKey(in keys: [JSONWebKey]) -> JSONWebKey? {
        let candidates = keys.filter { $0.expectedAlgorithm == algorithm && ($0.algorithm ?? algorithm) == algorithm }
        if let keyID { return candidates.first { $0.id == keyID } }
        return candidates.count == 1 ? candidates[0] : nil
    }

    /// Checks the signature with `key`.
    func verifySignature(with key: JSONWebKey) throws {
        guard key.verifies(signature, of: signingInput) else {
            throw Self.refusal("has a signature that the provider's key \(keyID.map { "'\(Self.quoted($0))' " } ?? "")does not verify")
        }
    }

    /// What the claims say once checked (``verifyClaims(issuer:audiences:now:skewSeconds:)``).
    struct Subject: Sendable, Hashable {
        var issuer: String
        var subject: String
        var emailAddress: String?
        var emailVerified: Bool
        var nonce: String?
        var givenName: String?
        var familyName: String?
        /// When the token expires, in seconds since 1970.
        var expires: Int64
    }

    /// Checks `iss` (exactly `issuer`), `aud` (one of `audiences`; with several audiences,
    /// `azp` must be one of them), `exp`, `iat` and `nbf` against `now` (milliseconds since 1970)
    /// with `skewSeconds` of tolerance either way, and reads the subject and its e-mail address.
    func verifyClaims(issuer: String, audiences: Set<String>, now: Int64, skewSeconds: Int64) throws -> Subject {
        try verifyIssuer(issuer, audiences: audiences)
        let seconds = now / 1000
        guard let expires = try? claims.decode("exp", as: Int64.self), let issued = try? claims.decode("iat", as: Int64.self)
        else { throw Self.refusal("has no exp or iat time") }
        guard seconds < expires + skewSeconds else { throw Self.refusal("expired \(seconds - expires) seconds ago") }
        guard issued <= seconds + skewSeconds else {
            throw Self.refusal("claims to be issued \(issued - seconds) seconds in the future (iat)")
        }
        if claims["nbf"] != nil {
            guard let notBefore = try? claims.decode("nbf", as: Int64.self) else { throw Self.refusal("has an nbf that is not a time") }
            guard notBefore <= seconds + skewSeconds else {
                throw Self.refusal("is not valid for another \(notBefore - seconds) seconds (nbf)")
            }
        }
        guard let subject = try? claims.decode("sub", as: String.self), (1...255).contains(subject.utf8.count) else {
            throw Self.refusal("has no subject (sub) of 1 to 255 bytes")
        }
        let email = (try? claims.decode("email", as: String.self)).flatMap { $0.contains("@") ? $0.lowercased() : nil }
        return Subject(
            issuer: issuer, subject: subject, emailAddress: email, emailVerified: Self.flag(claims["email_verified"]), nonce: try? claims.decode("nonce", as: String.self),
            givenName: try? claims.decode("given_name", as: String.self),
            familyName: try? claims.decode("family_name", as: String.self), expires: expires)
    }

    /// Checks `iss` (exactly `issuer`) and `aud` (one of `audiences`; with several audiences,
    /// `azp` must be one of them).
    func verifyIssuer(_ issuer: String, audiences: Set<String>) throws {
        let claimedIssuer = try? claims.decode("iss", as: String.self)
        guard claimedIssuer == issuer else {
            throw Self.refusal("was issued by '\(claimedIssuer ?? "")', not by '\(issuer)'")
        }
        let audience: [String] =
            if let single = try? claims.decode("aud", as: String.self) { [single] } else {
                (try? claims.decode("aud", as: [String].self)) ?? []
            }
        guard audience.contains(where: audiences.contains) else {
            throw Self.refusal(
                "is meant for '\(audience.joined(separator: "', '"))', which is not a client ID configured for this provider")
        }
        // A token for several parties is ours only when it names us as the party it was issued to.
        if audience.count > 1 {
            guard let party = try? claims.decode("azp", as: String.self), audiences.contains(party) else {
                throw Self.refusal("has several audiences and no authorized party (azp) that is a client ID configured for this provider")
            }
        }
    }

    /// A boolean claim; Apple writes some as the strings `"true"` and `"false"`.
    static func flag(_ value: JSONValue?) -> Bool {
        switch value {
        case .bool(let flag): flag
        case .string(let text): text == "true"
        default: false
        }
    }

    /// Text of an unchecked token as a reason may show it: at most 64 characters, without control
    /// characters.
    static func quoted(_ text: String) -> String {
        String(text.unicodeScalars.prefix(64).map { $0.properties.generalCategory == .control ? "?" : Character($0) })
    }

    static func refusal(_ rule: String) -> StratusError {
        StratusError(.authenticationFailed, "identityToken \(rule)")
    }
}
