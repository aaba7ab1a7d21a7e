import Crypto
public import Foundation

/// A server-to-server key (Apple's "Composing Web Service Requests"): a backend (a cron job, an
/// import script, the app's own server) that sets one on its container's configuration
/// (``Container/Configuration/serverToServerKey``) has every request to the server's databases
/// signed with it, instead of signing a user in. The server reaches the public database with it
/// only, acting as the key's own user; register the key's public half with
/// `stratus admin create-key`.
public struct ServerToServerKey: Sendable {
    /// The ID the server gave the key's public half when it was registered.
    public let keyID: String
    private let privateKey: P256.Signing.PrivateKey

    /// The key `keyID` whose private half is `privateKeyPEM` (an ECDSA P-256 key in PEM, as
    /// `openssl ecparam -name prime256v1 -genkey -noout` writes it).
    ///
    /// - Throws: `CloudError` `invalidArguments` when the PEM is not a P-256 private key.
    public init(keyID: String, privateKeyPEM: String) throws {
        do {
            privateKey = try P256.Signing.PrivateKey(pemRepresentation: privateKeyPEM)
        } catch {
            throw CloudError(
                .invalidArguments,
                "the server-to-server key must be an ECDSA P-256 private key in PEM (openssl ecparam -name prime256v1 "
                    + "-genkey -noout writes one): \(error)")
        }
        self.keyID = keyID
    }

    /// The headers that sign a request to `subpath` (its target from `/database/…` on, query
    /// string included) with `body`, at `date`: the signature covers
    /// `{date}:{base64(SHA-256(body))}:{subpath}`.
    func signingHeaders(subpath: String, body: some Sequence<UInt8>, date: Date) throws -> [(name: String, value: String)] {
        let signedDate = date.formatted(.iso8601)
        let bodyHash = Data(SHA256.hash(data: Array(body))).base64EncodedString()
        let signature = try privateKey.signature(for: Data("\(signedDate):\(bodyHash):\(subpath)".utf8))
        return [
            ("X-Apple-CloudKit-Request-KeyID", keyID),
            ("X-Apple-CloudKit-Request-ISO8601Date", signedDate),
            ("X-Apple-CloudKit-Request-SignatureV1", signature.derRepresentation.base64EncodedString()),
        ]
    }
}
