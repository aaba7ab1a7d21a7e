import Foundation
import StratusModel

/// An error from a Stratus call, with a code that mirrors CloudKit's `CKError.Code`.
///
/// Besides ``code`` and ``message``, an error carries what the caller needs to recover:
/// ``retryAfterSeconds`` for throttles, ``serverRecord``, ``clientRecord`` and ``ancestorRecord``
/// for ``Code/serverRecordChanged``, and ``partialErrorsByItemID`` for ``Code/partialFailure``.
public struct CloudError: Error, Sendable, CustomStringConvertible {
    /// What went wrong; the raw values are CloudKit's.
    public enum Code: Int, Sendable, Hashable, CaseIterable {
        /// A server error that retrying will not fix.
        case internalError = 1
        /// Some items of a batch failed; see ``CloudError/partialErrorsByItemID``.
        case partialFailure = 2
        /// The server could not be reached; retry when the network is back.
        case networkUnavailable = 3
        /// The connection failed; retry with backoff.
        case networkFailure = 4
        /// The container is unknown, or the API token does not belong to it.
        case badContainer = 5
        /// The server is unavailable for now; retry after ``CloudError/retryAfterSeconds``.
        case serviceUnavailable = 6
        /// The server throttled the caller; retry after ``CloudError/retryAfterSeconds``.
        case requestRateLimited = 7
        /// Not used by Stratus.
        case missingEntitlement = 8
        /// No user is signed in, or the session expired or was signed out.
        case notAuthenticated = 9
        /// The caller may not do this.
        case permissionFailure = 10
        /// The record does not exist.
        case unknownItem = 11
        /// The request is invalid; ``CloudError/message`` names the bad input and the rule.
        case invalidArguments = 12
        /// Not used.
        case resultsTruncated = 13
        /// The record changed on the server since it was fetched; merge into
        /// ``CloudError/serverRecord`` and save that.
        case serverRecordChanged = 14
        /// The server refused the request and retrying will not help.
        case serverRejectedRequest = 15
        /// An asset's file is missing.
        case assetFileNotFound = 16
        /// An asset's file changed while it was being uploaded.
        case assetFileModified = 17
        /// The app is too old for the server.
        case incompatibleVersion = 18
        /// A uniqueness rule was broken.
        case constraintViolation = 19
        /// The operation was cancelled.
        case operationCancelled = 20
        /// The change token is too old; fetch again from no token.
        case changeTokenExpired = 21
        /// Another item of an atomic batch failed, so this one was not saved either.
        case batchRequestFailed = 22
        /// The zone is busy; retry after ``CloudError/retryAfterSeconds``.
        case zoneBusy = 23
        /// The operation does not apply to this database.
        case badDatabase = 24
        /// The storage quota is used up.
        case quotaExceeded = 25
        /// The zone does not exist.
        case zoneNotFound = 26
        /// The request is over a server limit; split it.
        case limitExceeded = 27
        /// The user deleted the zone.
        case userDeletedZone = 28
        /// A share has too many participants.
        case tooManyParticipants = 29
        /// The record is already shared.
        case alreadyShared = 30
        /// A reference's target is missing, or a delete would break a validating reference.
        case referenceViolation = 31
        /// The account is restricted.
        case managedAccountRestricted = 32
        /// The participant must verify first.
        case participantMayNeedVerification = 33
        /// The server may have applied the request, but its answer was lost; fetch to find out
        /// before repeating it.
        case serverResponseLost = 34
        /// An asset's file cannot be read now.
        case assetNotAvailable = 35
        /// The account is temporarily unavailable.
        case accountTemporarilyUnavailable = 36
        /// The participant is already invited.
        case participantAlreadyInvited = 37
    }

    /// An item of a batch that a ``Code/partialFailure`` reports on.
    public enum ItemID: Hashable, Sendable {
        case record(Record.ID)
        case zone(RecordZone.ID)
        case subscription(Subscription.ID)
    }

