#!/usr/bin/env python3
# A stand-in, on loopback, for Apple's push service (APNs), Firebase Cloud Messaging HTTP v1 (FCM) and a
# Web Push service (RFC 8030 + RFC 8291 + RFC 8292), for Stratus's integration tests. It checks every
# request the way the real service does (signatures, headers, payload, encryption), answers as the real
# service would, and records what it received so that a test can fail on it.
#
# Needs Python 3.11+ and these packages from PyPI:
#     python3 -m pip install -q h2 cryptography
#
# Usage: python3 scripts/push-standin.py --state-dir DIR
#   Writes DIR/ca.pem (the CA that signed the listeners' certificate, for 127.0.0.1 and localhost) and
#   prints one JSON line on standard output:
#       {"apns": PORT, "fcm": PORT, "webpush": PORT, "control": PORT, "ca": "DIR/ca.pem"}
#   then runs until SIGTERM or SIGINT. Logs go to standard error.
#
# Listeners (all on 127.0.0.1):
#   apns     TLS, ALPN h2 only, HTTP/2.
#   fcm      TLS, ALPN h2 and http/1.1 (both served); also the OAuth 2 token endpoint at /token.
#   webpush  TLS, ALPN h2 and http/1.1 (both served).
#   control  plain HTTP/1.1, JSON:
#     POST /configure {"apns": {"teamID","keyID","publicKeyPEM","topic"} | null,
#                      "fcm": {"projectID","clientEmail","publicKeyPEM", "accessTokenLifetime"?} | null}
#     POST /webpush/subscriptions  (body empty, or {"applicationServerKey": base64url} to restrict it)
#          -> {"id", "endpoint", "p256dh", "auth"}
#     POST /script {"service": "apns"|"fcm"|"webpush", "responses": [{"status", "reason"?, "token"?,
#                   "times"? (1), "retryAfter"?, "delay"? (seconds), "message"?, "errorStatus"? (fcm),
#                   "target"? (fcm: "send" (default) or "token" for the OAuth token endpoint),
#                   "timestamp"? (apns 410, ms)}]}
#     GET  /requests[?service=apns|fcm|webpush]  -> {"requests": [...]}
#     POST /reset                                 forgets requests and scripts
#     GET  /connections                           -> {"apns": N, "fcm": N, "webpush": N}
#     GET  /health                                -> {}

