"""The Python Worker: `Default(WorkerEntrypoint)` authenticates, limits and routes.

For every request, in this order (the origin's order of checks, SPEC.md HTTP-1, with the
edge's two additions marked):
1. [edge] a plain-HTTP `/v1` request is refused with 426 `insecure_transport`, unless the
   `ALLOW_INSECURE_HTTP` var is set (local development);
2. route and method, body size (the declared Content-Length first, so an oversized body is
   refused unread, then the bytes received) and content type: the core's `check_request`.
   The import body is the exception: it is read after authentication, as it streams in, and
   its size is counted as it arrives (`worker.transfer`, SPEC.md ARC-7);
3. public routes are answered here: `/health` (`mode: "edge"`, this code's schema version),
   `/ready` (always `ok`: the Worker has no store of its own, SPEC.md READY-3)
   and `/openapi.json`;
4. the bearer token's SHA-256 (`bearer_digest`); on admin routes the `ADMIN_TOKEN_SHA256`
   secret (hex) admits the admin, and a member's valid token is 403 `admin_required`;
   otherwise the token directory shard of the digest authenticates it, through a per-isolate
   cache of at most 30 s (`worker.auth_cache`: a revoked token keeps working for up to 30 s
   at an edge location that cached it);
5. [edge] the rate-limit binding, keyed by the token digest (600 per 60 s in wrangler.toml):
   429 `rate_limited` with `Retry-After: 60`;
6. project routes and `POST /v1/commands` (its project read from the body, by the core's own
   parser) go to the project's `ProjectCoordinator`, named from the caller's tenant and the
   project, by the RPC method `handle(request, caller)`: plain dicts (the body as text, the
   content type, and the route the Worker resolved, so the object neither routes nor checks
   the request again) and the identity the Worker authenticated, never client headers. The
   object checks the membership on every request, so suspensions and role changes apply at
   once.
   The one exception is the live change feed's WebSocket upgrade (`GET .../changes/live` with
   `Upgrade: websocket`), which RPC cannot carry: it is forwarded with `stub.fetch(request)`,
   the client's credentials and any `x-aidememo-*` header it sent deleted and the identity
   the Worker authenticated set in `x-aidememo-tenant` / `x-aidememo-actor`, with the digest
   of the token it used in `x-aidememo-token-sha256` (so a revocation closes the feed); the
   object's answer (the HTTP error of `/changes`, or 101 with the WebSocket) is returned as
   it is.
Admin routes are orchestrated across the objects by `worker.admin`.

With `STORAGE_MODE=postgres` (`durable_objects.pg_connection`) every record lives in one
PostgreSQL database reached through the Hyperdrive binding: step 4 looks the digest up there
(same 30 s cache), the admin routes run the origin's own handlers on that database (the token
directory and tenant registry objects are not used), and the project object runs the contract
on the same database. The Worker's connection is opened only when a request needs it (a cache
miss or an admin route) and closed when the request ends; its schema is checked once per
isolate, and the edge never migrates (`aidememo admin migrate` does).

The Durable Object classes are imported here so the runtime registers them with this module.
"""

from __future__ import annotations

import hmac
import logging
from typing import Any
from urllib.parse import unquote, urlsplit

from workers import Request as SdkRequest
from workers import Response, WorkerEntrypoint

from aidememo.domain.clock import RandomIds, SystemClock
from aidememo.domain.errors import STORE_OK, AidememoError, ErrorCode, fail
from aidememo.domain.ids import validate_id
from aidememo.http import admin as core_admin
from aidememo.http import handlers
from aidememo.http import openapi as openapi_doc
from aidememo.http.app import Services, bearer_digest, check_request, check_size, error_response
from aidememo.http.live import LIVE_HANDLER
from aidememo.http.render import json_bytes
from aidememo.http.routes import Route, resolve
from aidememo.http.types import Request
from aidememo.http.types import Response as CoreResponse
from aidememo.ports import Clock, Ids
from aidememo.service.access import Caller
from aidememo.service.identity import IdentityService
from aidememo.stores.postgres import SCHEMA_VERSION as PG_SCHEMA_VERSION
from aidememo.stores.postgres import PostgresStore
from aidememo.stores.sqlite.schema import SCHEMA_VERSION
from durable_objects import ProjectCoordinator, TenantRegistry, TokenDirectory, pg_connection
from durable_objects.project import lease_ms
from durable_objects.rpc import (
    caller_payload,
    forwarded_headers,
    request_payload,
    response_parts,
)
from worker import admin, transfer
from worker.auth_cache import TokenCache
from worker.objects import Objects, call
from worker.routing import (
    ADMIN_TOKEN_SHA256,
    ALLOW_INSECURE_HTTP,
    RATE_LIMIT_PERIOD_S,
    RATE_LIMITER,
    insecure,
    var_is_set,
)

__all__ = ["Default", "ProjectCoordinator", "TenantRegistry", "TokenDirectory"]

