"""The Python Worker: `Default(WorkerEntrypoint)` admits requests and routes them to objects.

Every check of SPEC.md HTTP-1 is the core's request pipeline (`aidememo.http.pipeline`),
driven here by `drive_async` with the edge's awaited hooks; the Worker keeps only what is the
edge's own. For every request, in this order:
1. [edge] a plain-HTTP `/v1` request is refused with 426 `insecure_transport`, unless the
   `ALLOW_INSECURE_HTTP` var is set (local development);
2. the pipeline's stage one, from the request line and headers alone: route, method, the
   declared size (`Content-Length`, so an oversized body is refused unread), content type,
   a WebSocket upgrade of another route (404), the bearer token, the admin token (the
   `ADMIN_TOKEN_SHA256` secret, hex), and the hooks it asks for: `Authenticate` (the
   per-isolate cache of at most 30 s, `worker.auth_cache`, then the token directory shard of
   the digest: a revoked token keeps working for up to 30 s at an edge location that cached
   it) and `RateLimit` (the rate-limit binding keyed by the token digest, 600 per 60 s in
   wrangler.toml: 429 `rate_limited` with `Retry-After: 60`);
3. stage two's `ReadBody`: the body read here, counted against the route's limit (413 as
   soon as it passes it). The streamed import is not read here: `worker.transfer` reads it
   as it arrives and counts it the same way (SPEC.md ARC-7);
4. what answers the request is chosen by what its route declares, never by which route it
   is (SPEC.md EDGE-7). A public route (`auth`) is answered by its own handler, over a store
   that holds nothing and reports `mode: "edge"` and this code's schema version (so `/ready`
   is always `ok`: the Worker has no store and no disk of its own, SPEC.md READY-3); the
   console's files and its sign-out are public routes too. A route with an `edge_handler` is
   answered by the Worker's handler of that key (`OWN_HANDLERS`): the console's sign-in (no
   project in its path; the `CONSOLE_SESSION_KEY` secret, SPEC.md CONSOLE-2), the admin
   routes, orchestrated across the objects (`worker.admin`, `worker.transfer`), and the
   artifact body routes, whose bodies move between the client and R2 here
   (`worker.artifacts`, ART-10);
5. every other route goes to its project's `ProjectCoordinator` (a route with
   `project_in_body`, `POST /v1/commands`, names it in the body's top-level `project_id`,
   found by a scan, `handlers.command_project_id`, not by decoding it), named from the
   caller's tenant and the project, by the RPC method `handle(text)`: one JSON text of the
   request (the route's name and parameters, the content type, the body as text) and the
   identity the Worker authenticated, never client headers
   (`durable_objects.rpc.request_text`); the object runs the rest (`HttpApp.serve`: the full
   decode, the parameters, the membership on every request, so suspensions and role changes
   apply at once). The one exception is a WebSocket upgrade (the live change feed's
   `GET .../changes/live` with `Upgrade: websocket`, the one `upgrade` route), which RPC
   cannot carry: it is forwarded with `stub.fetch(request)`,
   the client's credentials and any `x-aidememo-*` header it sent deleted and the identity
   the Worker authenticated set in `x-aidememo-tenant` / `x-aidememo-actor`, with the digest
   of the token it used in `x-aidememo-token-sha256` (so a revocation closes the feed); the
   object's answer (the HTTP error of `/changes`, or 101 with the WebSocket) is returned as
   it is.

With `STORAGE_MODE=postgres` (`durable_objects.pg_connection`) every record lives in one
PostgreSQL database reached through the Hyperdrive binding: `Authenticate` looks the digest
up there (same 30 s cache), the admin routes run the origin's own handlers on that database
(`POSTGRES_HANDLERS`: the token directory and tenant registry objects are not used; the
import's lines go into the database's staged import as they arrive), and the project object
runs the contract on the same database. The Worker's connection is opened only when a request
needs it (a cache miss or an admin route) and closed when the request ends; its schema is
checked once per isolate, and the edge never migrates (`aidememo admin migrate` does).

The Durable Object classes are imported here so the runtime registers them with this module.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, ClassVar
from urllib.parse import unquote, urlsplit

from workers import Request as SdkRequest
from workers import Response, WorkerEntrypoint

from aidememo.domain.clock import RandomIds, SystemClock
from aidememo.domain.errors import AidememoError, ErrorCode, fail
from aidememo.domain.ids import validate_id
from aidememo.domain.limits import HANDOFF_LEASE_MS_DEFAULT
from aidememo.http import admin_handlers as core_admin
from aidememo.http import member_handlers as handlers
from aidememo.http.app import Services, error_response
from aidememo.http.body import EMPTY, Body, declared_length, read_async, too_large
from aidememo.http.pipeline import admit, drive_async
from aidememo.http.types import Auth, EdgeHandler, Request, Route
from aidememo.http.types import Response as CoreResponse
from aidememo.ports import Clock, Ids
from aidememo.service.access import Caller
from aidememo.service.identity import IdentityService
from aidememo.stores.in_memory import InMemoryStore
from aidememo.stores.postgres import SCHEMA_VERSION as PG_SCHEMA_VERSION
from aidememo.stores.postgres import PostgresStore
from aidememo.stores.sqlite.schema import SCHEMA_VERSION
from durable_objects import pg_connection
from durable_objects.directory import TokenDirectory
from durable_objects.project import ProjectCoordinator, lease_ms
from durable_objects.registry import TenantRegistry
from durable_objects.rpc import forwarded_headers, request_text
from worker import admin, artifacts, bindings, transfer
from worker.auth_cache import TokenCache
from worker.objects import Objects, call
from worker.routing import (
    ADMIN_TOKEN_SHA256,
    ALLOW_INSECURE_HTTP,
    CONSOLE_SESSION_KEY,
    RATE_LIMIT_PERIOD_S,
    RATE_LIMITER,
    insecure,
    var_is_set,
)
from worker.streams import body_chunks

__all__ = ["Default", "ProjectCoordinator", "TenantRegistry", "TokenDirectory"]

log = logging.getLogger("aidememo.edge")


def _method(request: Any) -> str:
    """The request method as text. The SDK's `Request.method` is an `http.HTTPMethod`, which
    has no member for an unknown method; the JS request's own string is used then."""
    try:
        method = request.method
    except (KeyError, ValueError):
        return str(request.js_object.method)
    return str(getattr(method, "value", method))


