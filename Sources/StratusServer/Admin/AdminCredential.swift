import Hummingbird
import StratusModel
import StratusStorage

/// Who may administer the server: the holder of the admin token (whose hash the storage keeps), or
/// a console session signed in with it, on a call that carries the session's CSRF token. For the
/// admin API, the console and `GET /metrics`.
struct AdminCredential: Sendable {
    /// The settings key of the admin token's hash.
    static let tokenHashSetting = "admin_token_hash"

    let storage: any SettingsStorage
    let console: ConsoleSessions

    /// Whether `token` is the admin token, compared in constant time.
    func accepts(_ token: String) async throws -> Bool {
        guard let stored = try await storage.setting(Self.tokenHashSetting) else { return false }
        return Secrets.constantTimeEquals(Array(Secrets.hash(token).utf8), Array(stored.utf8))
    }

    /// The token of an `Authorization: Bearer <token>` header.
    static func bearerToken(_ request: Request) -> String? {
        guard let header = request.headers[.authorization], header.hasPrefix("Bearer ") else { return nil }
        return String(header.dropFirst("Bearer ".count))
    }

    /// Refuses a request that is neither from the admin token (`Authorization: Bearer <adminToken>`)
    /// nor from a console session, with `AUTHENTICATION_FAILED`; records who it is for the audit log.
    func authenticate(_ request: Request, context: StratusRequestContext) async throws {
        if let token = Self.bearerToken(request) {
            guard try await accepts(token) else {
                context.trace.act(as: "admin token (refused)")
                throw StratusError(.authenticationFailed, "the admin token is not valid")
            }
            context.trace.act(as: "admin token")
            return
        }
        if let session = console.verifiedSession(of: request) {
            context.trace.act(as: "console session \(session.label)")
            return
        }
        throw StratusError(.authenticationFailed, "the admin API needs 'Authorization: Bearer <adminToken>'")
    }
}
