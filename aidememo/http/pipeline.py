"""The request pipeline every front runs: the checks of SPEC.md HTTP-1, as sans-IO steps.

Stage one needs only the request line and headers; stage two takes the body. `admit` is a
generator that makes every decision and yields a step whenever it needs something only the
front can get, receiving the answer back:

- `Authenticate(digest)`: the caller a bearer token digest names (AUTH-2); the front's hook
  raises `authentication_failed` for an unknown token. The origin looks the digest up in its
  store; the edge Worker in its token cache, then the token directory (an awaited RPC).
- `RateLimit(digest)`: the front's rate limit, keyed by the digest, raising `rate_limited`
  (the edge's binding; the origin has none and answers at once).
- `ReadBody(limit)`: the whole body, at most `limit` bytes (stage two of a route that reads
  its body whole, and of a bodiless route that was sent a body anyway, which is counted
  against the limit and dropped). A streamed route (`Route.streamed`, the archive import)
  gets no such step: its handler iterates the bounded `Request.body` itself.

The order is HTTP-1's: route 404, method 405, declared size 413 (a `Content-Length`, or a
body the front already holds whole), media type 415, a WebSocket upgrade of a route that
has none 404 (LIVE-1), bearer token 401, the admin token (a member's token on an admin route
is 403 `admin_required`, ADM-1), the rate limit 429, then the body, counted as it is read
(413 as soon as it passes the limit: a body whose size was not declared is refused only
once authenticated), then the query parameters the route declares (`Route.query`, HTTP-3,
HTTP-16: 400), read once into `Request.query_values` for the handler. What follows (path
parameters and body 400, membership 403, domain rules) is the handler's and the service's,
inside the read or write it belongs to (AUTH-5).

Two small drivers run the same generator: `drive` (the origin's `HttpApp.dispatch`, with
synchronous hooks) and `drive_async` (the edge Worker, whose hooks are awaited). Nothing is
read before stage one has passed but what the front held already (at most the body's first
chunk), so an unauthenticated request never has its body read.
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import Any

from aidememo.domain.errors import ErrorCode, fail
from aidememo.http.bearer import bearer_digest
from aidememo.http.body import too_large
from aidememo.http.console_session import cookie_digest
from aidememo.http.media import check_media_type
from aidememo.http.query_values import parse_query
from aidememo.http.routes import Auth, Route, resolve
from aidememo.http.types import Request
from aidememo.service.access import Caller


@dataclass(slots=True)
class Authenticate:
    """Step: the caller of this token digest (the hook raises `authentication_failed`)."""

    digest: bytes


@dataclass(slots=True)
class RateLimit:
    """Step: count one request against the digest's rate limit (the hook raises 429)."""

    digest: bytes


@dataclass(slots=True)
class ReadBody:
    """Step: the whole request body, at most `limit` bytes (413 beyond)."""

    limit: int


Step = Authenticate | RateLimit | ReadBody


@dataclass(slots=True)
class Admission:
    """A request that passed stage one: what its handler is called with.

    `caller` is the member a member route authenticated (None on public and admin routes);
    `digest` the bearer token's SHA-256 (None on public routes); `body` what `ReadBody`
    answered (None when there was no such step).
    """

    route: Route
    params: dict[str, str]
    caller: Caller | None = None
    digest: bytes | None = None
    body: bytes | None = None


_PUBLIC, _ADMIN, _MEMBER = Auth.PUBLIC, Auth.ADMIN, Auth.MEMBER


ADMIN_DISABLED_MESSAGE = (
    "administration is off on this server: start `aidememo serve` with --admin-token-file"
    " (origin), or set the ADMIN_TOKEN_SHA256 secret to the hex SHA-256 of an admin token (edge)"
)