log = logging.getLogger("aidememo.edge")
_JSON = [("content-type", "application/json")]
# Routes whose request body the Worker streams instead of reading it whole.
STREAMED_BODIES = frozenset({"admin_import"})


def _method(request: Any) -> str:
    """The request method as text. The SDK's `Request.method` is an `http.HTTPMethod`, which
    has no member for an unknown method; the JS request's own string is used then."""
    try:
        method = request.method
    except (KeyError, ValueError):
        return str(request.js_object.method)
    return str(getattr(method, "value", method))


def _content_length(headers: dict[str, str]) -> int | None:
    raw = headers.get("content-length")
    if raw is None or not raw.strip().isdigit():
        return None
    return int(raw)


class Default(WorkerEntrypoint):  # type: ignore[misc]
    """The edge front: one instance per request; state shared per isolate sits on the class."""

    clock: Clock = SystemClock()
    ids: Ids = RandomIds()
    token_cache: TokenCache = TokenCache()
    # PostgreSQL mode: whether this isolate has seen the database's schema match this code's.
    pg_schema_checked: bool = False
    # PostgreSQL mode: this request's store (one connection), opened on first use.
    _pg: PostgresStore | None = None

    async def fetch(self, request: Any) -> Any:
        """Answer one HTTP request; never raises."""
        try:
            response = await self._serve(request)
            if not isinstance(response, CoreResponse):
                return response  # the project object's own answer to a WebSocket upgrade
        except AidememoError as error:
            if error.code is ErrorCode.STORAGE_FAILURE:  # its wire message hides the cause
                log.warning("storage failure: %s", error.message)
            response = _error(error)
        except Exception:
            log.exception("edge failure")
            response = _error(fail(ErrorCode.STORAGE_FAILURE, "unexpected failure"))
        finally:
            if self._pg is not None:
                self._pg.close()
                self._pg = None
        return Response(response.body, status=response.status, headers=dict(response.headers))

    async def _serve(self, request: Any) -> Any:
        """A core `Response`, or the project object's response to a forwarded upgrade."""
        url = urlsplit(str(request.url))
        # Percent-decoded like the ASGI scope's `path` at the origin.
        method, path = _method(request), unquote(url.path) or "/"
        headers = {str(k).lower(): str(v) for k, v in request.headers.items()}
        if insecure(url.scheme, path, var_is_set(self.env, ALLOW_INSECURE_HTTP)):
            raise fail(ErrorCode.INSECURE_TRANSPORT, "use https")
        match = resolve(method, path)
        declared = _content_length(headers)
        if match.route is not None and declared is not None:
            check_size(match.route, declared)
        # The import body streams (`worker.transfer`): read after authentication, as it goes.
        # PostgreSQL mode runs the origin's handler, which takes the body whole.
        streamed = (
            match.route is not None
            and match.route.handler in STREAMED_BODIES
            and not pg_connection.postgres_mode(self.env)
        )
        # A bodiless route (a GET) reads a body only if one is announced, as the origin would
        # count it against the limit; otherwise no read (in the runtime, a promise) is spent.
        announced = bool(declared) or "transfer-encoding" in headers
        wanted = match.route is not None and (match.route.has_body or announced)
        body = await request.bytes() if wanted and not streamed else b""
        core = Request(method, path, url.query, headers, body)
        check_request(core, match)
        route = match.route
        assert route is not None  # check_request refused the rest
        upgrade = headers.get("upgrade", "").strip().lower() == "websocket"
        if upgrade and route.handler != LIVE_HANDLER:  # as the origin answers (LIVE-1)
            raise fail(ErrorCode.ROUTE_NOT_FOUND, "no WebSocket route here")
        if not route.authenticated:
            return _public(route, core, pg_connection.postgres_mode(self.env))
        digest = bearer_digest(headers.get("authorization"))
        objs = Objects(self.env)
        if route.admin:
            await self._check_admin(objs, digest)
            await self._limit(digest)
            if pg_connection.postgres_mode(self.env):
                return self._admin_postgres(route, core, match.params)
            return await self._admin(objs, route, core, match.params, request)
        caller = await self._authenticate(objs, digest)
        await self._limit(digest)
        if route.handler == "command":
            project_id = handlers.command_project_id(core)
        else:
            project_id = validate_id(match.params["project_id"], "project_id")
        stub = objs.project(caller.tenant_id, project_id)
        if upgrade:  # the live feed: forwarded, since RPC cannot carry a WebSocket
            forwarded = SdkRequest(
                str(request.url), method="GET", headers=forwarded_headers(headers, caller, digest)
            )
            return await stub.fetch(forwarded)
        answer = await stub.handle(request_payload(core, match), caller_payload(caller))
        body, status, out = response_parts(answer)
        return Response(body, status=status, headers=out)

    async def _authenticate(self, objs: Objects, digest: bytes) -> Caller:
        now = self.clock.now_ms()
        caller = self.token_cache.get(digest, now)
        if caller is None:
            if pg_connection.postgres_mode(self.env):
                caller = IdentityService(self._postgres(), self.clock, self.ids).authenticate(
                    digest
                )
            else:
                found = await call(objs.tokens(digest.hex()), "authenticate", digest.hex())
                caller = Caller(found["tenant_id"], found["actor_id"])
            self.token_cache.put(digest, caller, now)
        return caller

    def _postgres(self) -> PostgresStore:
        """This request's PostgreSQL store: one connection through Hyperdrive, closed when the
        request ends. The first one of an isolate checks the schema version (never migrates)."""
        if self._pg is None:
            cls = type(self)
            self._pg = pg_connection.open_store(self.env, check_schema=not cls.pg_schema_checked)
            cls.pg_schema_checked = True
        return self._pg

    def _admin_postgres(self, route: Route, core: Request, params: dict[str, str]) -> CoreResponse:
        """An admin route in PostgreSQL mode: the origin's own handler on the shared database
        (one transaction where the origin has one; nothing to orchestrate across objects)."""
        services = Services(self._postgres(), self.clock, self.ids, lease_ms(self.env))
        handler = getattr(core_admin, route.handler)
        response: CoreResponse = handler(services, core, params, None)
        if route.handler == "admin_revoke_token" and response.status == 200:
            self.token_cache.evict(core_admin.revoke_request(core))
        return response

    async def _check_admin(self, objs: Objects, digest: bytes) -> None:
        configured = getattr(self.env, ADMIN_TOKEN_SHA256, None)
        if configured:
            try:
                expected = bytes.fromhex(str(configured).strip())
            except ValueError:
                expected = b""
                log.error("ADMIN_TOKEN_SHA256 is not hex; admin routes are closed")
            if expected and hmac.compare_digest(digest, expected):
                return
        await self._authenticate(objs, digest)  # authentication_failed for unknown tokens
        raise fail(ErrorCode.ADMIN_REQUIRED, "this route needs the admin token")

    async def _limit(self, digest: bytes) -> None:
        """The rate-limit binding, keyed by the token digest (never the token itself).

        `await env.RATE_LIMITER.limit({"key": k})` resolves to `{success: bool}`
        (developers.cloudflare.com/workers/runtime-apis/bindings/rate-limit); the SDK wraps a
        `Ratelimit` binding so the dict goes over as a JS object and the answer comes back as
        a `JsDict` (workers-py `rpc.py`, its bindings test reads `result.success`).
        """
        limiter = getattr(self.env, RATE_LIMITER, None)
        if limiter is None:  # no binding configured: no limit
            return
        outcome = await limiter.limit({"key": digest.hex()})
        # A `JsDict` answers both spellings; a bare JS proxy only the attribute one.
        success = outcome["success"] if isinstance(outcome, dict) else outcome.success
        if not success:
            raise fail(
                ErrorCode.RATE_LIMITED, f"too many requests; retry in {RATE_LIMIT_PERIOD_S} s"
            )

    async def _admin(
        self, objs: Objects, route: Route, core: Request, params: dict[str, str], raw: Any
    ) -> Any:
        """An admin route orchestrated across the objects; `raw` is the SDK request, whose
        body the import streams."""
        if route.handler == "admin_bootstrap":
            return await admin.bootstrap(objs, core)
        if route.handler == "admin_members":
            return await admin.members(objs, core)
        if route.handler == "admin_revoke_token":
            return await admin.revoke(objs, core, self.token_cache)
        if route.handler == "admin_export":
            return await transfer.export(objs, self.ctx, core, params, self.clock)
        if route.handler == "admin_import":
            return await transfer.import_(objs, raw, core, route.max_body, self.ids)
        if route.handler == "admin_delete_tenant":
            return await admin.delete_tenant(objs, core, params)
        raise fail(ErrorCode.ROUTE_NOT_FOUND, "no such route")


def _public(route: Route, request: Request, postgres: bool) -> CoreResponse:
    handlers.no_query(request)
    if route.handler == "health":
        version = PG_SCHEMA_VERSION if postgres else SCHEMA_VERSION
        body = {"status": "ok", "mode": "edge", "schema_version": version, "state": STORE_OK}
        return CoreResponse(200, list(_JSON), json_bytes(body))
    if route.handler == "ready":
        # The Worker has no store and no disk of its own (READY-3): it is ready while it runs.
        return handlers.ready_response("edge", STORE_OK)
    if route.handler == "openapi":
        return CoreResponse(200, list(_JSON), openapi_doc.document_bytes())
    raise fail(ErrorCode.ROUTE_NOT_FOUND, "no such route")


def _error(error: AidememoError) -> CoreResponse:
    response = error_response(error)
    if error.code is ErrorCode.RATE_LIMITED:
        response.headers.append(("retry-after", str(RATE_LIMIT_PERIOD_S)))
    return response
