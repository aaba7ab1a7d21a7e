import Foundation
import HTTPTypes
import Hummingbird
import StratusModel
import Synchronization

/// The console's signed-in sessions, kept by this instance in memory (by the hash of their cookie):
/// a session ends after `idleTimeout` without a request, after `lifetime` whatever happens, or when
/// its holder signs out. Each has a CSRF token that every state-changing request must echo.
final class ConsoleSessions: Sendable {
    /// A signed-in console session.
    struct Session: Sendable {
        /// A short, non-secret name for the audit log and the page.
        var label: String
        /// The token a state-changing request carries in `X-Stratus-Console-CSRF` (or a form's `csrf`).
        var csrfToken: String
        var created: Int64
        var lastSeen: Int64
    }

    /// The cookie that carries a session.
    static let cookieName = "stratus_console"

    let idleTimeout: Duration
    let lifetime: Duration
    private let clock: ServerClock
    private let sessions = Mutex<[String: Session]>([:])

    init(clock: ServerClock, idleTimeout: Duration = .seconds(30 * 60), lifetime: Duration = .seconds(12 * 3600)) {
        self.clock = clock
        self.idleTimeout = idleTimeout
        self.lifetime = lifetime
    }

    /// Starts a session; returns the cookie's value (the server keeps only its hash) and the session.
    func create() -> (cookie: String, session: Session) {
        let cookie = Secrets.makeToken()
        let now = clock.milliseconds
        let session = Session(
            label: String(Secrets.hash(cookie).prefix(8)), csrfToken: Secrets.makeToken(), created: now, lastSeen: now)
        sessions.withLock { sessions in
            sessions = sessions.filter { isLive($0.value, now: now) }
            sessions[Secrets.hash(cookie)] = session
        }
        return (cookie, session)
    }

    /// The live session of a request's cookie, marked as seen now.
    func session(of request: Request) -> Session? {
        session(of: request) { _ in true }
    }

    /// The live session of a request that also carries its CSRF token in `X-Stratus-Console-CSRF`,
    /// as every console call to the API does; `nil` otherwise. A request without the right token does
    /// not keep the session alive.
    func verifiedSession(of request: Request) -> Session? {
        guard let presented = request.headers[.stratusConsoleCSRF] else { return nil }
        return session(of: request) { Secrets.constantTimeEquals(Array(presented.utf8), Array($0.csrfToken.utf8)) }
    }

    /// The live session of a request's cookie if `accepts` it, then marked as seen now.
    private func session(of request: Request, accepting accepts: (Session) -> Bool) -> Session? {
        guard let cookie = Self.cookie(of: request) else { return nil }
        let key = Secrets.hash(cookie)
        let now = clock.milliseconds
        return sessions.withLock { sessions in
            guard var session = sessions[key] else { return nil }
            guard isLive(session, now: now) else {
                sessions[key] = nil
                return nil
            }
            guard accepts(session) else { return nil }
            session.lastSeen = now
            sessions[key] = session
            return session
        }
    }

    /// Ends the session of a request's cookie.
    func end(_ request: Request) {
        guard let cookie = Self.cookie(of: request) else { return }
        _ = sessions.withLock { $0.removeValue(forKey: Secrets.hash(cookie)) }
    }

    private func isLive(_ session: Session, now: Int64) -> Bool {
        now - session.lastSeen < idleTimeout.milliseconds64 && now - session.created < lifetime.milliseconds64
    }

    /// The console cookie's value in a request's `Cookie` headers.
    static func cookie(of request: Request) -> String? {
        for header in request.headers[values: .cookie] {
            for pair in header.split(separator: ";") {
                let parts = pair.trimmingCharacters(in: .whitespaces).split(separator: "=", maxSplits: 1)
                if parts.count == 2, parts[0] == cookieName { return String(parts[1]) }
            }
        }
        return nil
    }
}

extension Duration {
    /// The duration in whole milliseconds.
    var milliseconds64: Int64 {
        components.seconds * 1_000 + components.attoseconds / 1_000_000_000_000_000
    }
}

extension HTTPField.Name {
    /// The console's CSRF token, on every call the console's pages make to the API.
    static let stratusConsoleCSRF = Self("X-Stratus-Console-CSRF")!
    /// The user a console call acts as, on the `/database/1/` endpoints.
    static let stratusConsoleUser = Self("X-Stratus-Console-User")!
}
