import Foundation
import StratusModel

/// Where the sign-in page hands a new web auth token: to the checked `callback` (appended as
/// `ckWebAuthToken` and `ckSession`, as Apple's sign-in page redirects), else to the window that
/// opened it as a popup (`postMessage({ckSession})`, as Apple's web library waits for it, to the
/// checked `origin` only), else on screen.
struct SignInHandoff: Sendable, Hashable {
    var callback: SignInCallback?
    var openerOrigin: String?
}

/// The HTML sign-in page. It offers the container's identity providers (each starts the browser
/// sign-in, ``WebSignIn``) and, unless the operator turned passwords off, a password form that posts
/// to the JSON endpoints next to it; either way it hands the token on as ``SignInHandoff`` says.
///
/// The page sends the token only to the origin the server computed for the callback
/// (``SignInCallback/origin``): it parses the callback with the browser's own URL parser and refuses
/// to navigate when that parser reads another origin.
enum SignInPage {
    /// A provider's button: its name and the URL that starts its browser sign-in.
    struct ProviderLink {
        var name: String
        var url: String
    }

    /// The page. With `session`, a sign-in at a provider just ended: the page hands that token on at
    /// once. With `problem`, it shows why the last attempt failed.
    static func html(
        container: String, handoff: SignInHandoff, providers: [ProviderLink] = [], passwords: Bool = true,
        session: String? = nil, problem: String? = nil
    ) -> String {
        let buttons = providers.map { provider in
            "<a class=\"provider\" href=\"\(escape(provider.url))\">Continue with \(escape(displayName(provider.name)))</a>"
        }.joined()
        let form =
            passwords
            ? """
            <form id="form"><input id="username" placeholder="Username" autocomplete="username" required>
            <input id="password" type="password" placeholder="Password" autocomplete="current-password" required>
            <button name="action" value="signin">Sign in</button>
            <button name="action" value="signup">Create account</button></form>
            """ : ""
        return """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><title>Sign in to \(escape(container))</title>
            <meta name="viewport" content="width=device-width, initial-scale=1">
            <meta name="referrer" content="no-referrer">
            <style>body{font:16px system-ui,sans-serif;max-width:22rem;margin:4rem auto;padding:0 1rem}
            input,button,.provider{font:inherit;width:100%;margin:.3rem 0;padding:.5rem;box-sizing:border-box}
            .provider{display:block;text-align:center;border:1px solid #888;border-radius:4px;color:inherit;text-decoration:none}
            #result{word-break:break-all}</style></head>
            <body><h1>Sign in</h1><p>to <b>\(escape(container))</b></p>
            \(buttons)\(form)
            <p id="result">\(escape(problem ?? ""))</p>
            <script>
            const query = new URLSearchParams(location.search);
            const callback = \(scriptLiteral(handoff.callback?.url));
            const callbackOrigin = \(scriptLiteral(handoff.callback?.origin));
            const openerOrigin = \(scriptLiteral(handoff.openerOrigin));
            function deliver(token) {
              if (callback) {
                const url = new URL(callback);
                const sameOrigin = callbackOrigin.endsWith(':') ? url.protocol === callbackOrigin : url.origin === callbackOrigin;
                if (!sameOrigin) { result.textContent = 'The callback was refused.'; return; }
                url.searchParams.set('ckWebAuthToken', token);
                url.searchParams.set('ckSession', token);
                location.href = url.toString();
              } else if (openerOrigin && window.opener) {
                window.opener.postMessage({ckSession: token}, openerOrigin);
                result.textContent = 'Signed in. You may close this window.';
                window.close();
              } else {
                result.textContent = 'ckWebAuthToken: ' + token;
              }
            }
            const session = \(scriptLiteral(session));
            if (session) deliver(session);
            const form = document.getElementById('form');
            if (form) form.addEventListener('submit', async (event) => {
              event.preventDefault();
              const action = event.submitter.value;
              const response = await fetch(action + '?ckAPIToken=' + encodeURIComponent(query.get('ckAPIToken') || ''), {
                method: 'POST',
                body: JSON.stringify({username: username.value, password: password.value})
              });
              const body = await response.json();
              if (!response.ok) { result.textContent = body.reason; return; }
              deliver(body.ckWebAuthToken);
            });
            </script></body></html>
            """
    }

    /// How a provider's button names it: Apple as Apple asks, others by their configured name.
    private static func displayName(_ name: String) -> String {
        name == IdentityProvider.appleName ? "Apple" : name.prefix(1).uppercased() + name.dropFirst()
    }

    private static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: "\"", with: "&quot;")
    }

    /// A JavaScript string literal (or `null`) that is safe inside `<script>`.
    private static func scriptLiteral(_ value: String?) -> String {
        var writer = JSONWriter()
        if let value { writer.string(value) } else { writer.null() }
        // Inside <script>, "<" must not start a tag.
        return String(decoding: writer.bytes, as: UTF8.self).replacingOccurrences(of: "<", with: "\\u003c")
    }
}
