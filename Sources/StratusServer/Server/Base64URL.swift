import Foundation

/// Base64url without padding (RFC 4648 §5), the alphabet of JWTs and Web Push keys: nothing in it
/// needs escaping in a URL.
enum Base64URL {
    /// `bytes` in base64url without padding.
    static func encode<Bytes: Sequence<UInt8>>(_ bytes: Bytes) -> String {
        var text = Data(bytes).base64EncodedString()
        text = text.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        while text.hasSuffix("=") { text.removeLast() }
        return text
    }

    /// The bytes of base64url `text`, padded or not (standard base64 is read too); `nil` when it is
    /// not base64.
    static func decode(_ text: String) -> Data? {
        var text = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        if text.count % 4 != 0 { text += String(repeating: "=", count: 4 - text.count % 4) }
        return Data(base64Encoded: text)
    }
}