import argparse
import asyncio
import base64
import datetime
import hashlib
import hmac
import ipaddress
import json
import os
import re
import secrets
import signal
import ssl
import sys
import threading
import time
import traceback
import urllib.parse
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import h2.settings
from cryptography import x509
from cryptography.exceptions import InvalidSignature, InvalidTag
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def log(*parts):
    print("push-standin:", *parts, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------------
# Encoding helpers

B64URL_RE = re.compile(r"^[A-Za-z0-9_-]*$")


def b64url_encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(text: str) -> bytes:
    """Strict base64url without padding (RFC 7515 §2, RFC 8292 §3.2); raises ValueError."""
    if not B64URL_RE.match(text):
        raise ValueError("not base64url without padding")
    if len(text) % 4 == 1:
        raise ValueError("impossible base64url length")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def hmac_sha256(key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, hashlib.sha256).digest()


def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


UUID_RE = re.compile(r"^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$")


class JWT:
    def __init__(self, header, claims, signing_input, signature):
        self.header = header
        self.claims = claims
        self.signing_input = signing_input
        self.signature = signature


def parse_jwt(token: str, label: str, errors: list):
    """Parses a compact JWS; appends to errors and returns None when it is malformed."""
    parts = token.split(".")
    if len(parts) != 3:
        errors.append(f"{label}: not a compact JWS (three dot-separated base64url parts)")
        return None
    try:
        header = json.loads(b64url_decode(parts[0]))
        claims = json.loads(b64url_decode(parts[1]))
        signature = b64url_decode(parts[2])
    except (ValueError, UnicodeDecodeError) as error:
        errors.append(f"{label}: malformed JWT ({error})")
        return None
    if not isinstance(header, dict) or not isinstance(claims, dict):
        errors.append(f"{label}: JWT header and claims must be JSON objects")
        return None
    return JWT(header, claims, (parts[0] + "." + parts[1]).encode("ascii"), signature)


def verify_es256(public_key, jwt: JWT, label: str, errors: list) -> bool:
    if len(jwt.signature) != 64:
        errors.append(f"{label}: ES256 signature must be 64 bytes (JOSE r||s), got {len(jwt.signature)} bytes"
                      + (" (looks DER-encoded)" if jwt.signature[:1] == b"\x30" else ""))
        return False
    r = int.from_bytes(jwt.signature[:32], "big")
    s = int.from_bytes(jwt.signature[32:], "big")
    try:
        public_key.verify(encode_dss_signature(r, s), jwt.signing_input, ec.ECDSA(hashes.SHA256()))
        return True
    except InvalidSignature:
        errors.append(f"{label}: ES256 signature does not verify with the expected public key")
        return False


def verify_rs256(public_key, jwt: JWT, label: str, errors: list) -> bool:
    try:
        public_key.verify(jwt.signature, jwt.signing_input, padding.PKCS1v15(), hashes.SHA256())
        return True
    except InvalidSignature:
        errors.append(f"{label}: RS256 signature does not verify with the configured public key")
        return False


# --------------------------------------------------------------------------------------------------
# Shared state (touched by the asyncio thread and the control server's threads)

SERVICES = ("apns", "fcm", "webpush")


class State:
    def __init__(self):
        self.lock = threading.Lock()
        self.config = {"apns": None, "fcm": None}
        self.subscriptions = {}  # id -> dict(private_key, public_bytes, auth, app_server_key)
        self.requests = []
        self.scripts = {service: [] for service in SERVICES}
        self.connections = {service: 0 for service in SERVICES}
        self.next_connection = 0
        self.access_tokens = {}  # token -> (expiry, clientEmail)
        self.ports = {}

    def new_connection(self, service) -> int:
        with self.lock:
            self.next_connection += 1
            self.connections[service] += 1
            return self.next_connection

    def take_script(self, service, token, target=None):
        """The first queued response for this service that matches token (and target); consumes one use."""
        with self.lock:
            queue = self.scripts[service]
            for index, entry in enumerate(queue):
                if entry.get("token") is not None and entry["token"] != token:
                    continue
                if service == "fcm" and entry.get("target", "send") != (target or "send"):
                    continue
                entry["remaining"] -= 1
                if entry["remaining"] <= 0:
                    del queue[index]
                return dict(entry)
        return None

    def record(self, entry):
        with self.lock:
            self.requests.append(entry)


STATE = State()


# --------------------------------------------------------------------------------------------------
# Requests and responses as the protocol handlers see them

class Request:
    def __init__(self, service, protocol, method, path, authority, header_list, body, connection):
        self.service = service
        self.protocol = protocol
        self.method = method
        self.path = path
        self.authority = authority
        self.header_list = header_list  # [(lowercased name, value)] in order, pseudo-headers included
        self.body = body
        self.connection = connection
        self.received_at = time.time()
        self.headers = {}
        for name, value in header_list:
            self.headers[name] = value if name not in self.headers else self.headers[name] + ", " + value

    def header_count(self, name):
        return sum(1 for n, _ in self.header_list if n == name)


class Response:
    def __init__(self, status, headers=None, body=b"", delay=0.0):
        self.status = status
        self.headers = headers or []
        self.body = body
        self.delay = delay


def json_body(value) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode("utf-8")


def new_record(request: Request, errors, status, token=None, body=None, plaintext=None, extra=None):
    entry = {
        "service": request.service,
        "protocol": request.protocol,
        "method": request.method,
        "path": request.path,
        "token": token,
        "headers": dict(request.headers),
        "body": body,
        "bodyLength": len(request.body),
        "plaintext": plaintext,
        "errors": list(errors),
        "status": status,
        "connection": request.connection,
        "receivedAt": request.received_at,
    }
    if extra:
        entry.update(extra)
    return entry


def parse_json_body(raw: bytes):
    try:
        return json.loads(raw.decode("utf-8")), None
    except (UnicodeDecodeError, ValueError) as error:
        return None, str(error)


# --------------------------------------------------------------------------------------------------
# APNs ("Sending notification requests to APNs", "Establishing a token-based connection to APNs",
# "Handling notification responses from APNs")

APNS_PATH_RE = re.compile(r"^/3/device/([^/?]*)$")
HEX_RE = re.compile(r"^[0-9A-Fa-f]+$")


def handle_apns(request: Request) -> Response:
    errors = []          # every failed check, for the record
    failures = []        # (status, reason) in the order the answer is chosen from
    soft = []            # recorded but not answered with an error (the real service lets them through)
    token = None
    jwt_record = None

    def fail(status, reason, message):
        errors.append(f"{reason}: {message}")
        failures.append((status, reason))

    with STATE.lock:
        config = STATE.config["apns"]

    # Method and path.
    path_only = request.path.split("?", 1)[0]
    match = APNS_PATH_RE.match(path_only)
    if request.method != "POST":
        fail(405, "MethodNotAllowed", f"method {request.method} (APNs accepts only POST)")
    if match is None:
        fail(404, "BadPath", f"path {request.path!r} is not /3/device/<device token>")
    else:
        token = match.group(1)
    if "?" in request.path:
        soft.append(f"BadPath: unexpected query string in {request.path!r}")

    # Duplicate headers.
    for name in ("authorization", "apns-id", "apns-topic", "apns-push-type", "apns-priority",
                 "apns-expiration", "apns-collapse-id"):
        if request.header_count(name) > 1:
            fail(400, "DuplicateHeaders", f"header {name} appears more than once")

    # Provider authentication token.
    auth = request.headers.get("authorization")
    if auth is None:
        fail(403, "MissingProviderToken", "no authorization header (token-based authentication)")
    elif config is None:
        fail(403, "InvalidProviderToken", "the stand-in has no APNs configuration (POST /configure first)")
    else:
        scheme, _, credentials = auth.partition(" ")
        if scheme.lower() != "bearer" or not credentials.strip():
            fail(403, "InvalidProviderToken", f"authorization is not 'bearer <JWT>': {auth[:40]!r}")
        else:
            jwt_errors = []
            jwt = parse_jwt(credentials.strip(), "provider token", jwt_errors)
            if jwt is not None:
                jwt_record = {"header": jwt.header, "claims": jwt.claims}
                if jwt.header.get("alg") != "ES256":
                    jwt_errors.append(f"provider token: alg is {jwt.header.get('alg')!r}, not ES256")
                if jwt.header.get("kid") != config["keyID"]:
                    jwt_errors.append(f"provider token: kid {jwt.header.get('kid')!r} is not the key ID "
                                      f"{config['keyID']!r}")
                if jwt.claims.get("iss") != config["teamID"]:
                    jwt_errors.append(f"provider token: iss {jwt.claims.get('iss')!r} is not the team ID "
                                      f"{config['teamID']!r}")
                verify_es256(config["publicKey"], jwt, "provider token", jwt_errors)
                iat = jwt.claims.get("iat")
                expired = False
                now = time.time()
                if not is_number(iat):
                    jwt_errors.append(f"provider token: iat {iat!r} is not a number of seconds")
                elif iat > now + 60:
                    jwt_errors.append(f"provider token: iat is {iat - now:.0f} s in the future")
                elif now - iat > 3600:
                    expired = True
            for message in jwt_errors:
                fail(403, "InvalidProviderToken", message)
            if jwt is not None and expired:
                fail(403, "ExpiredProviderToken", f"provider token: iat is {now - iat:.0f} s old (more than 3600)")

    # apns-id.
    apns_id = request.headers.get("apns-id")
    if apns_id is not None and not UUID_RE.match(apns_id):
        fail(400, "BadMessageId", f"apns-id {apns_id!r} is not a UUID")
    response_id = apns_id if apns_id is not None and UUID_RE.match(apns_id) else str(uuid.uuid4())

    # Device token.
    if token is not None:
        if token == "":
            fail(400, "MissingDeviceToken", "no device token in the path")
        elif not HEX_RE.match(token) or len(token) < 64:
            fail(400, "BadDeviceToken", f"device token {token!r} is not hexadecimal of 64 characters or more")

    # Topic.
    topic = request.headers.get("apns-topic")
    if topic is None:
        fail(400, "MissingTopic", "no apns-topic header (required with token-based authentication)")
    elif topic.strip() == "" or re.search(r"\s", topic):
        fail(400, "BadTopic", f"apns-topic {topic!r} is malformed")
    elif config is not None and topic != config["topic"]:
        fail(400, "TopicDisallowed", f"apns-topic {topic!r} is not the app's topic {config['topic']!r}")

    # Push type and priority.
    push_type = request.headers.get("apns-push-type")
    priority = request.headers.get("apns-priority")
    if push_type is None:
        fail(400, "InvalidPushType", "no apns-push-type header (must be alert or background)")
    elif push_type not in ("alert", "background"):
        fail(400, "InvalidPushType", f"apns-push-type {push_type!r} is neither alert nor background")
    if priority is not None and priority not in ("10", "5", "1"):
        fail(400, "BadPriority", f"apns-priority {priority!r} is not 10, 5 or 1")
    elif push_type == "background" and priority != "5":
        fail(400, "BadPriority", f"apns-priority {priority!r} for a background notification (must be 5)")

    # Expiration and collapse ID.
    expiration = request.headers.get("apns-expiration")
    if expiration is not None and not re.match(r"^[0-9]+$", expiration):
        fail(400, "BadExpirationDate", f"apns-expiration {expiration!r} is not an integer")
    collapse = request.headers.get("apns-collapse-id")
    if collapse is not None and len(collapse.encode("utf-8")) > 64:
        fail(400, "BadCollapseId", f"apns-collapse-id is {len(collapse.encode('utf-8'))} bytes (64 at most)")

    # Payload.
    payload = None
    if len(request.body) > 4096:
        fail(413, "PayloadTooLarge", f"payload is {len(request.body)} bytes (4096 at most)")
    if len(request.body) == 0:
        fail(400, "PayloadEmpty", "the payload is empty")
    else:
        payload, parse_error = parse_json_body(request.body)
        if parse_error is not None:
            fail(400, "BadPayload", f"the payload is not JSON: {parse_error}")
        elif not isinstance(payload, dict):
            fail(400, "BadPayload", "the payload is not a JSON object")
        else:
            aps = payload.get("aps")
            if not isinstance(aps, dict):
                fail(400, "PayloadEmpty", "the payload has no aps dictionary")
                aps = {}
            if push_type == "background":
                if aps.get("content-available") != 1:
                    fail(400, "PayloadEmpty", "a background notification's aps must hold \"content-available\": 1")
                shown = [key for key in ("alert", "sound", "badge") if key in aps]
                if shown:
                    fail(400, "InvalidPushType",
                         f"a background notification's aps must not hold {', '.join(shown)}")
            elif push_type == "alert":
                if not any(key in aps for key in ("alert", "sound", "badge")):
                    fail(400, "PayloadEmpty", "an alert notification's aps holds no alert, sound or badge")
                if "alert" in aps and not isinstance(aps["alert"], (str, dict)):
                    fail(400, "BadPayload", "aps.alert must be a string or a dictionary")

    status = 200
    reason = None
    retry_after = None
    delay = 0.0
    timestamp = None
    if failures:
        status, reason = failures[0]
    else:
        script = STATE.take_script("apns", token)
        if script is not None:
            delay = float(script.get("delay") or 0)
            if script["status"] >= 300:
                status = script["status"]
                reason = script.get("reason") or "InternalServerError"
                retry_after = script.get("retryAfter")
                if status == 410:
                    timestamp = script.get("timestamp", int(time.time() * 1000))

    headers = [("apns-id", response_id)]
    if status == 200:
        body = b""
    else:
        content = {"reason": reason}
        if timestamp is not None:
            content["timestamp"] = timestamp
        body = json_body(content)
        headers.append(("content-type", "application/json; charset=utf-8"))
        if retry_after is not None:
            headers.append(("retry-after", str(retry_after)))
    STATE.record(new_record(request, errors + soft, status, token=token, body=payload,
                            extra={"reason": reason, "jwt": jwt_record}))
    return Response(status, headers, body, delay)


# --------------------------------------------------------------------------------------------------
# FCM HTTP v1 and Google's OAuth 2 token endpoint

FCM_SCOPE = "https://www.googleapis.com/auth/firebase.messaging"
FCM_SEND_RE = re.compile(r"^/v1/projects/([^/]+)/messages:send$")
GOOGLE_STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
                 409: "ALREADY_EXISTS", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 501: "UNIMPLEMENTED",
                 502: "UNAVAILABLE", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"}
FCM_ERROR_CODE = {400: "INVALID_ARGUMENT", 401: "THIRD_PARTY_AUTH_ERROR", 403: "SENDER_ID_MISMATCH",
                  404: "UNREGISTERED", 429: "QUOTA_EXCEEDED", 500: "INTERNAL", 503: "UNAVAILABLE"}
MESSAGE_KEYS = {"name", "data", "notification", "android", "webpush", "apns", "fcm_options", "fcmOptions",
                "token", "topic", "condition"}
ANDROID_KEYS = {"collapse_key", "collapseKey", "priority", "ttl", "restricted_package_name",
                "restrictedPackageName", "data", "notification", "fcm_options", "fcmOptions", "direct_boot_ok",
                "directBootOk", "bandwidth_constrained_ok", "bandwidthConstrainedOk", "restricted_satellite_ok",
                "restrictedSatelliteOk"}
RESERVED_DATA_KEYS = {"from", "notification", "message_type"}


def google_error(status, message, error_status=None, fcm_code=None, details=None):
    content = {"code": status, "message": message, "status": error_status or GOOGLE_STATUS.get(status, "UNKNOWN")}
    all_details = []
    if fcm_code is not None:
        all_details.append({"@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": fcm_code})
    if details:
        all_details.extend(details)
    if all_details:
        content["details"] = all_details
    return json_body({"error": content})


def handle_fcm(request: Request) -> Response:
    path_only = request.path.split("?", 1)[0]
    if path_only == "/token":
        return handle_fcm_token(request)
    return handle_fcm_send(request)


def handle_fcm_token(request: Request) -> Response:
    errors = []
    failure = None  # (status, oauth error, description)
    form = None
    jwt_record = None

    def fail(status, error, description):
        nonlocal failure
        errors.append(f"{error}: {description}")
        if failure is None:
            failure = (status, error, description)

    with STATE.lock:
        config = STATE.config["fcm"]
    if request.method != "POST":
        fail(405, "invalid_request", f"method {request.method} (the token endpoint takes POST)")
    content_type = request.headers.get("content-type", "")
    if content_type.split(";")[0].strip().lower() != "application/x-www-form-urlencoded":
        fail(400, "invalid_request", f"content-type {content_type!r} is not application/x-www-form-urlencoded")
    try:
        pairs = urllib.parse.parse_qsl(request.body.decode("ascii"), keep_blank_values=True, strict_parsing=True)
        form = {}
        for name, value in pairs:
            if name in form:
                fail(400, "invalid_request", f"form parameter {name} appears more than once")
            form[name] = value
    except (UnicodeDecodeError, ValueError) as error:
        fail(400, "invalid_request", f"the body is not a URL-encoded form: {error}")
        form = {}
    if form.get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer":
        fail(400, "unsupported_grant_type", f"grant_type {form.get('grant_type')!r} is not "
                                            "urn:ietf:params:oauth:grant-type:jwt-bearer")
    assertion = form.get("assertion")
    client_email = None
    if not assertion:
        fail(400, "invalid_request", "no assertion")
    elif config is None:
        fail(400, "invalid_grant", "the stand-in has no FCM configuration (POST /configure first)")
    else:
        jwt_errors = []
        jwt = parse_jwt(assertion, "assertion", jwt_errors)
        if jwt is not None:
            jwt_record = {"header": jwt.header, "claims": jwt.claims}
            header, claims = jwt.header, jwt.claims
            if header.get("alg") != "RS256":
                jwt_errors.append(f"assertion: alg {header.get('alg')!r} is not RS256")
            if "typ" in header and header["typ"] != "JWT":
                jwt_errors.append(f"assertion: typ {header['typ']!r} is not JWT")
            verify_rs256(config["publicKey"], jwt, "assertion", jwt_errors)
            if claims.get("iss") != config["clientEmail"]:
                jwt_errors.append(f"assertion: iss {claims.get('iss')!r} is not the service account "
                                  f"{config['clientEmail']!r}")
            client_email = claims.get("iss")
            if "sub" in claims and claims["sub"] != config["clientEmail"]:
                jwt_errors.append(f"assertion: sub {claims['sub']!r} is not the service account (no delegation)")
            expected_aud = f"https://{request.authority}/token"
            if claims.get("aud") != expected_aud:
                jwt_errors.append(f"assertion: aud {claims.get('aud')!r} is not the token URI {expected_aud!r}")
            scope = claims.get("scope")
            if not isinstance(scope, str) or FCM_SCOPE not in scope.split(" "):
                fail(400, "invalid_scope", f"assertion: scope {scope!r} does not include {FCM_SCOPE}")
            iat, exp = claims.get("iat"), claims.get("exp")
            now = time.time()
            if not is_number(iat) or not is_number(exp):
                jwt_errors.append(f"assertion: iat {iat!r} and exp {exp!r} must be numbers of seconds")
            else:
                if abs(iat - now) > 60:
                    jwt_errors.append(f"assertion: iat is {iat - now:+.0f} s from now (60 s at most)")
                if exp <= now:
                    jwt_errors.append("assertion: exp is in the past")
                if exp - iat > 3600:
                    jwt_errors.append(f"assertion: exp - iat is {exp - iat:.0f} s (3600 at most)")
                if exp <= iat:
                    jwt_errors.append("assertion: exp is not after iat")
        for message in jwt_errors:
            fail(400, "invalid_grant", message)

    delay = 0.0
    retry_after = None
    if failure is None:
        script = STATE.take_script("fcm", None, target="token")
        if script is not None:
            delay = float(script.get("delay") or 0)
            retry_after = script.get("retryAfter")
            if script["status"] >= 300:
                failure = (script["status"], script.get("reason") or "invalid_grant",
                           script.get("message") or "scripted failure")

    headers = [("content-type", "application/json; charset=utf-8"), ("cache-control", "no-cache, no-store")]
    if retry_after is not None:
        headers.append(("retry-after", str(retry_after)))
    if failure is None:
        lifetime = int(config.get("accessTokenLifetime", 3600))
        access_token = "ya29.standin." + secrets.token_urlsafe(48)
        with STATE.lock:
            STATE.access_tokens[access_token] = (time.time() + lifetime, client_email)
        status = 200
        body = json_body({"access_token": access_token, "expires_in": max(lifetime - 1, 0), "token_type": "Bearer"})
    else:
        status = failure[0]
        body = json_body({"error": failure[1], "error_description": failure[2]})
    record_form = dict(form) if form is not None else None
    STATE.record(new_record(request, errors, status, body=record_form, extra={"jwt": jwt_record}))
    return Response(status, headers, body, delay)


def check_string_map(value, field, violations):
    if not isinstance(value, dict):
        violations.append((field, f"{field} must be a map of strings to strings"))
        return
    for key, item in value.items():
        if not isinstance(item, str):
            violations.append((f"{field}.{key}", f"{field}[{key!r}] is a {type(item).__name__}, not a string"))


def handle_fcm_send(request: Request) -> Response:
    errors = []
    soft = []
    failure = None  # (status, message, fcm error code, extra details)
    token = None
    message_body = None

    def fail(status, message, fcm_code=None, details=None):
        nonlocal failure
        errors.append(f"{status} {GOOGLE_STATUS.get(status, '')}: {message}")
        if failure is None:
            failure = (status, message, fcm_code, details)

    with STATE.lock:
        config = STATE.config["fcm"]
    path_only = urllib.parse.unquote(request.path.split("?", 1)[0])
    match = FCM_SEND_RE.match(path_only)
    if match is None:
        fail(404, f"The requested URL {request.path} was not found on this server.")
    elif request.method != "POST":
        fail(405, f"method {request.method} (messages:send takes POST)")

    # OAuth 2 access token.
    auth = request.headers.get("authorization")
    if auth is None:
        fail(401, "Request is missing required authentication credential. Expected OAuth 2 access token, login "
                  "cookie or other valid authentication credential.")
    else:
        scheme, _, credentials = auth.partition(" ")
        with STATE.lock:
            issued = STATE.access_tokens.get(credentials.strip())
        if scheme.lower() != "bearer" or issued is None:
            fail(401, "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie "
                      "or other valid authentication credential. (not a token this stand-in issued)")
        elif issued[0] <= time.time():
            fail(401, "Request had invalid authentication credentials. (the access token has expired)")

    if match is not None and config is not None and match.group(1) != config["projectID"]:
        fail(403, f"Permission 'cloudmessaging.messages.create' denied on resource "
                  f"'//cloudresourcemanager.googleapis.com/projects/{match.group(1)}' (or it may not exist).")
    elif match is not None and config is None:
        fail(403, "the stand-in has no FCM configuration (POST /configure first)")

    content_type = request.headers.get("content-type", "")
    if content_type.split(";")[0].strip().lower() != "application/json":
        fail(400, f"content-type {content_type!r} is not application/json", "INVALID_ARGUMENT")

    body, parse_error = parse_json_body(request.body)
    if parse_error is not None:
        fail(400, f"Invalid JSON payload received. {parse_error}", "INVALID_ARGUMENT")
    elif not isinstance(body, dict):
        fail(400, "Invalid JSON payload received. The body is not an object.", "INVALID_ARGUMENT")
    else:
        message_body = body
        violations = []
        for key in body:
            if key not in ("message", "validate_only", "validateOnly"):
                violations.append((key, f"Invalid JSON payload received. Unknown name \"{key}\": Cannot find field."))
        message = body.get("message")
        if not isinstance(message, dict):
            violations.append(("message", "message is missing or not an object"))
            message = {}
        for key in message:
            if key not in MESSAGE_KEYS:
                violations.append((f"message.{key}",
                                   f"Invalid JSON payload received. Unknown name \"{key}\" at 'message': "
                                   "Cannot find field."))
        targets = [key for key in ("token", "topic", "condition") if key in message]
        if len(targets) != 1:
            violations.append(("message", f"exactly one of token, topic or condition must be set; got {targets}"))
        if "token" in message:
            token = message["token"]
            if not isinstance(token, str) or token == "" or re.search(r"\s", token):
                violations.append(("message.token", f"The registration token is not a valid FCM registration "
                                                    f"token: {token!r}"))
        elif targets:
            soft.append(f"message targets {targets[0]}, not a device token")
        if "data" in message:
            check_string_map(message["data"], "message.data", violations)
            if isinstance(message["data"], dict):
                for key in message["data"]:
                    if key in RESERVED_DATA_KEYS or key.startswith("google") or key.startswith("gcm"):
                        violations.append((f"message.data.{key}", f"data key {key!r} is a reserved word"))
        else:
            soft.append("message has no data")
        android = message.get("android")
        if android is None:
            soft.append("message has no android config (android.priority should be HIGH to wake the app)")
        elif not isinstance(android, dict):
            violations.append(("message.android", "android must be an object"))
        else:
            for key in android:
                if key not in ANDROID_KEYS:
                    violations.append((f"message.android.{key}", f"Invalid JSON payload received. Unknown name "
                                                                 f"\"{key}\" at 'message.android': Cannot find field."))
            priority = android.get("priority")
            if priority is not None and (not isinstance(priority, str)
                                         or priority.upper() not in ("NORMAL", "HIGH")):
                violations.append(("message.android.priority", f"Invalid value at 'message.android.priority': "
                                                               f"{priority!r}"))
            elif priority is None or priority.upper() != "HIGH":
                soft.append(f"android.priority is {priority!r}, not HIGH (a data message would not wake the app)")
            ttl = android.get("ttl")
            if ttl is not None and (not isinstance(ttl, str) or not re.match(r"^[0-9]+(\.[0-9]{1,9})?s$", ttl)):
                violations.append(("message.android.ttl", f"Invalid value at 'message.android.ttl': {ttl!r}"))
            if "data" in android:
                check_string_map(android["data"], "message.android.data", violations)
        apns = message.get("apns")
        if apns is not None:
            if not isinstance(apns, dict):
                violations.append(("message.apns", "apns must be an object"))
            else:
                if "headers" in apns:
                    check_string_map(apns["headers"], "message.apns.headers", violations)
                if "payload" in apns and not isinstance(apns["payload"], dict):
                    violations.append(("message.apns.payload", "apns.payload must be an object"))
        webpush = message.get("webpush")
        if webpush is not None:
            if not isinstance(webpush, dict):
                violations.append(("message.webpush", "webpush must be an object"))
            else:
                for field in ("headers", "data"):
                    if field in webpush:
                        check_string_map(webpush[field], f"message.webpush.{field}", violations)
        notification = message.get("notification")
        if notification is not None:
            if not isinstance(notification, dict):
                violations.append(("message.notification", "notification must be an object"))
            else:
                for key, value in notification.items():
                    if key not in ("title", "body", "image"):
                        violations.append((f"message.notification.{key}", f"Unknown name \"{key}\" at "
                                                                          "'message.notification'"))
                    elif not isinstance(value, str):
                        violations.append((f"message.notification.{key}", f"notification.{key} must be a string"))
        if len(request.body) > 4096 + 1024:
            soft.append(f"the request body is {len(request.body)} bytes (FCM's payload limit is 4096 bytes)")
        if violations:
            fail(400, "; ".join(description for _, description in violations), "INVALID_ARGUMENT",
                 [{"@type": "type.googleapis.com/google.rpc.BadRequest",
                   "fieldViolations": [{"field": field, "description": description}
                                       for field, description in violations]}])
            for _, description in violations[1:]:
                errors.append(f"400 INVALID_ARGUMENT: {description}")

    delay = 0.0
    retry_after = None
    failure_status_name = None
    if failure is None:
        script = STATE.take_script("fcm", token, target="send")
        if script is not None:
            delay = float(script.get("delay") or 0)
            retry_after = script.get("retryAfter")
            if script["status"] >= 300:
                status = script["status"]
                failure = (status, script.get("message") or f"scripted {status}",
                           script.get("reason") or FCM_ERROR_CODE.get(status, "UNSPECIFIED_ERROR"), None)
                failure_status_name = script.get("errorStatus")

    headers = [("content-type", "application/json; charset=UTF-8")]
    if retry_after is not None:
        headers.append(("retry-after", str(retry_after)))
    if failure is None:
        status = 200
        project = match.group(1) if match else "?"
        response = json_body({"name": f"projects/{project}/messages/0:{int(time.time() * 1000)}%"
                                      f"{secrets.token_hex(8)}"})
    else:
        status = failure[0]
        response = google_error(status, failure[1], failure_status_name, failure[2], failure[3])
    STATE.record(new_record(request, errors + soft, status, token=token, body=message_body))
    return Response(status, headers, response, delay)


# --------------------------------------------------------------------------------------------------
# Web Push (RFC 8030, RFC 8291, RFC 8292)

WEBPUSH_PATH_RE = re.compile(r"^/push/([A-Za-z0-9_-]+)$")


def decrypt_aes128gcm(body: bytes, subscription, errors: list):
    """RFC 8188 aes128gcm with RFC 8291's key derivation. Returns the plaintext or None (errors appended)."""
    if len(body) < 21:
        errors.append(f"aes128gcm: the body ({len(body)} bytes) is shorter than the 21-byte header")
        return None
    salt = body[:16]
    rs = int.from_bytes(body[16:20], "big")
    idlen = body[20]
    if len(body) < 21 + idlen:
        errors.append("aes128gcm: the body is shorter than its header's key ID")
        return None
    keyid = body[21:21 + idlen]
    data = body[21 + idlen:]
    if rs < 18:
        errors.append(f"aes128gcm: record size {rs} is below 18")
        return None
    if idlen != 65:
        errors.append(f"aes128gcm: keyid is {idlen} bytes; RFC 8291 §4 requires the application server's "
                      "65-byte uncompressed P-256 public key")
        return None
    try:
        sender_public = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), keyid)
    except ValueError:
        errors.append("aes128gcm: keyid is not a P-256 public key")
        return None
    shared = subscription["private_key"].exchange(ec.ECDH(), sender_public)
    prk_key = hmac_sha256(subscription["auth"], shared)
    ikm = hmac_sha256(prk_key, b"WebPush: info\x00" + subscription["public_bytes"] + keyid + b"\x01")
    prk = hmac_sha256(salt, ikm)
    cek = hmac_sha256(prk, b"Content-Encoding: aes128gcm\x00\x01")[:16]
    nonce_base = hmac_sha256(prk, b"Content-Encoding: nonce\x00\x01")[:12]
    if not data:
        errors.append("aes128gcm: no records after the header")
        return None
    records = [data[i:i + rs] for i in range(0, len(data), rs)]
    if len(records) > 1:
        errors.append(f"aes128gcm: {len(records)} records; RFC 8291 §4 requires a single record "
                      f"(rs {rs} must exceed the whole ciphertext)")
    aead = AESGCM(cek)
    plaintext = b""
    for sequence, record in enumerate(records):
        last = sequence == len(records) - 1
        if len(record) < 17:
            errors.append(f"aes128gcm: record {sequence} is {len(record)} bytes (17 at least)")
            return None
        nonce = bytes(a ^ b for a, b in zip(nonce_base, sequence.to_bytes(12, "big")))
        try:
            padded = aead.decrypt(nonce, record, None)
        except InvalidTag:
            errors.append(f"aes128gcm: record {sequence} does not decrypt (wrong keys, auth secret or salt)")
            return None
        end = len(padded) - 1
        while end >= 0 and padded[end] == 0:
            end -= 1
        if end < 0:
            errors.append(f"aes128gcm: record {sequence} has no padding delimiter")
            return None
        expected = 2 if last else 1
        if padded[end] != expected:
            errors.append(f"aes128gcm: record {sequence} ends with delimiter {padded[end]}, expected {expected}")
            return None
        plaintext += padded[:end]
    return plaintext


