/// An error a request fails with: a stable wire code and a reason that names the bad input and the
/// rule it breaks.
public struct StratusError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The wire code; its HTTP status is `code.httpStatus`.
    public var code: ServerErrorCode
    /// What went wrong, naming the field or item and the rule.
    public var reason: String
    /// For `AUTHENTICATION_REQUIRED`: where the user signs in.
    public var redirectURL: String?
    /// Seconds after which a retry may succeed.
    public var retryAfter: Int?

    /// Creates an error.
    public init(_ code: ServerErrorCode, _ reason: String, redirectURL: String? = nil, retryAfter: Int? = nil) {
        self.code = code
        self.reason = reason
        self.redirectURL = redirectURL
        self.retryAfter = retryAfter
    }

    public var description: String { "\(code.rawValue): \(reason)" }

    /// `BAD_REQUEST` with a reason.
    public static func badRequest(_ reason: String) -> StratusError { StratusError(.badRequest, reason) }
}