class Default(WorkerEntrypoint):  # type: ignore[misc]
    """The edge front: one instance per request; state shared per isolate sits on the class."""

    clock: Clock = SystemClock()
    ids: Ids = RandomIds()
    token_cache: TokenCache = TokenCache()
    # PostgreSQL mode: whether this isolate has seen the database's schema match this code's.
    pg_schema_checked: bool = False
    # The public routes' services per storage mode (True: PostgreSQL) and console key.
    public_services: ClassVar[dict[tuple[bool, bytes | None], Services]] = {}
    # The configured admin token digest, parsed once per isolate: (the secret, its digest).
    admin_digest: tuple[Any, bytes | None] | None = None
    # The console's cookie key, read once per isolate: (the env it was read from, its key).
    console_key: tuple[Any, bytes | None] | None = None
    # PostgreSQL mode: this request's store (one connection), opened on first use.
    _pg: PostgresStore | None = None

    async def fetch(self, request: Any) -> Any:
        """Answer one HTTP request; never raises."""
        self.env = bindings.shared_env(self.env)  # type: ignore[has-type]
        try:
            response = await self._serve(request)
            if not isinstance(response, CoreResponse):
                return response  # a streamed body, or the project object's own answer
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
        """A core `Response`, or a runtime response (streamed, or the object's upgrade)."""
        url = urlsplit(str(request.url))
        # Percent-decoded like the ASGI scope's `path` at the origin.
        method, path = _method(request), unquote(url.path) or "/"
        headers = bindings.request_headers(request)
        headers.setdefault("host", url.netloc)  # the console's same-origin checks read it
        # The var is read only for plain HTTP: an unset one costs a failed lookup each time.
        if insecure(url.scheme, path, False) and not var_is_set(self.env, ALLOW_INSECURE_HTTP):
            raise fail(ErrorCode.INSECURE_TRANSPORT, "use https")
        declared = declared_length(headers) if "content-length" in headers else None
        if declared:
            body = Body.unread(declared)
        elif declared is None and "transfer-encoding" in headers:
            body = Body.unread(None)  # a body of unknown size, counted as it is read
        else:
            body = EMPTY
        upgrade = "upgrade" in headers and headers["upgrade"].strip().lower() == "websocket"
        core = Request(method, path, url.query, headers, body, upgrade=upgrade)
        objs = Objects(self.env)

        admission = await drive_async(
            admit(core, self._admin_digest(), True, self._console_key()),
            partial(self._authenticate, objs),
            partial(_read_body, request, declared),
            self._limit,
        )
        route, params = admission.route, admission.params
        if admission.body is not None:
            core = replace(core, body=Body.of(admission.body))
        if route.auth is Auth.PUBLIC:
            return route.handler(self._public(), core, params, None)
        if route.edge_handler is not None:  # the Worker's own handler of the route (EDGE-7)
            own = _Own(objs, route, core, params, admission.caller, request)
            handler = OWN_HANDLERS[route.edge_handler]
            if self._postgres_mode():
                handler = POSTGRES_HANDLERS.get(route.edge_handler, handler)
            return await handler(self, own)
        caller = admission.caller
        assert caller is not None  # stage one authenticated the member
        if route.project_in_body:
            project_id = handlers.command_project_id(core, admission.body or b"")
        else:
            project_id = validate_id(params["project_id"], "project_id")
        if upgrade:  # the live feed: forwarded, since RPC cannot carry a WebSocket
            forwarded = SdkRequest(
                str(request.url),
                method="GET",
                headers=forwarded_headers(headers, caller, admission.digest),
            )
            return await objs.project(caller.tenant_id, project_id).fetch(forwarded)
        # The JS stub itself: a text argument and a text answer need no SDK conversion.
        stub = objs.project_js(caller.tenant_id, project_id)
        answer = await stub.handle(request_text(core, admission, caller))
        return bindings.framed_response(answer)

    async def _authenticate(self, objs: Objects, digest: bytes) -> Caller:
        """The token cache, then the token directory (or PostgreSQL): stage one's hook."""
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

    def _postgres_mode(self) -> bool:
        return pg_connection.postgres_mode(self.env)

    def _admin_digest(self) -> bytes | None:
        """The `ADMIN_TOKEN_SHA256` secret as bytes; None when unset or not hex (then every
        admin route is refused), parsed once per isolate (again when the secret changes)."""
        raw = getattr(self.env, ADMIN_TOKEN_SHA256, None)
        cls = type(self)
        cached = cls.admin_digest
        if cached is not None and cached[0] is raw:
            return cached[1]
        digest: bytes | None = None
        configured = str(raw or "").strip()
        if configured:
            try:
                digest = bytes.fromhex(configured)
            except ValueError:
                log.error("ADMIN_TOKEN_SHA256 is not hex; admin routes are closed")
        cls.admin_digest = (raw, digest or None)
        return digest or None

    def _console_key(self) -> bytes | None:
        """The `CONSOLE_SESSION_KEY` secret (hex, at least 32 bytes) that signs the console's
        session cookies; None when unset or unusable: then no cookie is read and sign-in is
        refused (CONSOLE-2). Read once per isolate's `env` (an unset secret is a failed
        lookup, not worth repeating on every request)."""
        cls = type(self)
        cached = cls.console_key
        if cached is not None and cached[0] is self.env:
            return cached[1]
        raw = str(getattr(self.env, CONSOLE_SESSION_KEY, None) or "").strip()
        try:
            key: bytes | None = bytes.fromhex(raw)
        except ValueError:
            key = None
        key = key if key is not None and len(key) >= 32 else None
        cls.console_key = (self.env, key)
        return key

    def _public(self) -> Services:
        """What the Worker's handlers of public routes and of the console's sign-in read: a
        store that holds nothing and reports the edge's mode and this code's schema version
        for the storage mode, and the console's cookie key. Built once per storage mode and
        key, with everything in it (nothing writes into it afterwards, EDGE-8)."""
        key = (self._postgres_mode(), self._console_key())
        services = self.public_services.get(key)
        if services is None:
            version = PG_SCHEMA_VERSION if key[0] else SCHEMA_VERSION
            store = _EdgeStatus(version)
            services = Services(
                store, self.clock, self.ids, HANDOFF_LEASE_MS_DEFAULT, console_key=key[1]
            )
            if len(self.public_services) >= 4:  # a secret changed: forget the older ones
                self.public_services.clear()
            self.public_services[key] = services
        return services

    def _postgres(self) -> PostgresStore:
        """This request's PostgreSQL store: one connection through Hyperdrive, closed when the
        request ends. The first one of an isolate checks the schema version (never migrates)."""
        if self._pg is None:
            cls = type(self)
            self._pg = pg_connection.open_store(self.env, check_schema=not cls.pg_schema_checked)
            cls.pg_schema_checked = True
        return self._pg

    async def _limit(self, digest: bytes) -> None:
        """The rate-limit binding, keyed by the token digest (never the token itself).

        `await env.RATE_LIMITER.limit({"key": k})` resolves to `{success: bool}`. The JS
        binding is called directly (`worker.bindings`: no SDK conversion on every request);
        the CPython runtime double (`tests/edge/runtime/ratelimit.py`) answers a mapping.
        """
        if getattr(self.env, RATE_LIMITER, None) is None:  # no binding configured: no limit
            return
        limiter = bindings.raw_binding(self.env, RATE_LIMITER)
        outcome = await limiter.limit(bindings.limit_key(digest.hex()))
        if not bindings.field(outcome, "success"):
            raise fail(
                ErrorCode.RATE_LIMITED, f"too many requests; retry in {RATE_LIMIT_PERIOD_S} s"
            )

    def _postgres_services(self) -> Services:
        """This request's services over its PostgreSQL store, built for it alone."""
        return Services(self._postgres(), self.clock, self.ids, lease_ms(self.env))