def handle_webpush(request: Request) -> Response:
    errors = []
    failure = None  # (status, text)
    sub_id = None
    plaintext_value = None
    jwt_record = None

    def fail(status, text):
        nonlocal failure
        errors.append(f"{status}: {text}")
        if failure is None:
            failure = (status, text)

    origin = f"https://127.0.0.1:{STATE.ports.get('webpush')}"
    path_only = request.path.split("?", 1)[0]
    match = WEBPUSH_PATH_RE.match(path_only)
    subscription = None
    if match is None:
        fail(404, f"no push resource at {request.path}")
    else:
        sub_id = match.group(1)
        with STATE.lock:
            subscription = STATE.subscriptions.get(sub_id)
        if subscription is None:
            fail(404, f"no subscription {sub_id}")
    if request.method != "POST":
        fail(405, f"method {request.method} (push messages are POSTed)")

    # VAPID (RFC 8292 §3).
    auth = request.headers.get("authorization")
    if auth is None:
        fail(401, "no authorization header (VAPID required)")
    else:
        scheme, _, params_text = auth.partition(" ")
        params = {}
        for part in params_text.split(","):
            name, eq, value = part.strip().partition("=")
            if eq:
                params[name.strip().lower()] = value.strip().strip('"')
        if scheme.lower() != "vapid":
            fail(401, f"authorization scheme {scheme!r} is not vapid (RFC 8292)")
        elif "t" not in params or "k" not in params:
            fail(401, "the vapid authorization lacks t= or k=")
        else:
            key = None
            try:
                key_bytes = b64url_decode(params["k"])
                key = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), key_bytes)
                if len(key_bytes) != 65:
                    raise ValueError("not uncompressed")
            except ValueError as error:
                fail(401, f"vapid k= is not a base64url uncompressed P-256 public key ({error})")
                key = None
            jwt_errors = []
            jwt = parse_jwt(params["t"], "vapid token", jwt_errors)
            if jwt is not None:
                jwt_record = {"header": jwt.header, "claims": jwt.claims, "k": params["k"]}
                if jwt.header.get("alg") != "ES256":
                    jwt_errors.append(f"vapid token: alg {jwt.header.get('alg')!r} is not ES256")
                if "typ" in jwt.header and jwt.header["typ"] != "JWT":
                    jwt_errors.append(f"vapid token: typ {jwt.header['typ']!r} is not JWT")
                if key is not None:
                    verify_es256(key, jwt, "vapid token", jwt_errors)
                if jwt.claims.get("aud") != origin:
                    jwt_errors.append(f"vapid token: aud {jwt.claims.get('aud')!r} is not the push service's "
                                      f"origin {origin!r}")
                exp = jwt.claims.get("exp")
                now = time.time()
                if not is_number(exp):
                    jwt_errors.append(f"vapid token: exp {exp!r} is not a number of seconds")
                elif exp <= now:
                    jwt_errors.append("vapid token: exp is in the past")
                elif exp > now + 86400:
                    jwt_errors.append(f"vapid token: exp is {exp - now:.0f} s ahead (24 hours at most)")
                sub = jwt.claims.get("sub")
                if not isinstance(sub, str) or not (sub.startswith("mailto:") or sub.startswith("https:")):
                    jwt_errors.append(f"vapid token: sub {sub!r} is not a mailto: or https: URL")
            for message in jwt_errors:
                fail(403, message)
            if subscription is not None and subscription.get("app_server_key") is not None \
                    and params["k"] != subscription["app_server_key"]:
                fail(403, "vapid k= is not the applicationServerKey the subscription was made with")

    # RFC 8030 headers.
    ttl = request.headers.get("ttl")
    if ttl is None:
        fail(400, "no TTL header")
    elif not re.match(r"^[0-9]+$", ttl):
        fail(400, f"TTL {ttl!r} is not a non-negative integer")
    urgency = request.headers.get("urgency")
    if urgency is not None and urgency not in ("very-low", "low", "normal", "high"):
        fail(400, f"Urgency {urgency!r} is not very-low, low, normal or high")
    topic = request.headers.get("topic")
    if topic is not None and (len(topic) > 32 or not B64URL_RE.match(topic)):
        fail(400, f"Topic {topic!r} is not 32 base64url characters at most")

    # Body.
    encoding = request.headers.get("content-encoding")
    if len(request.body) > 4096:
        fail(413, f"the body is {len(request.body)} bytes (4096 at most)")
    if encoding is None and len(request.body) > 0:
        fail(400, "a payload without content-encoding: aes128gcm")
    elif encoding is not None and encoding != "aes128gcm":
        fail(400, f"content-encoding {encoding!r} is not aes128gcm")
    elif encoding == "aes128gcm" and subscription is not None and len(request.body) <= 4096:
        decrypt_errors = []
        plaintext = decrypt_aes128gcm(request.body, subscription, decrypt_errors)
        for message in decrypt_errors:
            fail(400, message)
        if plaintext is not None:
            try:
                text = plaintext.decode("utf-8")
                try:
                    plaintext_value = json.loads(text)
                except ValueError:
                    plaintext_value = text
            except UnicodeDecodeError:
                plaintext_value = base64.b64encode(plaintext).decode("ascii")
                errors.append("the decrypted payload is not UTF-8 (recorded as base64)")

    delay = 0.0
    retry_after = None
    if failure is None:
        script = STATE.take_script("webpush", sub_id)
        if script is not None:
            delay = float(script.get("delay") or 0)
            retry_after = script.get("retryAfter")
            if script["status"] >= 300:
                failure = (script["status"], script.get("message") or script.get("reason") or
                           f"scripted {script['status']}")

    headers = []
    if failure is None:
        status = 201
        headers.append(("location", f"{origin}/message/{uuid.uuid4()}"))
        if ttl is not None:
            headers.append(("ttl", ttl))
        body = b""
    else:
        status = failure[0]
        headers.append(("content-type", "text/plain; charset=utf-8"))
        body = (failure[1] + "\n").encode("utf-8")
    if retry_after is not None:
        headers.append(("retry-after", str(retry_after)))
    STATE.record(new_record(request, errors, status, token=sub_id, body=None, plaintext=plaintext_value,
                            extra={"jwt": jwt_record}))
    return Response(status, headers, body, delay)


