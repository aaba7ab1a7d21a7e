import Crypto
import Foundation
import StratusModel

/// Makes and hashes the server's secrets: API tokens, web auth tokens, the admin token.
///
/// Tokens are 32 random bytes: API tokens in hexadecimal (Apple's shape), the others in URL-safe
/// base64. Only their SHA-256 digests are stored, so a copy
/// of the database does not hand out credentials. (Tokens carry 256 bits of entropy, so a fast hash
/// is enough; passwords, which do not, use bcrypt.)
enum Secrets {
    /// 32 random bytes as 64 lowercase hexadecimal digits: the shape of Apple's API tokens and key
    /// IDs, which clients check before sending anything.
    static func makeHexToken() -> String {
        randomBytes().hexDigits
    }

    /// A new random token in URL-safe base64.
    static func makeToken() -> String {
        Base64URL.encode(randomBytes())
    }

    private static func randomBytes() -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
    }

    /// The stored form of a token.
    static func hash(_ token: String) -> String {
        SHA256.hash(data: Data(token.utf8)).withUnsafeBytes(\.hexDigits)
    }

    /// A new user record name: `_` and 32 hex digits, the shape CloudKit uses.
    static func makeUserRecordName() -> String {
        "_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
    }

    /// Compares two byte strings in time independent of where they differ.
    static func constantTimeEquals(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        return zip(a, b).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
    }
}