def admit(
    request: Request,
    admin_digest: bytes | None,
    rate_limited: bool = True,
    console_key: bytes | None = None,
) -> Generator[Step, Any, Admission]:
    """Stage one, then stage two's body step, of one request (see the module docstring).

    `admin_digest` is the SHA-256 of the admin token, None when none is configured: then
    administration is off and every admin request, with or without a token, is 403
    `admin_disabled` (ADM-1). `rate_limited` False: the front has no rate limit, so no
    `RateLimit` step is yielded. `console_key`: the key of the console's session cookies
    (`aidememo.http.console_session`), which then stand in for a missing bearer header on a
    member `GET` (CONSOLE-2, CONSOLE-3); None: no cookie is ever read. Raises the
    `AidememoError` to answer instead.
    """
    match = request.match
    if match is None:
        match = resolve(request.method, request.path)
    route = match.route
    if route is None:
        if match.allowed:
            raise fail(ErrorCode.METHOD_NOT_ALLOWED, f"use {', '.join(match.allowed)}")
        raise fail(ErrorCode.ROUTE_NOT_FOUND, "no such route")
    size = request.body.length
    if size is not None and size > route.max_body:
        raise too_large(route.max_body)
    if route.body is not None:
        check_media_type(request.headers.get("content-type"), route.media_type)
    if request.upgrade and not route.upgrade:
        raise fail(ErrorCode.ROUTE_NOT_FOUND, "no WebSocket route here")
    caller: Caller | None = None
    digest: bytes | None = None
    auth = route.auth
    if auth is _ADMIN and admin_digest is None:
        raise fail(ErrorCode.ADMIN_DISABLED, ADMIN_DISABLED_MESSAGE)
    if auth is not _PUBLIC:
        authorization = request.headers.get("authorization")
        if (
            authorization is None
            and console_key is not None
            and auth is _MEMBER
            and (request.method == "GET" or route.console_read)
        ):
            now_ms = int(time.time() * 1000)
            # A read by POST, like an upgrade, needs the console's own origin (CONSOLE-3).
            checked = request.upgrade or request.method != "GET"
            digest = cookie_digest(request.headers, checked, console_key, now_ms)
        if digest is None:
            digest = bearer_digest(authorization)
        if auth is _ADMIN:
            if admin_digest is None or not hmac.compare_digest(digest, admin_digest):
                yield Authenticate(digest)  # authentication_failed for an unknown token
                raise fail(ErrorCode.ADMIN_REQUIRED, "this route needs the admin token")
        else:
            caller = yield Authenticate(digest)
        if rate_limited:
            yield RateLimit(digest)
    body: bytes | None = None
    if not route.streamed and (route.body is not None or size != 0):
        body = yield ReadBody(route.max_body)
    parse_query(route, request)
    return Admission(route, match.params, caller, digest, body)


def _call_hook(
    step: Step,
    authenticate: Callable[[bytes], Any],
    read_body: Callable[[int], Any],
    rate_limit: Callable[[bytes], Any] | None,
) -> Any:
    """What the front's hook for `step` returns (an awaitable, for the edge's hooks); None
    for a rate limit the front has none of."""
    if type(step) is Authenticate:
        return authenticate(step.digest)
    if type(step) is RateLimit:
        return None if rate_limit is None else rate_limit(step.digest)
    assert type(step) is ReadBody
    return read_body(step.limit)


def drive(
    steps: Generator[Step, Any, Admission],
    authenticate: Callable[[bytes], Caller],
    read_body: Callable[[int], bytes],
    rate_limit: Callable[[bytes], None] | None = None,
) -> Admission:
    """Run `admit` with synchronous hooks (the origin)."""
    answer: Any = None
    try:
        while True:
            answer = _call_hook(steps.send(answer), authenticate, read_body, rate_limit)
    except StopIteration as done:
        admission: Admission = done.value
        return admission


async def drive_async(
    steps: Generator[Step, Any, Admission],
    authenticate: Callable[[bytes], Awaitable[Caller]],
    read_body: Callable[[int], Awaitable[bytes]],
    rate_limit: Callable[[bytes], Awaitable[None]] | None = None,
) -> Admission:
    """Run `admit` with awaited hooks (the edge Worker)."""
    answer: Any = None
    try:
        while True:
            pending = _call_hook(steps.send(answer), authenticate, read_body, rate_limit)
            answer = None if pending is None else await pending
    except StopIteration as done:
        admission: Admission = done.value
        return admission