HANDLERS = {"apns": handle_apns, "fcm": handle_fcm, "webpush": handle_webpush}


def dispatch(request: Request) -> Response:
    try:
        return HANDLERS[request.service](request)
    except Exception:  # a bug here must not take the connection down silently
        trace = traceback.format_exc()
        log(f"{request.service}: internal error handling {request.method} {request.path}:\n{trace}")
        STATE.record(new_record(request, [f"push-standin internal error: {trace.strip().splitlines()[-1]}"], 500))
        return Response(500, [("content-type", "text/plain")], b"push-standin internal error\n")


# --------------------------------------------------------------------------------------------------
# HTTP/2 over TLS

MAX_BODY = 1 << 20


class H2Session:
    def __init__(self, service, reader, writer, connection_id):
        self.service = service
        self.reader = reader
        self.writer = writer
        self.connection_id = connection_id
        config = h2.config.H2Configuration(client_side=False, header_encoding=None)
        self.conn = h2.connection.H2Connection(config=config)
        self.conn.local_settings = h2.settings.Settings(client=False, initial_values={
            h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: 1000,
            h2.settings.SettingCodes.MAX_HEADER_LIST_SIZE: 65536,
            h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 1 << 20,
        })
        self.streams = {}   # stream id -> [header list, bytearray body, too_large flag]
        self.pending = {}   # stream id -> bytearray still to send
        self.closed = False

    def flush(self):
        data = self.conn.data_to_send()
        if data and not self.closed:
            self.writer.write(data)

    async def run(self):
        self.conn.initiate_connection()
        self.conn.increment_flow_control_window(1 << 24)
        self.flush()
        try:
            while not self.closed:
                data = await self.reader.read(65536)
                if not data:
                    break
                try:
                    events = self.conn.receive_data(data)
                except h2.exceptions.ProtocolError as error:
                    log(f"{self.service} connection {self.connection_id}: HTTP/2 protocol error: {error}")
                    self.flush()
                    break
                for event in events:
                    self.handle_event(event)
                self.flush()
                await self.writer.drain()
        finally:
            self.closed = True

    def handle_event(self, event):
        if isinstance(event, h2.events.RequestReceived):
            headers = [(name.decode("latin-1").lower(), value.decode("utf-8", "replace"))
                       for name, value in event.headers]
            self.streams[event.stream_id] = [headers, bytearray(), False]
        elif isinstance(event, h2.events.DataReceived):
            stream = self.streams.get(event.stream_id)
            if stream is not None:
                if len(stream[1]) + len(event.data) > MAX_BODY:
                    stream[2] = True
                else:
                    stream[1].extend(event.data)
            try:
                self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            except h2.exceptions.StreamClosedError:
                pass
        elif isinstance(event, h2.events.StreamEnded):
            self.complete(event.stream_id)
        elif isinstance(event, h2.events.StreamReset):
            self.streams.pop(event.stream_id, None)
            self.pending.pop(event.stream_id, None)
        elif isinstance(event, h2.events.WindowUpdated):
            self.send_pending()
        elif isinstance(event, h2.events.ConnectionTerminated):
            self.closed = True

    def complete(self, stream_id):
        stream = self.streams.pop(stream_id, None)
        if stream is None:
            return
        headers, body, too_large = stream
        pseudo = dict((name, value) for name, value in headers if name.startswith(":"))
        request = Request(self.service, "h2", pseudo.get(":method", ""), pseudo.get(":path", ""),
                          pseudo.get(":authority", ""), headers, bytes(body), self.connection_id)
        if too_large:
            request.body = bytes(body) + b"\0" * 1  # longer than any limit; the handler answers 413
        response = dispatch(request)
        if response.delay > 0:
            asyncio.get_running_loop().create_task(self.respond_later(stream_id, response))
        else:
            self.respond(stream_id, response)

    async def respond_later(self, stream_id, response):
        await asyncio.sleep(response.delay)
        if not self.closed:
            self.respond(stream_id, response)
            self.flush()

    def respond(self, stream_id, response):
        headers = [(":status", str(response.status))] + [(name.lower(), value) for name, value in response.headers]
        headers.append(("content-length", str(len(response.body))))
        try:
            self.conn.send_headers(stream_id, headers, end_stream=not response.body)
        except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError):
            return
        if response.body:
            self.pending[stream_id] = bytearray(response.body)
            self.send_pending()

    def send_pending(self):
        for stream_id in list(self.pending):
            data = self.pending[stream_id]
            try:
                while data:
                    window = self.conn.local_flow_control_window(stream_id)
                    size = min(window, len(data), self.conn.max_outbound_frame_size)
                    if size <= 0:
                        break
                    self.conn.send_data(stream_id, bytes(data[:size]), end_stream=(size == len(data)))
                    del data[:size]
            except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError):
                data = None
            if not data:
                self.pending.pop(stream_id, None)


