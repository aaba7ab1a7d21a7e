import Crypto
import Foundation
import StratusModel
import StratusStorage

/// A request signed with a server-to-server key, as Apple's reference ("Composing Web Service
/// Requests") has clients sign them: an ECDSA P-256 signature with SHA-256 over
/// `{date}:{base64(SHA-256(body))}:{subpath}`, where the date is the ISO 8601 value of
/// `X-Apple-CloudKit-Request-ISO8601Date` and the subpath is the request target from `/database/…`
/// on, query string included when the client sends one.
struct ServerKeySignature: Sendable {
    /// How far the signed date may lie from the server's clock, either way: five minutes.
    static let allowedSkewSeconds: Int64 = 300

    /// The key ID (`X-Apple-CloudKit-Request-KeyID`).
    let keyID: String
    /// The signed date (`X-Apple-CloudKit-Request-ISO8601Date`).
    let date: String
    /// The signature (`X-Apple-CloudKit-Request-SignatureV1`), base64.
    let signature: String

    /// The three headers' values; `nil` when none is present, `AUTHENTICATION_FAILED` naming the
    /// missing one when only some are.
    init?(keyID: String?, date: String?, signature: String?) throws {
        if keyID == nil, date == nil, signature == nil { return nil }
        guard let keyID else { throw Self.refused("the X-Apple-CloudKit-Request-KeyID header is missing") }
        guard let date else { throw Self.refused("the X-Apple-CloudKit-Request-ISO8601Date header is missing") }
        guard let signature else { throw Self.refused("the X-Apple-CloudKit-Request-SignatureV1 header is missing") }
        self.keyID = keyID
        self.date = date
        self.signature = signature
    }

    /// The bytes the client signed.
    static func message(date: String, body: some Sequence<UInt8>, subpath: String) -> [UInt8] {
        let bodyHash = Data(SHA256.hash(data: Array(body))).base64EncodedString()
        return Array("\(date):\(bodyHash):\(subpath)".utf8)
    }

    /// Checks the signature of `body` sent to `subpath` against `key`, at `now` (milliseconds since
    /// 1970); `AUTHENTICATION_FAILED` with the reason otherwise.
    func verify(body: some Sequence<UInt8>, subpath: String, key: ServerKeyInfo, now: Int64) throws {
        guard key.revokedAt == nil else { throw Self.refused("server-to-server key '\(keyID)' was revoked") }
        guard let signedAt = Self.parseDate(date) else {
            throw Self.refused(
                "X-Apple-CloudKit-Request-ISO8601Date must be an ISO 8601 date and time in UTC, such as 2026-11-23T10:00:00Z")
        }
        guard abs(signedAt - now) <= Self.allowedSkewSeconds * 1000 else {
            throw Self.refused(
                "X-Apple-CloudKit-Request-ISO8601Date is more than \(Self.allowedSkewSeconds / 60) minutes from the server's "
                    + "clock; sign each request with the current time")
        }
        let body = Array(body)
        // A request without a body: some clients written against Apple's servers sign an empty
        // hash (`{date}::{subpath}`) rather than the hash of no bytes, and Apple accepts it.
        let messages = [Self.message(date: date, body: body, subpath: subpath)]
            + (body.isEmpty ? [Array("\(date)::\(subpath)".utf8)] : [])
        guard let publicKey = try? P256.Signing.PublicKey(pemRepresentation: key.publicKeyPEM),
            let signatureBytes = Data(base64Encoded: signature),
            let parsed = (try? P256.Signing.ECDSASignature(derRepresentation: signatureBytes))
                ?? (try? P256.Signing.ECDSASignature(rawRepresentation: signatureBytes)),
            messages.contains(where: { publicKey.isValidSignature(parsed, for: $0) })
        else {
            throw Self.refused(
                "X-Apple-CloudKit-Request-SignatureV1 does not verify: sign '{date}:{base64 SHA-256 of the body}:{subpath}' "
                    + "with the key's private key (ECDSA P-256, SHA-256)")
        }
    }

    /// The milliseconds since 1970 of an ISO 8601 UTC date, with or without fractional seconds.
    static func parseDate(_ text: String) -> Int64? {
        let date = (try? Date(text, strategy: .iso8601))
            ?? (try? Date(text, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true)))
        return date.map { Int64(($0.timeIntervalSince1970 * 1000).rounded()) }
    }

    private static func refused(_ reason: String) -> StratusError {
        StratusError(.authenticationFailed, reason)
    }
}
