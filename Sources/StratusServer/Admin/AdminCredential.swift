import Hummingbird
import StratusModel
import StratusStorage

/// The check of the admin token (whose hash the storage keeps), for the admin API, the console's
/// sign-in and `GET /metrics`.
struct AdminCredential: Sendable {
    /// The settings key of the admin token's hash.
    static let tokenHashSetting = "admin_token_hash"

    let storage: any SettingsStorage

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

    /// Refuses a request without `Authorization: Bearer <adminToken>` with `AUTHENTICATION_FAILED`.
    func authenticate(_ request: Request) async throws {
        guard let token = Self.bearerToken(request) else {
            throw StratusError(.authenticationFailed, "the admin API needs 'Authorization: Bearer <adminToken>'")
        }
        guard try await accepts(token) else { throw StratusError(.authenticationFailed, "the admin token is not valid") }
    }
}