# --------------------------------------------------------------------------------------------------
# HTTP/1.1 over TLS (fcm and webpush, when ALPN picks http/1.1 or no protocol)

REASONS = {200: "OK", 201: "Created", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden",
           404: "Not Found", 405: "Method Not Allowed", 410: "Gone", 413: "Payload Too Large",
           429: "Too Many Requests", 500: "Internal Server Error", 502: "Bad Gateway",
           503: "Service Unavailable", 504: "Gateway Timeout"}


async def serve_http1(service, reader, writer, connection_id):
    while True:
        line = await reader.readline()
        if not line:
            return
        if line in (b"\r\n", b"\n"):
            continue
        try:
            method, target, version = line.decode("latin-1").rstrip("\r\n").split(" ")
        except ValueError:
            writer.write(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
            return
        header_list = []
        total = 0
        while True:
            header_line = await reader.readline()
            total += len(header_line)
            if not header_line or total > 65536:
                return
            if header_line in (b"\r\n", b"\n"):
                break
            name, _, value = header_line.decode("latin-1").partition(":")
            header_list.append((name.strip().lower(), value.strip()))
        headers = dict(header_list)
        body = b""
        if "chunked" in headers.get("transfer-encoding", "").lower():
            chunks = []
            while True:
                size_line = await reader.readline()
                size = int(size_line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                        pass
                    break
                chunks.append(await reader.readexactly(size))
                await reader.readline()
            body = b"".join(chunks)
        elif "content-length" in headers:
            length = int(headers["content-length"])
            if length > MAX_BODY:
                writer.write(b"HTTP/1.1 413 Payload Too Large\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                return
            if headers.get("expect", "").lower() == "100-continue":
                writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            body = await reader.readexactly(length)
        request = Request(service, "http/1.1", method, target, headers.get("host", ""), header_list, body,
                          connection_id)
        response = dispatch(request)
        if response.delay > 0:
            await asyncio.sleep(response.delay)
        close = headers.get("connection", "").lower() == "close" or version == "HTTP/1.0"
        lines = [f"HTTP/1.1 {response.status} {REASONS.get(response.status, 'Status')}"]
        lines += [f"{name}: {value}" for name, value in response.headers]
        lines.append(f"content-length: {len(response.body)}")
        if close:
            lines.append("connection: close")
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + response.body)
        await writer.drain()
        if close:
            return


# --------------------------------------------------------------------------------------------------
# Listeners

def connection_handler(service):
    async def handle(reader, writer):
        connection_id = STATE.new_connection(service)
        OPEN_TRANSPORTS.add(writer.transport)
        ssl_object = writer.get_extra_info("ssl_object")
        alpn = ssl_object.selected_alpn_protocol() if ssl_object is not None else None
        try:
            if alpn == "h2":
                await H2Session(service, reader, writer, connection_id).run()
            elif service == "apns":
                log(f"apns connection {connection_id}: ALPN chose {alpn!r}, not h2; closing (APNs is HTTP/2 only)")
                STATE.record({"service": service, "protocol": alpn, "method": None, "path": None, "token": None,
                              "headers": {}, "body": None, "bodyLength": 0, "plaintext": None,
                              "errors": [f"the TLS connection negotiated ALPN {alpn!r}, not h2 (APNs is HTTP/2 only)"],
                              "status": None, "connection": connection_id, "receivedAt": time.time()})
            else:
                await serve_http1(service, reader, writer, connection_id)
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError, ValueError) as error:
            log(f"{service} connection {connection_id}: {type(error).__name__}: {error}")
        except Exception:
            log(f"{service} connection {connection_id}: unexpected error:\n{traceback.format_exc()}")
        finally:
            OPEN_TRANSPORTS.discard(writer.transport)
            try:
                writer.close()
                await asyncio.wait_for(writer.wait_closed(), 2)
            except (Exception, asyncio.CancelledError):
                pass
    return handle


OPEN_TRANSPORTS = set()


def make_certificates(state_dir):
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Stratus push stand-in test CA")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name).issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                     data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                     crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    server_key = ec.generate_private_key(ec.SECP256R1())
    server_cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name)
        .public_key(server_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                                                    x509.DNSName("localhost")]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                     data_encipherment=False, key_agreement=False, key_cert_sign=False,
                                     crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(server_key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    ca_path = os.path.join(state_dir, "ca.pem")
    cert_path = os.path.join(state_dir, "server.pem")
    key_path = os.path.join(state_dir, "server-key.pem")
    with open(ca_path, "wb") as f:
        f.write(ca_cert.public_bytes(serialization.Encoding.PEM))
    with open(cert_path, "wb") as f:
        f.write(server_cert.public_bytes(serialization.Encoding.PEM))
        f.write(ca_cert.public_bytes(serialization.Encoding.PEM))
    fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(server_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                         serialization.NoEncryption()))
    return ca_path, cert_path, key_path