# workerd calls `fetch` through Pyodide's `relaxed_call`, which reads the method's
# `inspect.signature` on every request (its cache is keyed by the bound method, and each
# request has its own instance); a signature stored on the function is read instead of being
# worked out again from the code object.
Default.fetch.__signature__ = inspect.signature(Default.fetch)  # type: ignore[attr-defined]


@dataclass(frozen=True, slots=True)
class _Own:
    """A request the Worker answers with its own handler (`Route.edge_handler`, EDGE-7)."""

    objs: Objects
    route: Route
    core: Request
    params: dict[str, str]
    caller: Caller | None  # None on an admin route
    raw: Any  # the SDK request, whose body an import or an upload streams


async def _sign_in(w: Default, c: _Own) -> CoreResponse:
    """No project: the Worker mints the console's cookie itself (CONSOLE-2)."""
    return c.route.handler(w._public(), c.core, c.params, c.caller)


async def _artifact_body(w: Default, c: _Own) -> Any:
    """An artifact body moved between the client and R2 here (ART-10, GRANT-5)."""
    assert c.caller is not None  # stage one authenticated the member
    body, status, out = await artifacts.serve(
        c.route, c.core, c.params, c.caller, c.objs, w.env, c.raw
    )
    return Response(body, status=status, headers=out)


