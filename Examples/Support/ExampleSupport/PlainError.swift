public import Foundation
public import Stratus

/// What went wrong, as a sentence for the person at the terminal: what happened and, where there
/// is one, what to do, without error domains, type names or numeric codes. The error's own reason
/// (which names the record, zone or field) follows in parentheses.
public func plainSentence(for error: any Error) -> String {
    if let error = error as? CloudError {
        let reason = error.message.isEmpty ? "" : " (\(error.message))"
        switch error.code {
        case .notAuthenticated:
            return "This device is not signed in, or its session ended: sign in again with 'signin'." + reason
        case .permissionFailure:
            return "Not allowed: this user may not do that." + reason
        case .networkUnavailable, .networkFailure:
            return "The server could not be reached; check its address (--server, --credentials) and that it runs."
        case .serviceUnavailable, .requestRateLimited, .zoneBusy:
            let wait = error.retryAfterSeconds.map { " Try again in \(Int($0.rounded(.up))) s." } ?? " Try again shortly."
            return "The server is busy." + wait
        case .unknownItem, .zoneNotFound:
            return "Not found." + reason
        case .serverRecordChanged:
            return "Someone changed it at the same time; sync and try again." + reason
        case .quotaExceeded:
            return "This user's storage on the server is full." + reason
        case .changeTokenExpired:
            return "This device was away too long to catch up change by change; sync again to fetch everything." + reason
        case .partialFailure:
            let count = error.partialErrorsByItemID?.count ?? 0
            let first = error.partialErrorsByItemID?.values.first.map { " The first: " + plainSentence(for: $0) } ?? ""
            return "\(count) of the changes were refused." + first
        default:
            guard let first = error.message.first else { return "The request was refused." }
            let sentence = first.uppercased() + error.message.dropFirst()
            return sentence.hasSuffix(".") ? sentence : sentence + "."
        }
    }
    let nsError = error as NSError
    if nsError.domain == NSCocoaErrorDomain {
        let path = (nsError.userInfo[NSFilePathErrorKey] as? String) ?? (nsError.userInfo[NSURLErrorKey] as? URL)?.path
        let file = path.map { " \($0)" } ?? ""
        switch CocoaError.Code(rawValue: nsError.code) {
        case .fileReadNoSuchFile, .fileNoSuchFile: return "There is no file\(file)."
        case .fileReadNoPermission, .fileWriteNoPermission: return "Not allowed to read or write\(file)."
        case .fileWriteOutOfSpace: return "The disk is full; nothing was written\(file.isEmpty ? "" : " to" + file)."
        case .fileReadCorruptFile: return "The file\(file) is not in the expected format."
        default: break
        }
    }
    return String(describing: error)
}
