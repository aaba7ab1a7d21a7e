import Foundation
import StratusModel

/// The HTML sign-in page. It posts to the JSON endpoints next to it and hands the token back: to the
/// checked `callback` (appended as `ckWebAuthToken` and `ckSession`, as Apple's sign-in page
/// redirects), else to the window that opened it as a popup (`postMessage({ckSession})`, as Apple's
/// web library waits for it, to the checked `origin` only), else on screen.
///
/// The page sends the token only to the origin the server computed for the callback
/// (``SignInCallback/origin``): it parses the callback with the browser's own URL parser and refuses
/// to navigate when that parser reads another origin.
enum SignInPage {
    static func html(container: String, callback: SignInCallback?, openerOrigin: String? = nil) -> String {
        let escaped = container.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
        return """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><title>Sign in to \(escaped)</title>
            <meta name="viewport" content="width=device-width, initial-scale=1">
            <meta name="referrer" content="no-referrer">
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
            const callback = \(scriptLiteral(callback?.url));
            const callbackOrigin = \(scriptLiteral(callback?.origin));
            const openerOrigin = \(scriptLiteral(openerOrigin));
            document.getElementById('form').addEventListener('submit', async (event) => {
              event.preventDefault();
              const action = event.submitter.value;
              const response = await fetch(action + '?ckAPIToken=' + encodeURIComponent(query.get('ckAPIToken') || ''), {
                method: 'POST',
                body: JSON.stringify({username: username.value, password: password.value})
              });
              const body = await response.json();
              if (!response.ok) { result.textContent = body.reason; return; }
              if (callback) {
                const url = new URL(callback);
                const sameOrigin = callbackOrigin.endsWith(':') ? url.protocol === callbackOrigin : url.origin === callbackOrigin;
                if (!sameOrigin) { result.textContent = 'The callback was refused.'; return; }
                url.searchParams.set('ckWebAuthToken', body.ckWebAuthToken);
                url.searchParams.set('ckSession', body.ckWebAuthToken);
                location.href = url.toString();
              } else if (openerOrigin && window.opener) {
                window.opener.postMessage({ckSession: body.ckWebAuthToken}, openerOrigin);
                result.textContent = 'Signed in. You may close this window.';
                window.close();
              } else {
                result.textContent = 'ckWebAuthToken: ' + body.ckWebAuthToken;
              }
            });
            </script></body></html>
            """
    }

    /// A JavaScript string literal (or `null`) that is safe inside `<script>`.
    private static func scriptLiteral(_ value: String?) -> String {
        var writer = JSONWriter()
        if let value { writer.string(value) } else { writer.null() }
        // Inside <script>, "<" must not start a tag.
        return String(decoding: writer.bytes, as: UTF8.self).replacingOccurrences(of: "<", with: "\\u003c")
    }
}
