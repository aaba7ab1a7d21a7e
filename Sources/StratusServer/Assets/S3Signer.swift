import Crypto
import Foundation
import StratusModel

/// AWS Signature Version 4 in the `Authorization` header, as S3 and S3-compatible services check it
/// (https://docs.aws.amazon.com/AmazonS3/latest/API/sig-v4-header-based-auth.html). Requests carry no
/// query string, and their payload is either empty or sent unsigned.
struct S3Signer: Sendable {
    /// `x-amz-content-sha256` of a request whose body is not part of the signature.
    static let unsignedPayload = "UNSIGNED-PAYLOAD"
    /// `x-amz-content-sha256` of a request without a body: the SHA-256 of no bytes.
    static let emptyPayload = SHA256.hash(data: Data()).hexDigits

    let accessKeyID: String
    let secretAccessKey: String
    let region: String
    let service = "s3"

    /// The headers to send: `headers` (lowercase names, `host` among them) with `x-amz-date`,
    /// `x-amz-content-sha256` and an `authorization` that signs them all. `path` is the request's
    /// path as sent, already encoded by ``encodePath(_:)``.
    func signedHeaders(
        method: String, path: String, headers: [String: String], payloadHash: String, date: Date
    ) -> [String: String] {
        let timestamp = date.formatted(
            Date.ISO8601FormatStyle(dateSeparator: .omitted, timeSeparator: .omitted, timeZone: .gmt))
        let day = String(timestamp.prefix(8))
        var headers = headers
        headers["x-amz-date"] = timestamp
        headers["x-amz-content-sha256"] = payloadHash
        let sorted = headers.sorted { $0.key < $1.key }
        let signedNames = sorted.map(\.key).joined(separator: ";")
        let canonicalHeaders = sorted.map { "\($0.key):\($0.value.trimmingCharacters(in: .whitespaces))\n" }.joined()
        let canonicalRequest = [method, path, "", canonicalHeaders, signedNames, payloadHash].joined(separator: "\n")
        let scope = "\(day)/\(region)/\(service)/aws4_request"
        let stringToSign = [
            "AWS4-HMAC-SHA256", timestamp, scope, SHA256.hash(data: Data(canonicalRequest.utf8)).hexDigits,
        ].joined(separator: "\n")
        var key = SymmetricKey(data: Data("AWS4\(secretAccessKey)".utf8))
        for part in [day, region, service, "aws4_request"] {
            key = SymmetricKey(data: HMAC<SHA256>.authenticationCode(for: Data(part.utf8), using: key))
        }
        let signature = HMAC<SHA256>.authenticationCode(for: Data(stringToSign.utf8), using: key).hexDigits
        headers["authorization"] =
            "AWS4-HMAC-SHA256 Credential=\(accessKeyID)/\(scope),SignedHeaders=\(signedNames),Signature=\(signature)"
        return headers
    }

    /// `path` as SigV4's canonical URI wants it, and as it is then sent: every byte but unreserved
    /// characters (`A-Z a-z 0-9 - . _ ~`) and `/` percent-encoded.
    static func encodePath(_ path: String) -> String {
        var encoded = ""
        for byte in path.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"), UInt8(ascii: "/"):
                encoded.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                encoded += "%" + [byte].hexDigits.uppercased()
            }
        }
        return encoded
    }
}