async def _postgres_import(w: Default, c: _Own) -> CoreResponse:
    """The streamed import pushes its lines into the database's staged import as they arrive
    (`worker.transfer.import_postgres`, ARC-9); the objects index it anew (SEM-11)."""
    archive = w._postgres_services().archive
    response = await transfer.import_postgres(archive, c.raw, c.core, c.route.max_body)
    await admin.after_postgres_import(c.objs, response)
    return response


async def _postgres_revoke(w: Default, c: _Own) -> CoreResponse:
    """The origin's revocation on the database, then this isolate's cache (EDGE-3)."""
    response = c.route.handler(w._postgres_services(), c.core, c.params, None)
    if response.status == 200:
        w.token_cache.evict(core_admin.revoke_request(c.core))
    return response


async def _postgres_delete_tenant(w: Default, c: _Own) -> CoreResponse:
    """The origin's deletion on the database; the deleted projects' objects then clear their
    vectors (SEM-11)."""
    services = w._postgres_services()
    doomed = admin.doomed_projects(services.store, w.env, c.params)
    response = c.route.handler(services, c.core, c.params, None)
    await admin.after_postgres_deletion(c.objs, doomed, response)
    return response


async def _postgres_core(w: Default, c: _Own) -> CoreResponse:
    """The origin's own handler on the shared database, in one transaction where the origin
    has one: nothing to orchestrate across objects."""
    return c.route.handler(w._postgres_services(), c.core, c.params, None)