def tls_context(cert_path, key_path, protocols):
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.options |= ssl.OP_NO_COMPRESSION
    context.load_cert_chain(cert_path, key_path)
    context.set_alpn_protocols(protocols)
    return context


# --------------------------------------------------------------------------------------------------
# Control API

def load_public_key(pem, kind):
    if not isinstance(pem, str):
        raise ValueError("publicKeyPEM must be a PEM string")
    key = serialization.load_pem_public_key(pem.encode("ascii"))
    if kind == "ec" and not (isinstance(key, ec.EllipticCurvePublicKey) and key.curve.name == "secp256r1"):
        raise ValueError("the APNs key must be a P-256 public key")
    if kind == "rsa" and not isinstance(key, rsa.RSAPublicKey):
        raise ValueError("the FCM service account key must be an RSA public key")
    return key


def configure(body):
    updates = {}
    if "apns" in body:
        value = body["apns"]
        if value is None:
            updates["apns"] = None
        else:
            for field in ("teamID", "keyID", "publicKeyPEM", "topic"):
                if not isinstance(value.get(field), str):
                    raise ValueError(f"apns.{field} is required")
            updates["apns"] = dict(value, publicKey=load_public_key(value["publicKeyPEM"], "ec"))
    if "fcm" in body:
        value = body["fcm"]
        if value is None:
            updates["fcm"] = None
        else:
            for field in ("projectID", "clientEmail", "publicKeyPEM"):
                if not isinstance(value.get(field), str):
                    raise ValueError(f"fcm.{field} is required")
            updates["fcm"] = dict(value, publicKey=load_public_key(value["publicKeyPEM"], "rsa"))
    with STATE.lock:
        STATE.config.update(updates)


