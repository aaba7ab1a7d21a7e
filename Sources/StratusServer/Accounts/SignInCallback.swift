import StratusModel

/// The `callback` of the sign-in page, the URL the page sends the new web auth token to, checked
/// so that the browser cannot read it as any other place than the server does.
///
/// Browsers parse URLs by the WHATWG URL Standard, which differs from other parsers on backslashes,
/// `@` and user info, percent-encoded and numeric hosts, IPv6 forms, tabs, newlines and spaces, and
/// letter case. Rather than guessing how a browser will read such strings, the server accepts only
/// URLs in a form that every parser reads alike, and refuses anything else with a reason:
/// - `http://` or `https://`, in lowercase;
/// - a host of lowercase letters, digits, dots and hyphens in labels (or exactly `[::1]`), then an
///   optional port of decimal digits without leading zeros;
/// - a path, query and fragment of printable ASCII without `\` or `@`, where `%` is only the start
///   of a `%XX` escape.
///
/// The host must be a loopback name (`127.0.0.1`, `localhost`, `[::1]`, where native apps receive
/// it, as in RFC 8252) or this server's own origin. The page then checks in the browser that its own
/// parser gives the ``origin`` computed here before it sends the token anywhere.
///
/// An app may also take the token at its own URL scheme, `cloudkit-{container}://…` (the container
/// identifier in lowercase, as CloudKit names it): such a callback has no host to check, and its
/// ``origin`` is the scheme (`cloudkit-….:`), which the page compares with the browser's
/// `URL.protocol`.
struct SignInCallback: Sendable, Hashable {
    /// The callback as given, which is already in the only form accepted.
    let url: String
    /// Its origin, `scheme://host[:port]` without a default port, as a browser serializes it; for an
    /// app's `cloudkit-…` scheme, the scheme and its colon.
    let origin: String

    private static let loopbackHosts: Set<String> = ["127.0.0.1", "localhost", "[::1]"]

    /// Checks `raw` against the rules above. `serverOrigin` is the server's public URL's origin when
    /// one is configured (the callback's origin must then equal it); otherwise `serverAuthority`, the
    /// request's `Host`, is compared with the callback's host and port.
    init(_ raw: String, container: String = "", serverOrigin: String?, serverAuthority: String?) throws {
        let appScheme = "cloudkit-" + container.lowercased()
        if !container.isEmpty, raw.hasPrefix(appScheme + "://") {
            let bytes = Array(raw.utf8)
            if let bad = bytes.first(where: { !Self.isAllowed($0) }) {
                throw Self.refusal("contains \(Self.describe(bad)), which browsers and servers may read differently")
            }
            guard Self.hasValidEscapes(bytes[...]) else { throw Self.refusal("has a '%' that does not start a %XX escape") }
            url = raw
            origin = appScheme + ":"
            return
        }
        let parsed = try Self.parse(raw)
        if !Self.loopbackHosts.contains(parsed.host) {
            let allowed = serverOrigin.map { parsed.origin == $0 } ?? (parsed.authority == serverAuthority?.lowercased())
            guard allowed else {
                throw Self.refusal("names the host '\(parsed.host)', which is neither a loopback address nor this server")
            }
        }
        url = raw
        origin = parsed.origin
    }

    /// A callback checked before, as a sealed sign-in (``WebSignIn``) kept it.
    init(checked url: String, origin: String) {
        self.url = url
        self.origin = origin
    }

    /// The origin of a URL such as `--public-url`, as a browser serializes it; `nil` when the URL is
    /// not in the form this type accepts.
    static func origin(of url: String) -> String? {
        try? parse(url).origin
    }

