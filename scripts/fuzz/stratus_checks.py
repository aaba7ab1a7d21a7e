"""Checks schemathesis runs on every answer of a Stratus server, beside its own (see scripts/fuzz/run)."""

import json

import schemathesis


@schemathesis.check
def error_carries_code_and_reason(ctx, response, case):
    """Every 4xx answer of the API is CloudKit's error shape: a JSON object with serverErrorCode and
    reason. (The pages made for browsers, such as a share link's, answer HTML, as documented.)"""
    if not 400 <= response.status_code < 500:
        return None
    content_type = next((values[0] for name, values in response.headers.items() if name.lower() == "content-type"), "")
    if content_type.startswith("text/html"):
        return None
    try:
        body = json.loads(response.content or b"")
    except ValueError:
        raise AssertionError(f"a {response.status_code} answer is not JSON: {response.content[:200]!r}")
    if not isinstance(body, dict) or not isinstance(body.get("serverErrorCode"), str) or not isinstance(body.get("reason"), str):
        raise AssertionError(f"a {response.status_code} answer lacks serverErrorCode or reason: {body!r:.300}")
    return None