OwnHandler = Callable[["Default", _Own], Awaitable[Any]]

# The Worker's own handler of each `Route.edge_handler`: admin routes orchestrated across the
# objects (`worker.admin`, `worker.transfer`), the console's sign-in, artifact bodies to R2.
OWN_HANDLERS: dict[EdgeHandler, OwnHandler] = {
    EdgeHandler.SIGN_IN: _sign_in,
    EdgeHandler.BOOTSTRAP: lambda w, c: admin.bootstrap(c.objs, c.core),
    EdgeHandler.MEMBERS: lambda w, c: admin.members(c.objs, c.core),
    EdgeHandler.REVOKE_TOKEN: lambda w, c: admin.revoke(c.objs, c.core, w.token_cache),
    EdgeHandler.EXPORT: lambda w, c: transfer.export(c.objs, w.ctx, c.core, c.params, w.clock),
    EdgeHandler.IMPORT: lambda w, c: transfer.import_(
        c.objs, c.raw, c.core, c.route.max_body, w.ids
    ),
    EdgeHandler.DELETE_TENANT: lambda w, c: admin.delete_tenant(c.objs, c.core, c.params),
    **dict.fromkeys(artifacts.BINDING_STEPS, _artifact_body),
}

# In PostgreSQL mode the admin routes run the origin's handlers on the shared database (the
# token directory and tenant registry objects are not used); other keys are `OWN_HANDLERS`'.
POSTGRES_HANDLERS: dict[EdgeHandler, OwnHandler] = {
    EdgeHandler.BOOTSTRAP: _postgres_core,
    EdgeHandler.MEMBERS: _postgres_core,
    EdgeHandler.REVOKE_TOKEN: _postgres_revoke,
    EdgeHandler.EXPORT: _postgres_core,
    EdgeHandler.IMPORT: _postgres_import,
    EdgeHandler.DELETE_TENANT: _postgres_delete_tenant,
}


async def _read_body(request: Any, declared: int | None, limit: int) -> bytes:
    """Stage two's `ReadBody` at the edge: the SDK request's body, at most `limit` bytes."""
    if declared is not None:  # the runtime holds the body to its Content-Length
        data = bytes(await request.bytes())
        if len(data) > limit:
            raise too_large(limit)
        return data
    return await read_async(body_chunks(request), limit)


class _EdgeStatus(InMemoryStore):
    """The store the public routes see at the edge: empty, in mode `edge`, with the schema
    version of the storage mode's code (the Worker holds no store of its own)."""

    mode = "edge"

    def __init__(self, version: int) -> None:
        super().__init__()
        self._version = version

    def schema_version(self) -> int:
        return self._version


def _error(error: AidememoError) -> CoreResponse:
    response = error_response(error)
    if error.code is ErrorCode.RATE_LIMITED:
        response.headers.append(("retry-after", str(RATE_LIMIT_PERIOD_S)))
    return response
