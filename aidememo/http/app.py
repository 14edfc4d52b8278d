"""`HttpApp.dispatch(Request) -> Response`: the whole HTTP contract, framework-free.

The request checks run in the order SPEC.md HTTP-1 fixes: route, method, size, content type,
authentication, then body and parameters, then authorization and the domain rules inside the
service. `dispatch` never raises: every failure becomes `{"error": {"code", "message"}}` with
the status mapped in `aidememo.domain.errors`, and nothing a client sends yields a 5xx.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
from collections.abc import Callable

from aidememo.domain.canonical import decode_json
from aidememo.domain.clock import RandomIds, SystemClock
from aidememo.domain.errors import STORAGE_RETRY_AFTER_S, AidememoError, ErrorCode, fail
from aidememo.domain.limits import BEARER_MAX_BYTES, HANDOFF_LEASE_MS_DEFAULT
from aidememo.http import admin, handlers
from aidememo.http.media import check_media_type
from aidememo.http.render import json_bytes
from aidememo.http.routes import Match, Route, resolve
from aidememo.http.types import Request, Response
from aidememo.ports import Clock, Ids, Store
from aidememo.service.access import Caller
from aidememo.service.archive import Archive
from aidememo.service.identity import IdentityService
from aidememo.service.ledger import Ledger
from aidememo.service.lookups import Lookups
from aidememo.service.product import Product
from aidememo.service.queries import Queries
from aidememo.service.readiness import Readiness

log = logging.getLogger("aidememo.http")

JSON_HEADERS = [("content-type", "application/json")]


def json_response(status: int, body: bytes) -> Response:
    """A JSON response."""
    return Response(status, list(JSON_HEADERS), body)


def error_response(error: AidememoError) -> Response:
    """The structured error response of `error` (ERR-1); 503s carry Retry-After (ERR-2)."""
    headers = list(JSON_HEADERS)
    if error.http_status == 503:
        headers.append(("retry-after", str(STORAGE_RETRY_AFTER_S)))
    return Response(error.http_status, headers, json_bytes(error.to_json()))


# What a bearer token may not contain: control characters, DEL, and any whitespace (str.isspace,
# which `\s` matches in a str pattern).
_NOT_TOKEN_TEXT = re.compile(r"[\s\x00-\x20\x7f]")


def bearer_digest(authorization: str | None) -> bytes:
    """SHA-256 of the bearer token text, or `authentication_failed` (AUTH-2)."""
    if authorization is None:
        raise fail(ErrorCode.AUTHENTICATION_FAILED, "missing bearer token")
    scheme, _, token = authorization.partition(" ")
    if (
        scheme.lower() != "bearer"
        or not token
        or len(token.encode("utf-8", "replace")) > BEARER_MAX_BYTES
        or _NOT_TOKEN_TEXT.search(token) is not None
    ):
        raise fail(ErrorCode.AUTHENTICATION_FAILED, "malformed bearer token")
    return hashlib.sha256(token.encode("utf-8")).digest()


def check_request(request: Request, match: Match | None = None) -> Match:
    """The checks before authentication (HTTP-1): route, method, size, content type.

    Returns the match of a request that passed; a front that authenticates and routes by
    itself (the edge Worker) calls this first, so its answers are the origin's. `match` is
    `resolve(request.method, request.path)` when the caller already has it.
    """
    if match is None:
        match = resolve(request.method, request.path)
    route = match.route
    if route is None:
        if match.allowed:
            raise fail(ErrorCode.METHOD_NOT_ALLOWED, f"use {', '.join(match.allowed)}")
        raise fail(ErrorCode.ROUTE_NOT_FOUND, "no such route")
    check_size(route, len(request.body), request.body_too_large)
    if route.has_body:
        check_media_type(request.headers.get("content-type"), route.media_type)
    return match


def check_size(route: Route, size: int, too_large: bool = False) -> None:
    """`payload_too_large` when a body of `size` bytes exceeds the route's limit."""
    if too_large or size > route.max_body:
        raise fail(
            ErrorCode.PAYLOAD_TOO_LARGE, f"request body is larger than {route.max_body} bytes"
        )


