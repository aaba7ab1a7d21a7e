import Crypto
import Foundation
import StratusModel
import _CryptoExtras

/// A signed JSON Web Token in its compact form (RFC 7519), as push services take them: APNs
/// provider tokens and Web Push VAPID tokens (ES256), Google service-account assertions (RS256).
enum JSONWebToken {
    /// The key a token is signed with.
    enum SigningKey: Sendable {
        /// ECDSA over P-256 with SHA-256; the signature is `r‖s` (RFC 7518 §3.4).
        case es256(P256.Signing.PrivateKey)
        /// RSASSA-PKCS1-v1_5 with SHA-256.
        case rs256(_RSA.Signing.PrivateKey)

        var algorithm: String {
            switch self {
            case .es256: "ES256"
            case .rs256: "RS256"
            }
        }
    }

    /// `header.claims.signature`, each part base64url; the header carries `alg`, `typ` and, when
    /// given, `kid`.
    static func sign(claims: (inout JSONWriter) -> Void, keyID: String? = nil, with key: SigningKey) throws -> String {
        var header = JSONWriter()
        header.beginObject()
        header.field("alg", key.algorithm)
        header.field("kid", keyID)
        header.field("typ", "JWT")
        header.endObject()
        var body = JSONWriter()
        body.beginObject()
        claims(&body)
        body.endObject()
        let input = Base64URL.encode(header.bytes) + "." + Base64URL.encode(body.bytes)
        let signature: Data =
            switch key {
            case .es256(let key): try key.signature(for: Data(input.utf8)).rawRepresentation
            case .rs256(let key): try key.signature(for: Data(input.utf8), padding: .insecurePKCS1v1_5).rawRepresentation
            }
        return input + "." + Base64URL.encode(signature)
    }
}
