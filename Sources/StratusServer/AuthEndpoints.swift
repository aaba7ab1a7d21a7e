import Foundation
import Hummingbird
import StratusModel

/// User accounts: `/auth/1/{container}/signup`, `/signin`, `/signout`, and the sign-in page that
/// `AUTHENTICATION_REQUIRED` answers redirect to.
struct AuthEndpoints: Sendable {
    let accounts: AccountService
    let authenticator: Authenticator
    let configuration: ServerConfiguration
    let hub: PushHub

    func addRoutes(to router: Router<some RequestContext>) {
        let auth = router.group("auth/1/:container")
        auth.post("signup") { request, context in
            let container = try await authenticator.authenticateApp(request, context: context)
            let body = try await request.decodeJSON(PasswordCredentials.self, limit: 64 << 10)
            let session = try await accounts.signUp(container: container, username: body.username, password: body.password)
            return Self.sessionResponse(session)
        }
        auth.post("signin") { request, context in
            let container = try await authenticator.authenticateApp(request, context: context)
            let body = try await request.decodeJSON(PasswordCredentials.self, limit: 64 << 10)
            let session = try await accounts.signIn(container: container, username: body.username, password: body.password)
            return Self.sessionResponse(session)
        }
        auth.post("signout") { request, context in
            let container = try await authenticator.authenticateApp(request, context: context)
            guard let token = request.query("ckWebAuthToken") else {
                throw StratusError.badRequest("ckWebAuthToken is required: it names the session to end")
            }
            _ = try await accounts.user(forWebAuthToken: token, container: container)
            try await accounts.signOut(webAuthToken: token)
            hub.closeConnections(sessionHash: Secrets.hash(token))
            var writer = JSONWriter()
            writer.beginObject()
            writer.endObject()
            return Response.json(writer)
        }
        auth.get("signin") { request, context in
            let container = try await authenticator.authenticateApp(request, context: context)
            let callback = try SignInPage.allowedCallback(request.query("callback"), serverAuthority: request.head.authority)
            return Response(
                status: .ok, headers: [.contentType: "text/html; charset=utf-8"],
                body: ResponseBody(byteBuffer: ByteBuffer(string: SignInPage.html(container: container, callback: callback))))
        }
    }

    private static func sessionResponse(_ session: IssuedSession) -> Response {
        .json(
            WebAuthSession(
                ckWebAuthToken: session.webAuthToken, userRecordName: session.userRecordName,
                expires: session.expiresAt))
    }
}

/// The HTML sign-in page. It posts to the JSON endpoints next to it and hands the token back to
/// `callback` (appended as `ckWebAuthToken`) or shows it on screen.
///
/// A callback must be on a loopback address (how native apps receive it, as in RFC 8252) or on
/// this server's own origin: otherwise any web page could open the sign-in page and collect the
/// tokens of users who sign in there.
enum SignInPage {
    /// Checks a `callback` URL; `nil` stays `nil`.
    static func allowedCallback(_ raw: String?, serverAuthority: String?) throws -> String? {
        guard let raw else { return nil }
        guard let url = URL(string: raw), let scheme = url.scheme?.lowercased(), ["http", "https"].contains(scheme),
            let host = url.host?.lowercased()
        else {
            throw StratusError.badRequest("callback must be an absolute http or https URL")
        }
        let loopback = ["127.0.0.1", "localhost", "::1", "[::1]"].contains(host)
        let authority = url.port.map { "\(host):\($0)" } ?? host
        guard loopback || authority == serverAuthority?.lowercased() else {
            throw StratusError.badRequest(
                "callback must be on a loopback address (127.0.0.1, localhost, ::1) or on this server, not '\(host)'")
        }
        return raw
    }

    static func html(container: String, callback: String?) -> String {
        let escaped = container.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
        var callbackJSON = JSONWriter()
        if let callback { callbackJSON.string(callback) } else { callbackJSON.null() }
        // Inside <script>, "<" must not start a tag.
        let callbackLiteral = String(decoding: callbackJSON.bytes, as: UTF8.self).replacingOccurrences(of: "<", with: "\\u003c")
        return """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><title>Sign in to \(escaped)</title>
            <meta name="viewport" content="width=device-width, initial-scale=1">
            <style>body{font:16px system-ui,sans-serif;max-width:22rem;margin:4rem auto;padding:0 1rem}
            input,button{font:inherit;width:100%;margin:.3rem 0;padding:.5rem;box-sizing:border-box}
            #result{word-break:break-all}</style></head>
            <body><h1>Sign in</h1><p>to <b>\(escaped)</b></p>
            <form id="form"><input id="username" placeholder="Username" autocomplete="username" required>
            <input id="password" type="password" placeholder="Password" autocomplete="current-password" required>
            <button name="action" value="signin">Sign in</button>
            <button name="action" value="signup">Create account</button></form>
            <p id="result"></p>
            <script>
            const query = new URLSearchParams(location.search);
            document.getElementById('form').addEventListener('submit', async (event) => {
              event.preventDefault();
              const action = event.submitter.value;
              const response = await fetch(action + '?ckAPIToken=' + encodeURIComponent(query.get('ckAPIToken') || ''), {
                method: 'POST',
                body: JSON.stringify({username: username.value, password: password.value})
              });
              const body = await response.json();
              if (!response.ok) { result.textContent = body.reason; return; }
              const callback = \(callbackLiteral);
              if (callback) {
                const url = new URL(callback);
                url.searchParams.set('ckWebAuthToken', body.ckWebAuthToken);
                location.href = url.toString();
              } else {
                result.textContent = 'ckWebAuthToken: ' + body.ckWebAuthToken;
              }
            });
            </script></body></html>
            """
    }
}