def new_subscription(body):
    private_key = ec.generate_private_key(ec.SECP256R1())
    public_bytes = private_key.public_key().public_bytes(serialization.Encoding.X962,
                                                         serialization.PublicFormat.UncompressedPoint)
    auth = os.urandom(16)
    sub_id = secrets.token_urlsafe(18)
    app_server_key = body.get("applicationServerKey") if isinstance(body, dict) else None
    with STATE.lock:
        STATE.subscriptions[sub_id] = {"private_key": private_key, "public_bytes": public_bytes, "auth": auth,
                                       "app_server_key": app_server_key}
    return {"id": sub_id, "endpoint": f"https://127.0.0.1:{STATE.ports['webpush']}/push/{sub_id}",
            "p256dh": b64url_encode(public_bytes), "auth": b64url_encode(auth)}


def add_script(body):
    service = body.get("service")
    if service not in SERVICES:
        raise ValueError("service must be apns, fcm or webpush")
    responses = body.get("responses")
    if not isinstance(responses, list):
        raise ValueError("responses must be a list")
    entries = []
    for response in responses:
        if not isinstance(response, dict) or not isinstance(response.get("status"), int):
            raise ValueError("each response needs an integer status")
        times = response.get("times", 1)
        if not isinstance(times, int) or times < 1:
            raise ValueError("times must be a positive integer")
        entries.append(dict(response, remaining=times))
    with STATE.lock:
        STATE.scripts[service].extend(entries)


class ControlHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "push-standin"

    def log_message(self, format, *args):
        pass

    def answer(self, status, value):
        data = json_body(value)
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def read_json(self):
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not raw.strip():
            return {}
        return json.loads(raw)

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query)
        if url.path == "/requests":
            service = query.get("service", [None])[0]
            with STATE.lock:
                requests = [entry for entry in STATE.requests if service is None or entry["service"] == service]
                text = json_body({"requests": requests})
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(text)))
            self.end_headers()
            self.wfile.write(text)
        elif url.path == "/connections":
            with STATE.lock:
                self.answer(200, dict(STATE.connections))
        elif url.path == "/health":
            self.answer(200, {})
        else:
            self.answer(404, {"error": f"no such control endpoint: GET {url.path}"})

    def do_POST(self):
        path = urllib.parse.urlsplit(self.path).path
        try:
            body = self.read_json()
            if path == "/configure":
                configure(body)
                self.answer(200, {})
            elif path == "/webpush/subscriptions":
                self.answer(200, new_subscription(body))
            elif path == "/script":
                add_script(body)
                self.answer(200, {})
            elif path == "/reset":
                with STATE.lock:
                    STATE.requests.clear()
                    for queue in STATE.scripts.values():
                        queue.clear()
                self.answer(200, {})
            else:
                self.answer(404, {"error": f"no such control endpoint: POST {path}"})
        except (ValueError, TypeError, AttributeError) as error:
            self.answer(400, {"error": str(error)})


# --------------------------------------------------------------------------------------------------

async def main(state_dir):
    os.makedirs(state_dir, exist_ok=True)
    ca_path, cert_path, key_path = make_certificates(state_dir)
    loop = asyncio.get_running_loop()

    def exception_handler(loop, context):
        error = context.get("exception")
        log(f"asyncio: {context.get('message')}" + (f": {type(error).__name__}: {error}" if error else ""))
    loop.set_exception_handler(exception_handler)

    servers = {}
    for service, protocols in (("apns", ["h2"]), ("fcm", ["h2", "http/1.1"]), ("webpush", ["h2", "http/1.1"])):
        server = await asyncio.start_server(connection_handler(service), "127.0.0.1", 0,
                                            ssl=tls_context(cert_path, key_path, protocols), backlog=512,
                                            ssl_handshake_timeout=30)
        servers[service] = server
        STATE.ports[service] = server.sockets[0].getsockname()[1]

    control = ThreadingHTTPServer(("127.0.0.1", 0), ControlHandler)
    control.daemon_threads = True
    STATE.ports["control"] = control.server_address[1]
    threading.Thread(target=control.serve_forever, kwargs={"poll_interval": 0.1}, name="control", daemon=True).start()

    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)

    print(json.dumps({"apns": STATE.ports["apns"], "fcm": STATE.ports["fcm"], "webpush": STATE.ports["webpush"],
                      "control": STATE.ports["control"], "ca": os.path.abspath(ca_path)}), flush=True)
    log(f"listening: {json.dumps(STATE.ports)}")
    await stop.wait()
    log("stopping")
    for server in servers.values():
        server.close()
    for transport in list(OPEN_TRANSPORTS):
        transport.abort()
    await asyncio.get_running_loop().run_in_executor(None, control.shutdown)
    control.server_close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="APNs / FCM / Web Push stand-in for Stratus's tests")
    parser.add_argument("--state-dir", required=True)
    arguments = parser.parse_args()
    try:
        asyncio.run(main(arguments.state_dir))
    except KeyboardInterrupt:
        pass
    sys.exit(0)