class Services:
    """The use cases one app serves, built once over one store."""

    def __init__(self, store: Store, clock: Clock, ids: Ids, lease_ms: int) -> None:
        self.store = store
        self.identity = IdentityService(store, clock, ids)
        self.ledger = Ledger(store, clock)
        self.queries = Queries(store)
        self.lookups = Lookups(store)
        self.product = Product(self.ledger, lease_ms)
        self.archive = Archive(store, clock, ids)
        self.readiness = Readiness(store)


Handler = Callable[["Services", Request, dict[str, str], Caller | None], Response]


class HttpApp:
    """The HTTP contract over one canonical store."""

    def __init__(
        self,
        store: Store,
        *,
        clock: Clock | None = None,
        ids: Ids | None = None,
        handoff_lease_ms: int = HANDOFF_LEASE_MS_DEFAULT,
        authenticate: Callable[[bytes], Caller] | None = None,
        admin_token_sha256: bytes | None = None,
    ) -> None:
        self.store = store
        self.services = Services(
            store, clock or SystemClock(), ids or RandomIds(), handoff_lease_ms
        )
        # The edge authenticates through its token directory; the origin through the store.
        self._authenticate = authenticate or self.services.identity.authenticate
        self._admin_digest = admin_token_sha256

    def authenticate(self, digest: bytes) -> Caller:
        """The caller a bearer token digest names, or `authentication_failed` (AUTH-2)."""
        return self._authenticate(digest)

    def _check_admin(self, digest: bytes) -> None:
        """The admin token passes; a member's token is `admin_required` (ADM-1)."""
        if self._admin_digest is not None and hmac.compare_digest(digest, self._admin_digest):
            return
        self._authenticate(digest)  # raises authentication_failed for unknown tokens
        raise fail(ErrorCode.ADMIN_REQUIRED, "this route needs the admin token")

    def dispatch(
        self, request: Request, caller: Caller | None = None, match: Match | None = None
    ) -> Response:
        """Answer one request; never raises.

        `caller` is given only by a front that has already authenticated the bearer token
        (the edge Worker, through its token directory); the request's own Authorization
        header is then not consulted again. Membership is still checked here (AUTH-5).
        `match` is given only by a front that has already routed the request and run
        `check_request` on it (the edge Worker again), so neither is done twice.
        """
        readiness = self.services.readiness
        try:
            response = self._dispatch(request, caller, match)
        except AidememoError as error:
            if error.store_state is not None:
                log.warning("storage error on %s %s: %s", request.method, request.path, error)
                readiness.observe(False, error)  # READY-1: the last outcome
            return error_response(error)
        except Exception:
            # A bug or an unmapped driver error: log it, and answer the retryable 503, since
            # every write is all-or-nothing and a retry of the same command is safe.
            log.exception("unexpected failure on %s %s", request.method, request.path)
            return error_response(fail(ErrorCode.STORAGE_FAILURE, "unexpected failure"))
        if request.method != "GET" and response.status < 300:
            readiness.observe(True, None)  # a write committed: the store takes writes
        return response

    def _dispatch(self, request: Request, caller: Caller | None, match: Match | None) -> Response:
        if match is None:
            match = check_request(request)
        route = match.route
        assert route is not None  # check_request refused a request without a route
        if route.admin:
            if caller is not None:
                raise fail(ErrorCode.ADMIN_REQUIRED, "this route needs the admin token")
            self._check_admin(bearer_digest(request.headers.get("authorization")))
        elif route.authenticated and caller is None:
            caller = self._authenticate(bearer_digest(request.headers.get("authorization")))
        elif not route.authenticated:
            caller = None
        handler: Handler = getattr(admin if route.admin else handlers, route.handler)
        return handler(self.services, request, match.params, caller)

    @staticmethod
    def body_limit(method: str, path: str) -> int:
        """The largest body `method path` accepts; adapters stop reading beyond it."""
        route: Route | None = resolve(method, path).route
        return route.max_body if route is not None else 0


def read_json_body(request: Request) -> object:
    """The request body decoded strictly (CJ-3)."""
    return decode_json(request.body)
