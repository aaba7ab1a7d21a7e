import Foundation

extension String {
    /// The string percent-encoded as a URL query value: every character but ASCII letters, digits
    /// and `-._~` is escaped, so `&`, `=`, `+` and `/` in a token or a name cannot change the query.
    public var queryValueEncoded: String {
        addingPercentEncoding(withAllowedCharacters: queryValueCharacters) ?? self
    }
}

/// The characters left as they are in a query value (RFC 3986's unreserved characters).
private let queryValueCharacters: CharacterSet = {
    var allowed = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
    allowed.insert(charactersIn: "-._~")
    return allowed
}()
