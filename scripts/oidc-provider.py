#!/usr/bin/env python3
# A real OpenID Connect provider on loopback for Stratus's sign-in tests: oidc-provider-mock (PyPI, built
# on authlib), which issues RS256 ID tokens through its own discovery, authorization, token and JWKS
# endpoints. This launcher runs it with client registration and a nonce required, as a production
# provider would, and adds what the package leaves out: PKCE (RFC 7636), required on every authorization
# request with the S256 method and checked at the token endpoint.
#
# Needs Python 3.11+ and, from PyPI:
#     python3 -m pip install -q oidc-provider-mock
#
# Usage: python3 scripts/oidc-provider.py
#   Listens on 127.0.0.1 (a free port) and prints one JSON line on standard output:
#       {"port": PORT, "issuer": "http://127.0.0.1:PORT"}
#   then serves until killed. Logs go to standard error. The issuer is fixed to that string whatever
#   Host header a request carries, so it is exactly the discovery document's `issuer` and every ID
#   token's `iss`.
#
# Endpoints (oidc-provider-mock's):
#   GET  /.well-known/openid-configuration
#   GET  /jwks                          one RSA key (with its `kid`), made at start
#   POST /oauth2/clients                {"redirect_uris": [...], "token_endpoint_auth_method":
#                                        "client_secret_basic" | "client_secret_post" | "none"}
#                                       -> 201 {"client_id", "client_secret", ...}
#   GET  /oauth2/authorize?...          the consent form (HTML)
#   POST /oauth2/authorize?response_type=code&client_id&redirect_uri&scope&nonce&state
#        &code_challenge&code_challenge_method=S256, form body sub=SUBJECT
#                                       -> 302 to redirect_uri?code=...&state=...
#   POST /oauth2/token                  grant_type=authorization_code, code, redirect_uri, code_verifier
#   GET  /userinfo                      with the access token
#   PUT  /users/SUBJECT                 the user's claims as a JSON object (e.g. email, email_verified)
#                                       -> 204; a subject never set gets {"email": SUBJECT}

import json
import logging
import os
import sys
import threading
import warnings

from authlib.deprecate import AuthlibDeprecationWarning

# authlib warns about its own deprecations (authlib.jose, which the package imports), which say nothing
# about the tests.
warnings.filterwarnings("ignore", category=AuthlibDeprecationWarning)

import werkzeug.debug  # noqa: E402
import werkzeug.serving  # noqa: E402
from authlib.oauth2.rfc6749 import InvalidRequestError  # noqa: E402
from authlib.oauth2.rfc7636 import CodeChallenge  # noqa: E402

import oidc_provider_mock  # noqa: E402
from oidc_provider_mock import _app  # noqa: E402

# PKCE. The package's authorization code grant stores no code_challenge, so authlib's CodeChallenge
# extension has nothing to check a code_verifier against. The grant below (a subclass of the package's,
# put in its place before the app is made, so the app registers it) remembers each code's challenge and
# method, and applies the extension to itself; the extension reads them back through the two getters
# authlib documents for that.
_challenges = {}  # code -> (code_challenge, code_challenge_method)
_challenges_lock = threading.Lock()


class S256CodeChallenge(CodeChallenge):
    """authlib's PKCE extension, stricter in the way a current provider is (OAuth 2.1, RFC 9700): every
    authorization request carries a code_challenge, with the S256 method (not `plain`, nor the method
    left out, which means `plain`). With `required=True` and a challenge on every code, a token request
    without the matching code_verifier is refused, whatever the client's authentication."""

    SUPPORTED_CODE_CHALLENGE_METHOD = ["S256"]

    def __init__(self):
        super().__init__(required=True)

    def validate_code_challenge(self, grant, redirect_uri):
        data = grant.request.payload.data
        if not data.get("code_challenge"):
            raise InvalidRequestError("Missing 'code_challenge': this provider requires PKCE")
        if data.get("code_challenge_method") != "S256":
            raise InvalidRequestError("'code_challenge_method' must be S256")
        super().validate_code_challenge(grant, redirect_uri)

    def get_authorization_code_challenge(self, authorization_code):
        with _challenges_lock:
            return _challenges.get(authorization_code.code, (None, None))[0]

    def get_authorization_code_challenge_method(self, authorization_code):
        with _challenges_lock:
            return _challenges.get(authorization_code.code, (None, None))[1]


class PKCEAuthorizationCodeGrant(_app.AuthorizationCodeGrant):
    # authlib's default leaves out "none", so a public client (registered with
    # "token_endpoint_auth_method": "none") could never redeem its code; it authenticates with its
    # client_id and the code_verifier, as RFC 7636 intends. Each client still uses only the method it
    # registered with.
    TOKEN_ENDPOINT_AUTH_METHODS = ["client_secret_basic", "client_secret_post", "none"]

    def __init__(self, request, server):
        super().__init__(request, server)
        S256CodeChallenge()(self)

    def save_authorization_code(self, code, request):
        super().save_authorization_code(code, request)
        data = request.payload.data
        with _challenges_lock:
            _challenges[code] = (data.get("code_challenge"), data.get("code_challenge_method"))

    def delete_authorization_code(self, authorization_code):
        super().delete_authorization_code(authorization_code)
        with _challenges_lock:
            _challenges.pop(authorization_code.code, None)


# The key ID. The package signs ID tokens with the one key /jwks publishes (its `kid` the key's RFC 7638
# thumbprint) but leaves `kid` out of the token's header, as no production provider does: a relying
# party picks the key, and refreshes its copy of the JWKS, by that header.
class KeyIdentifyingOpenIDCode(_app.OpenIDCode):
    def get_encode_header(self, client):
        header = super().get_encode_header(client)
        header["kid"] = _app.storage.jwk.as_dict()["kid"]
        return header


# The package's blueprint looks both classes up in its module when the app is made (and checks the
# grant's type by the same name), so these take their place.
_app.AuthorizationCodeGrant = PKCEAuthorizationCodeGrant
_app.OpenIDCode = KeyIdentifyingOpenIDCode


def main():
    # authlib refuses plain HTTP unless told otherwise; everything here is on loopback.
    os.environ["AUTHLIB_INSECURE_TRANSPORT"] = "1"
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="oidc-provider: %(name)s %(message)s")
    app = oidc_provider_mock.app(require_client_registration=True, require_nonce=True)
    # The package runs Flask in debug mode behind Werkzeug's interactive debugger; a test provider
    # answers an unexpected error with a plain 500 instead.
    app.debug = False
    if isinstance(app.wsgi_app, werkzeug.debug.DebuggedApplication):
        app.wsgi_app = app.wsgi_app.app
    provider = app.wsgi_app

    server = werkzeug.serving.make_server("127.0.0.1", 0, app, threaded=True)
    host = f"127.0.0.1:{server.server_port}"

    # The issuer is the request's host URL in the package; pin the host so that it never varies.
    def pinned_host(environ, start_response):
        environ["HTTP_HOST"] = host
        environ.pop("HTTP_X_FORWARDED_HOST", None)
        return provider(environ, start_response)

    app.wsgi_app = pinned_host

    print(json.dumps({"port": server.server_port, "issuer": f"http://{host}"}), flush=True)
    # Nothing more goes to standard output: the reader stops after the first line, and a full pipe
    # would block the server.
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    server.serve_forever()


if __name__ == "__main__":
    main()
