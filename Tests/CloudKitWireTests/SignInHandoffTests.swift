import Foundation
import NIOHTTP1
import StratusServer
import StratusTestSupport
import Testing

/// Sign-in for web apps the way Apple's web library does it: a `421` whose `redirectURL` opens in a
/// popup, which posts `{ckSession}` back to the page that opened it; and for apps, a redirect to
/// their `cloudkit-{container}://` scheme.
@Suite("CloudKit wire: the sign-in hand-off")
struct SignInHandoffTests {
    static func redirectURL(_ server: TestServer, origin: String?) async throws -> String {
        let reply = try await server.database(
            "public", "users/current", user: "null", headers: origin.map { ["Origin": $0] } ?? [:])
        #expect(reply.status == 421, "\(reply.text)")
        return try #require(reply.body["redirectURL"] as? String)
    }

    @Test("the 421 names the calling page's origin when the callback rule admits it; the page posts only there; apps get their cloudkit- scheme")
    func handOffRules() async throws {
        try await withServer { server in
            let page = "http://127.0.0.1:5555"
            let admitted = try await Self.redirectURL(server, origin: page)
            #expect(admitted.hasSuffix("&origin=http%3A%2F%2F127.0.0.1%3A5555"), "\(admitted)")
            for refused in ["https://evil.example", "http://127.0.0.1:5555/path", "null"] {
                let url = try await Self.redirectURL(server, origin: refused)
                #expect(!url.contains("origin="), "\(refused): \(url)")
            }
            #expect(!(try await Self.redirectURL(server, origin: nil)).contains("origin="))

            // The page writes the admitted origin as postMessage's target, and refuses any other.
            let signIn = "/auth/1/\(server.container)/signin"
            let popup = try await server.request(.GET, signIn, query: ["ckAPIToken": server.apiToken, "origin": page])
            #expect(popup.status == 200 && popup.text.contains(#"const openerOrigin = "http://127.0.0.1:5555";"#))
            let evil = try await server.request(.GET, signIn, query: ["ckAPIToken": server.apiToken, "origin": "https://evil.example"])
            #expect(evil.status == 400 && evil.reason.contains("origin"), "\(evil.text)")

            // An app's own scheme: cloudkit- and the container in lowercase, and no other.
            let scheme = "cloudkit-" + server.container.lowercased()
            let app = try await server.request(
                .GET, signIn, query: ["ckAPIToken": server.apiToken, "callback": scheme + "://callback"])
            #expect(app.status == 200 && app.text.contains("const callbackOrigin = \"\(scheme):\";"), "\(app.text)")
            let other = try await server.request(
                .GET, signIn, query: ["ckAPIToken": server.apiToken, "callback": "cloudkit-other.app://callback"])
            #expect(other.status == 400, "\(other.text)")

            // Browsers may call the API from another origin.
            let cors = try await server.database("public", "users/current", user: "null", headers: ["Origin": page])
            #expect(cors.headers.first(name: "Access-Control-Allow-Origin") == "*")
        }
    }