    /// `raw` when it is an origin (`scheme://host[:port]`, as a browser serializes one, such as a
    /// request's `Origin`) that the rule admits as a callback's: the origin a sign-in popup may post
    /// the token to. `nil` otherwise.
    static func openerOrigin(_ raw: String, serverOrigin: String?, serverAuthority: String?) -> String? {
        guard let callback = try? SignInCallback(raw + "/", serverOrigin: serverOrigin, serverAuthority: serverAuthority),
            callback.origin == raw
        else { return nil }
        return raw
    }

    private static func refusal(_ rule: String) -> StratusError {
        .badRequest(
            "callback \(rule); it must be an http(s) URL on a loopback address or on this server, or the app's "
                + "cloudkit-{container}:// scheme")
    }

    private static func parse(_ raw: String) throws -> (origin: String, authority: String, host: String) {
        let bytes = Array(raw.utf8)
        guard let scheme = ["http", "https"].first(where: { raw.hasPrefix($0 + "://") }) else {
            throw refusal("must start with http:// or https:// in lowercase")
        }
        if let bad = bytes.first(where: { !isAllowed($0) }) {
            throw refusal("contains \(describe(bad)), which browsers and servers may read differently")
        }
        let rest = bytes[(scheme.count + 3)...]
        let authorityEnd =
            rest.firstIndex { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") }
            ?? rest.endIndex
        let authority = String(decoding: rest[..<authorityEnd], as: UTF8.self)
        guard hasValidEscapes(rest[authorityEnd...]) else { throw refusal("has a '%' that does not start a %XX escape") }
        let (host, port) = try split(authority)
        let defaultPort = scheme == "http" ? 80 : 443
        let origin = "\(scheme)://\(host)" + (port.map { $0 == defaultPort ? "" : ":\($0)" } ?? "")
        return (origin, authority, host)
    }

    private static func split(_ authority: String) throws -> (host: String, port: Int?) {
        var host = Substring(authority)
        var port: Int?
        if let colon = authority.lastIndex(of: ":"), !authority.hasSuffix("]") {
            host = authority[..<colon]
            let digits = authority[authority.index(after: colon)...]
            guard (1...5).contains(digits.count), digits.allSatisfy(\.isASCII), digits.allSatisfy(\.isNumber),
                digits.first != "0", let value = Int(digits), value <= 65535
            else { throw refusal("has a port that is not a number from 1 to 65535 without leading zeros") }
            port = value
        }
        if host.hasPrefix("[") {
            guard host == "[::1]" else { throw refusal("has an IPv6 host other than [::1]") }
            return (String(host), port)
        }
        let labels = host.split(separator: ".", omittingEmptySubsequences: false)
        let validLabels = !host.isEmpty && labels.allSatisfy { label in
            !label.isEmpty && label.first != "-" && label.last != "-"
                && label.utf8.allSatisfy { (97...122).contains($0) || (48...57).contains($0) || $0 == 45 }
        }
        guard validLabels else {
            throw refusal("has a host that is not lowercase letters, digits and hyphens in dot-separated labels")
        }
        return (String(host), port)
    }

    /// Printable ASCII without the characters parsers read differently: `\` (a path separator to
    /// browsers only) and `@` (user info, which moves where the host starts).
    private static func isAllowed(_ byte: UInt8) -> Bool {
        (0x21...0x7E).contains(byte) && byte != UInt8(ascii: "\\") && byte != UInt8(ascii: "@")
    }

    private static func hasValidEscapes(_ bytes: ArraySlice<UInt8>) -> Bool {
        var index = bytes.startIndex
        while let percent = bytes[index...].firstIndex(of: UInt8(ascii: "%")) {
            let digits = bytes[(percent + 1)...].prefix(2)
            guard digits.count == 2, digits.allSatisfy({ Character(UnicodeScalar($0)).isHexDigit }) else { return false }
            index = percent + 3
        }
        return true
    }

    private static func describe(_ byte: UInt8) -> String {
        (0x21...0x7E).contains(byte) ? "'\(Character(UnicodeScalar(byte)))'" : "a space, control or non-ASCII byte"
    }
}
