import Hummingbird
import HummingbirdCore
import StratusModel

/// Refuses a request whose query holds `%00` (U+0000) in a value with `400`, before anything reads
/// it: Stratus refuses U+0000 in all text (PostgreSQL's text cannot hold it, and SQLite compares text
/// only up to it, so a name with a NUL suffix would reach what the name without it names). Query
/// values are the URL's only decoded part (paths and parameter names are used as sent); JSON bodies
/// are refused by the JSON reader, form fields where forms are decoded, and HTTP headers cannot
/// carry the character.
struct NullCharacterMiddleware: RouterMiddleware {
    typealias Context = StratusRequestContext

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        if let violation = Self.violation(in: request.uri) { throw StratusError.badRequest(violation) }
        return try await next(request, context)
    }

    /// The query parameter of `uri` whose value holds an encoded U+0000, as the reason to refuse it;
    /// `nil` when none does.
    static func violation(in uri: URI) -> String? {
        guard let query = uri.query, query.contains("%00") else { return nil }
        for pair in query.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1)
            guard parts.count == 2, parts[1].contains("%00") else { continue }
            return "the query parameter '\(parts[0])' holds %00 (U+0000), which Stratus refuses in all text"
        }
        return nil
    }
}
