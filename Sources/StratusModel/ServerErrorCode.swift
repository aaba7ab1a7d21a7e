/// The `serverErrorCode` values of CloudKit Web Services, with the HTTP status each one carries.
public enum ServerErrorCode: String, Sendable, Hashable, CaseIterable {
    case accessDenied = "ACCESS_DENIED"
    case atomicError = "ATOMIC_ERROR"
    case authenticationFailed = "AUTHENTICATION_FAILED"
    case authenticationRequired = "AUTHENTICATION_REQUIRED"
    case badRequest = "BAD_REQUEST"
    case conflict = "CONFLICT"
    case exists = "EXISTS"
    case internalError = "INTERNAL_ERROR"
    case notFound = "NOT_FOUND"
    case quotaExceeded = "QUOTA_EXCEEDED"
    case throttled = "THROTTLED"
    case tryAgainLater = "TRY_AGAIN_LATER"
    case validatingReferenceError = "VALIDATING_REFERENCE_ERROR"
    case zoneNotFound = "ZONE_NOT_FOUND"
    /// Stratus's code for a sync token older than the tombstone horizon (Apple documents no wire
    /// code; CloudKit's native SDK calls it `changeTokenExpired`). Fetch again without a token.
    case changeTokenExpired = "CHANGE_TOKEN_EXPIRED"
    /// Stratus's code for a request body over the size limit.
    case limitExceeded = "LIMIT_EXCEEDED"
    /// Stratus's code for sharing a record that is already in a share: it, its parent chain or a
    /// record below it heads or belongs to another (Apple documents no wire code; CloudKit's native
    /// SDK calls it `alreadyShared`).
    case alreadyShared = "ALREADY_SHARED"

    /// The HTTP status a response carries when the whole request fails with this code.
    public var httpStatus: Int {
        switch self {
        case .accessDenied: 403
        case .atomicError, .badRequest: 400
        case .authenticationFailed: 401
        case .authenticationRequired: 421
        case .conflict, .exists, .alreadyShared: 409
        case .internalError: 500
        case .notFound, .zoneNotFound: 404
        case .quotaExceeded, .limitExceeded: 413
        case .throttled: 429
        case .tryAgainLater: 503
        case .validatingReferenceError: 412
        case .changeTokenExpired: 410
        }
    }
}