    @Test("in a real browser, a page on another origin gets the 421, opens the sign-in popup, and receives {ckSession} by postMessage")
    func popupInABrowser() async throws {
        try await withServer { server in
            _ = try await server.signUp("ada")
            let script = server.directory.appendingPathComponent("popup.py")
            try Self.popupScript.write(to: script, atomically: true, encoding: .utf8)
            let run = try await runChildProcess(
                URL(fileURLWithPath: "/usr/bin/env"),
                ["python3", script.path, server.baseURL, server.container, server.apiToken, "password", "ada", "correct horse"])
            try #require(
                run.status == 0,
                "the browser run failed (scripts/test installs chromium, chromium-driver and selenium): \(run.errors)")
            let printed = run.output
            let lines = printed.split(separator: "\n").map(String.init)
            let token = try #require(lines.first { $0.hasPrefix("ckSession=") }.map { String($0.dropFirst(10)) })
            #expect(lines.contains { $0.hasPrefix("origin=" + server.baseURL) }, "the message came from the server's page: \(printed)")
            let current = try await server.database("public", "users/current", user: token)
            #expect(current.status == 200, "the token the page received signs in: \(current.text)")
        }
    }

    @Test("in a real browser, the popup's provider button signs in at an OpenID Connect provider (code flow with PKCE) and the page receives {ckSession}")
    func providerPopupInABrowser() async throws {
        let provider = try await OIDCProviderStandIn.start()
        defer { provider.stop() }
        try await withServer { server in
            let redirect = "\(server.baseURL)/auth/1/\(server.container)/signin/return/corp"
            _ = try await provider.configure(on: server, redirectURIs: [redirect])
            try await provider.setUser("emp-7", claims: ["email": "emp7@corp.example", "email_verified": true])
            let script = server.directory.appendingPathComponent("popup.py")
            try Self.popupScript.write(to: script, atomically: true, encoding: .utf8)
            let run = try await runChildProcess(
                URL(fileURLWithPath: "/usr/bin/env"),
                ["python3", script.path, server.baseURL, server.container, server.apiToken, "provider", "Corp", "emp-7"])
            try #require(run.status == 0, "the browser run failed: \(run.errors) \(provider.log.suffix(3000))")
            let lines = run.output.split(separator: "\n").map(String.init)
            let token = try #require(lines.first { $0.hasPrefix("ckSession=") }.map { String($0.dropFirst(10)) })
            #expect(lines.contains { $0.hasPrefix("origin=" + server.baseURL) }, "\(run.output)")
            let current = try await server.database("public", "users/current", user: token)
            #expect(current.status == 200, "the token the page received signs in: \(current.text)")

            // The return leg refuses a code that does not belong to this browser's sign-in.
            let stray = try await server.request(
                .GET, "/auth/1/\(server.container)/signin/return/corp", query: ["code": "x", "state": "y"])
            #expect(stray.status == 200 && stray.text.contains("start again") && !stray.text.contains("const session = \""))
        }
    }

    /// Serves a page on a loopback port of its own, which calls `users/current` with
    /// `ckWebAuthToken=null` as Apple's web library does, opens the `redirectURL` of the 421 in a
    /// popup, and waits for the message; Selenium signs in inside the popup and prints what the page
    /// received.
    static let popupScript = #"""
        import http.server, sys, threading
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support.ui import WebDriverWait

        # Signs in with a password (mode "password", then username and password) or at an identity
        # provider (mode "provider", then the provider's name and the subject to type on its page).
        base, container, api_token, mode, first, second = sys.argv[1:7]
        page = """<!doctype html><html><body><button id="signin">Sign in</button><pre id="out"></pre><script>
        let redirectURL = null;
        fetch('%s/database/1/%s/development/public/users/current?ckAPIToken=%s&ckWebAuthToken=null')
          .then(r => r.json()).then(body => { redirectURL = body.redirectURL; document.title = 'ready'; });
        window.addEventListener('message', event => {
          document.getElementById('out').textContent = 'ckSession=' + event.data.ckSession + '\\norigin=' + event.origin;
        });
        document.getElementById('signin').addEventListener('click', () => window.open(redirectURL, '', 'width=640,height=525'));
        </script></body></html>""" % (base, container, api_token)

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(200)
                self.send_header('Content-Type', 'text/html')
                self.end_headers()
                self.wfile.write(page.encode())
            def log_message(self, *args):
                pass

        httpd = http.server.HTTPServer(('127.0.0.1', 0), Handler)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        options = webdriver.ChromeOptions()
        options.binary_location = '/usr/bin/chromium'
        for argument in ['--headless=new', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage']:
            options.add_argument(argument)
        driver = webdriver.Chrome(service=Service('/usr/bin/chromedriver'), options=options)
        try:
            wait = WebDriverWait(driver, 30)
            driver.get('http://127.0.0.1:%d/' % httpd.server_address[1])
            wait.until(lambda d: d.title == 'ready')
            opener = driver.current_window_handle
            driver.find_element(By.ID, 'signin').click()
            wait.until(lambda d: len(d.window_handles) == 2)
            driver.switch_to.window([h for h in driver.window_handles if h != opener][0])
            if mode == 'password':
                wait.until(lambda d: d.find_elements(By.ID, 'username'))
                driver.find_element(By.ID, 'username').send_keys(first)
                driver.find_element(By.ID, 'password').send_keys(second)
                driver.find_element(By.CSS_SELECTOR, 'button[value=signin]').click()
            else:
                wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, 'a.provider'))
                driver.find_element(By.XPATH, "//a[@class='provider' and contains(., '%s')]" % first).click()
                wait.until(lambda d: d.find_elements(By.NAME, 'sub'))
                driver.find_element(By.NAME, 'sub').send_keys(second)
                driver.find_element(By.CSS_SELECTOR, 'button[type=submit]').click()
            driver.switch_to.window(opener)
            wait.until(lambda d: d.find_element(By.ID, 'out').text.startswith('ckSession='))
            print(driver.find_element(By.ID, 'out').text)
        finally:
            driver.quit()
            httpd.shutdown()
        """#
}