    /// What went wrong.
    public var code: Code
    /// What went wrong, in words that name the bad input and the rule, as the server or SDK wrote them.
    public var message: String
    /// The server's `serverErrorCode`, when the error came from the server.
    public var serverErrorCode: String?
    /// How long to wait before retrying, for throttles and unavailable services.
    public var retryAfterSeconds: Double?
    /// For ``Code/serverRecordChanged``: the record as the server holds it now. Merge your changes
    /// into it and save it.
    public var serverRecord: Record?
    /// For ``Code/serverRecordChanged``: the record you tried to save.
    public var clientRecord: Record?
    /// For ``Code/serverRecordChanged``: the version your edit was based on (your record without
    /// its unsaved changes).
    public var ancestorRecord: Record?
    /// For ``Code/partialFailure``: the error of each item that failed.
    public var partialErrorsByItemID: [ItemID: CloudError]?
    /// For ``Code/notAuthenticated`` without a session: the server's sign-in page.
    public var redirectURL: String?
    /// The server's identifier for this error, for its logs.
    public var uuid: String?

    /// Creates an error.
    public init(_ code: Code, _ message: String, retryAfterSeconds: Double? = nil) {
        self.code = code
        self.message = message
        self.retryAfterSeconds = retryAfterSeconds
    }

    public var description: String {
        var text = "\(code) (\(code.rawValue)): \(message)"
        if let retryAfterSeconds { text += "; retry after \(retryAfterSeconds) s" }
        if let partialErrorsByItemID {
            text += "; \(partialErrorsByItemID.count) item(s) failed"
        }
        return text
    }

    /// The refusal of a write to a zone shared with the signed-in user read-only, as the server
    /// words it: the SDK and the sync engine refuse such a write with it before sending.
    package static func sharedReadOnly(_ zoneID: RecordZone.ID) -> CloudError {
        CloudError(
            .permissionFailure,
            "zone '\(zoneID.zoneName)' is shared with you read-only; only its owner and READ_WRITE participants write")
    }

    /// Whether waiting and sending the same request again may succeed: network failures,
    /// throttles, an unavailable service or a busy zone.
    public var isTransient: Bool {
        switch code {
        case .networkUnavailable, .networkFailure, .serviceUnavailable, .requestRateLimited, .zoneBusy: true
        default: false
        }
    }
}

extension CloudError {
    /// The error a server error dictionary stands for.
    init(_ wire: ErrorDictionary) {
        self.init(Self.code(for: wire.serverErrorCode), wire.reason, retryAfterSeconds: wire.retryAfter.map(Double.init))
        serverErrorCode = wire.serverErrorCode.rawValue
        redirectURL = wire.redirectURL
        uuid = wire.uuid.isEmpty ? nil : wire.uuid
    }

    /// The CloudKit code of a `serverErrorCode`. (`EXISTS` in answer to saving a record is
    /// ``Code/serverRecordChanged``, as in CloudKit; the record endpoints map it so.)
    static func code(for serverErrorCode: ServerErrorCode) -> Code {
        switch serverErrorCode {
        case .accessDenied: .permissionFailure
        case .atomicError: .batchRequestFailed
        case .authenticationFailed, .authenticationRequired: .notAuthenticated
        case .badRequest: .invalidArguments
        case .conflict: .serverRecordChanged
        case .exists: .constraintViolation
        case .internalError: .internalError
        case .notFound: .unknownItem
        case .quotaExceeded: .quotaExceeded
        case .throttled: .requestRateLimited
        case .tryAgainLater: .serviceUnavailable
        case .validatingReferenceError: .referenceViolation
        case .zoneNotFound: .zoneNotFound
        case .changeTokenExpired: .changeTokenExpired
        case .limitExceeded: .limitExceeded
        case .alreadyShared: .alreadyShared
        }
    }
}
