"""`HttpApp.dispatch(Request) -> Response`: the whole HTTP contract, framework-free.

`dispatch` runs the request pipeline (`aidememo.http.pipeline`: route, method, size, content
type, authentication, then the body) with the origin's synchronous hooks, then the route's
handler, which reads its parameters and calls the service (authorization and the domain
rules). `serve` runs only the handler part, for a request another front admitted (the edge
Worker hands its admission to a project object). Neither raises: every failure becomes
`{"error": {"code", "message"}}` with the status mapped in `aidememo.domain.errors`, and
nothing a client sends yields a 5xx (HTTP-2).

`admitted` runs stage one and the body step of a command request (`Route.batch`) and
`run_admitted` the handlers of several admitted ones, one after another in one write batch of a
store declaring `CAP_WRITE_BATCH` (SPEC.md HTTP-10): one commit for all, every answer held until
it is durable, a request whose transaction did not commit answered with the storage error.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable, Sequence
from functools import partial
from typing import cast

from aidememo.domain.canonical import decode_json
from aidememo.domain.clock import RandomIds, SystemClock
from aidememo.domain.errors import STORAGE_RETRY_AFTER_S, AidememoError, ErrorCode, fail
from aidememo.domain.limits import HANDOFF_LEASE_MS_DEFAULT
from aidememo.http.pipeline import Admission, admit, drive
from aidememo.http.query_values import parse_query
from aidememo.http.render import json_bytes
from aidememo.http.services import SemanticStatus, Services
from aidememo.http.types import Request, Response
from aidememo.ports import CAP_WRITE_BATCH, BodyStore, Clock, Ids, Store, VectorSearch, WriteBatches
from aidememo.service.access import Caller
from aidememo.service.search_modes import WAIT_S

__all__ = ["HttpApp", "RetryLater", "Services", "error_response", "json_response"]

log = logging.getLogger("aidememo.http")

JSON_HEADERS = [("content-type", "application/json")]


def json_response(status: int, body: bytes) -> Response:
    """A JSON response."""
    return Response(status, list(JSON_HEADERS), body)


class RetryLater(AidememoError):
    """An error whose answer says when to retry, in whole seconds: the origin's rate limit
    (`origin.rate_limit`, RATE-1)."""

    def __init__(self, code: ErrorCode, message: str, retry_after_s: int) -> None:
        super().__init__(code, message)
        self.retry_after_s = retry_after_s


def error_response(error: AidememoError) -> Response:
    """The structured error response of `error` (ERR-1); 503s carry Retry-After (ERR-2), and
    so does a `RetryLater` (RATE-1)."""
    headers = list(JSON_HEADERS)
    if isinstance(error, RetryLater):
        headers.append(("retry-after", str(error.retry_after_s)))
    if error.http_status == 401:
        headers.append(("www-authenticate", "Bearer"))  # RFC 9110: a 401 names its scheme
    if error.http_status == 503:
        headers.append(("retry-after", str(STORAGE_RETRY_AFTER_S)))
    return Response(error.http_status, headers, json_bytes(error.to_json()))


class HttpApp:
    """The HTTP contract over one canonical store."""

    def __init__(
        self,
        store: Store,
        *,
        clock: Clock | None = None,
        ids: Ids | None = None,
        handoff_lease_ms: int = HANDOFF_LEASE_MS_DEFAULT,
        admin_token_sha256: bytes | None = None,
        mcp_allowed_origins: frozenset[str] = frozenset(),
        bodies: BodyStore | None = None,
        rate_limit: Callable[[bytes], None] | None = None,
        console_key: bytes | None = None,
        semantic: VectorSearch | None = None,
        semantic_status: SemanticStatus | None = None,
        search_wait_s: float = WAIT_S,
    ) -> None:
        self.store = store
        self._rate_limit = rate_limit
        self.services = Services(
            store,
            clock or SystemClock(),
            ids or RandomIds(),
            handoff_lease_ms,
            mcp_allowed_origins,
            bodies,
            semantic,
            # The console's cookie key (CONSOLE-2): given by `aidememo serve` (one per server,
            # shared by its workers), else a fresh one, so a cookie never outlives the process
            # that made it.
            console_key=console_key or secrets.token_bytes(32),
            semantic_status=semantic_status,  # SEM-7
            search_wait_s=search_wait_s,  # SEM-5
        )
        self._admin_digest = admin_token_sha256

    def authenticate(self, digest: bytes) -> Caller:
        """The caller a bearer token digest names, or `authentication_failed` (AUTH-2)."""
        return self.services.identity.authenticate(digest)

    def admit(self, request: Request) -> Admission:
        """Stage one and the body step of `request` (`aidememo.http.pipeline`), driven here
        synchronously: the token is looked up in the store, and the rate limit is the
        `rate_limit` hook given (none by default; `origin.rate_limit`, RATE-1). Raises the
        `AidememoError` to answer instead."""
        return drive(
            admit(
                request,
                self._admin_digest,
                self._rate_limit is not None,
                self.services.console_key,
            ),
            self.services.identity.authenticate_cached,
            request.body.take,
            self._rate_limit,
        )

    def dispatch(self, request: Request) -> Response:
        """Answer one request through the whole pipeline; never raises. The token lookup is
        this process's cache; the request's transaction re-checks the binding (AUTH-7)."""
        try:
            admission = self.admit(request)
        except Exception as exc:
            return self._failure(exc, request)
        try:
            response = self._run(admission, request)
        except Exception as exc:
            return self._refused(exc, admission, request)
        return self._observed(request, response)

    @property
    def batches(self) -> bool:
        """True when the store runs write batches (`CAP_WRITE_BATCH`): `run_admitted` then
        shares one commit among its requests."""
        return CAP_WRITE_BATCH in self.store.capabilities

    @property
    def connections(self) -> int | None:
        """How many transactions the store runs at once, when a connection pool bounds them
        (PostgreSQL: its pool's size); None for any other store."""
        connections = getattr(self.store, "connections", None)
        return connections if isinstance(connections, int) else None

    def admitted(self, request: Request) -> Admission | Response:
        """`admit`, or the answer refusing the request: what `run_admitted` takes."""
        try:
            return self.admit(request)
        except Exception as exc:
            return self._failure(exc, request)

    def run_admitted(self, admitted: Sequence[tuple[Request, Admission]]) -> list[Response]:
        """Answer admitted commands in order, their handlers (which decode the command and run
        it) one after another in one write batch of the store (HTTP-10), so the store never
        calls back into HTTP dispatch; never raises. Returns once every answer is durable; a
        request whose transaction did not commit gets the storage error instead of what its
        handler answered."""
        if not admitted:
            return []
        calls = [partial(self._run, admission, request) for request, admission in admitted]
        try:
            outcomes = cast(WriteBatches, self.store).batch(calls)
        except Exception as exc:
            outcomes = [(None, exc)] * len(calls)
        return [
            self._observed(request, answer)
            if error is None and answer is not None
            else self._refused(error or RuntimeError("no answer"), admission, request)
            for (request, admission), (answer, error) in zip(admitted, outcomes, strict=True)
        ]

    def serve(self, admission: Admission, request: Request) -> Response:
        """Answer a request another front admitted (the edge Worker, for a project object);
        never raises. Membership and everything after it run here (AUTH-5)."""
        try:
            response = self._run(admission, request)
        except Exception as exc:
            return self._failure(exc, request)
        return self._observed(request, response)

    def _refused(self, exc: Exception, admission: Admission, request: Request) -> Response:
        """The answer to an admitted request whose handler raised; a token found unknown
        in the request's own transaction leaves the token cache (AUTH-7)."""
        if (
            isinstance(exc, AidememoError)
            and exc.code is ErrorCode.AUTHENTICATION_FAILED
            and admission.digest is not None
        ):
            self.services.identity.forget(admission.digest)
        return self._failure(exc, request)

    def _observed(self, request: Request, response: Response) -> Response:
        if request.method != "GET" and response.status < 300:
            self.services.readiness.observe(True, None)  # a write committed (READY-1)
        return response

    def _failure(self, exc: Exception, request: Request) -> Response:
        """The answer to a request that raised: its structured error, or the retryable 503 of
        a bug or an unmapped driver error (every write is all-or-nothing, so a retry is safe).
        A storage error is the store's last outcome for readiness (READY-1)."""
        if isinstance(exc, AidememoError):
            if exc.store_state is not None:
                log.warning("storage error on %s %s: %s", request.method, request.path, exc)
                self.services.readiness.observe(False, exc)
            return error_response(exc)
        log.error("unexpected failure on %s %s", request.method, request.path, exc_info=exc)
        return error_response(fail(ErrorCode.STORAGE_FAILURE, "unexpected failure"))

    def _run(self, admission: Admission, request: Request) -> Response:
        route = admission.route
        request.body.bound(route.max_body)
        # `admit` read it already, unless the request came admitted over RPC (`serve`).
        parse_query(route, request)
        return route.handler(self.services, request, admission.params, admission.caller)


def read_json_body(request: Request) -> object:
    """The request body decoded strictly (CJ-3)."""
    return decode_json(request.body.read())
