"""The browser console's handlers: its files, and signing in and out (SPEC.md CONSOLE-*).

`GET /console` and `GET /console/{asset}` answer the files of `aidememo.console` with a
strict Content-Security-Policy (scripts and styles from this origin only, no inline code, no
framing). `POST /console/session` turns the member token of its `Authorization` header into
the console's session cookie (`aidememo.http.console_session`); `DELETE /console/session`
drops it. Both are refused unless they come from the console's own page (CONSOLE-4). The
console's pages read the member routes with that cookie; they never write.
"""

from __future__ import annotations

import time

from aidememo import console
from aidememo.domain.errors import ErrorCode, fail
from aidememo.http.bearer import bearer_digest
from aidememo.http.console_session import check_state_change, clear_cookies, mint, set_cookie
from aidememo.http.render import json_bytes
from aidememo.http.services import Services
from aidememo.http.types import Request, Response
from aidememo.service.access import Caller

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
_PAGE_HEADERS = (
    ("content-security-policy", CONTENT_SECURITY_POLICY),
    ("x-content-type-options", "nosniff"),
    ("referrer-policy", "no-referrer"),
    ("x-frame-options", "DENY"),
    ("cache-control", "no-cache"),
)
_JSON_NO_STORE = (("content-type", "application/json"), ("cache-control", "no-store"))


def _file(name: str) -> Response:
    found = console.asset(name)
    if found is None:
        raise fail(ErrorCode.ROUTE_NOT_FOUND, "no such console file")
    body, media = found
    return Response(200, [("content-type", media), *_PAGE_HEADERS], body)


def page(s: Services, request: Request, params: dict[str, str], caller: Caller | None) -> Response:
    """The console's page (CONSOLE-1)."""
    return _file(console.INDEX)


def asset(s: Services, request: Request, params: dict[str, str], caller: Caller | None) -> Response:
    """One of the console's files, by name; 404 for any other name (CONSOLE-1)."""
    return _file(params["asset"])


def sign_in(
    s: Services, request: Request, params: dict[str, str], caller: Caller | None
) -> Response:
    """The session cookie of the member token the request authenticated with (CONSOLE-2):
    HttpOnly, SameSite=Strict, Secure when the page is https; one hour."""
    check_state_change(request.headers)
    if caller is None:
        raise fail(ErrorCode.AUTHENTICATION_FAILED, "sign in with a member token")
    key = s.console_key
    if key is None:
        raise fail(ErrorCode.ORIGIN_NOT_ALLOWED, "the console is off on this server")
    digest = bearer_digest(request.headers.get("authorization"))
    # The wall clock, as the pipeline reads it when the cookie comes back (CONSOLE-3).
    value, expires = mint(key, digest, int(time.time() * 1000))
    secure = request.headers.get("origin", "").startswith("https://")
    body = {"tenant_id": caller.tenant_id, "actor_id": caller.actor_id, "expires_at_ms": expires}
    headers = [*_JSON_NO_STORE, ("set-cookie", set_cookie(value, secure))]
    return Response(200, headers, json_bytes(body))


def sign_out(
    s: Services, request: Request, params: dict[str, str], caller: Caller | None
) -> Response:
    """Drop the session cookie (CONSOLE-4)."""
    check_state_change(request.headers)
    headers = [*_JSON_NO_STORE, *(("set-cookie", c) for c in clear_cookies())]
    return Response(200, headers, json_bytes({"signed_out": True}))
