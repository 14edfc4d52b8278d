"""The HTTP contract suite's support: one `Api` per backend, all answering the same contract.

Every test talks to the service only through `Client.request`, so a backend is one entry in
`BACKENDS`: a factory that returns the client, the identity service used to provision the
fixture (tokens are bound in the canonical store, never sent over HTTP) and a closer. Later
backends (PostgreSQL, the edge Worker + Durable Object, a real uvicorn socket) add one entry.

Time is a `FixedClock` injected into the app, so lease tests advance it instead of sleeping.
"""

from __future__ import annotations

import hashlib
import json as jsonlib
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlencode

from aidememo.bodies.local import LocalBodies
from aidememo.bodies.memory import MemoryBodies
from aidememo.domain.clock import FixedClock
from aidememo.domain.limits import MAX_REQUEST_BODY_BYTES
from aidememo.domain.model import MemberStatus, Role
from aidememo.http.app import HttpApp
from aidememo.http.routes import resolve
from aidememo.http.types import Request
from aidememo.service.identity import IdentityService
from aidememo.service.search_modes import WAIT_S
from aidememo.stores.in_memory import InMemoryStore
from aidememo.stores.sqlite.store import SqliteStore
from tests import pg
from tests.contract.conformance import check_response
from tests.doubles.do_storage import DoStorage

TENANT = "tenant_http"
PROJECT = "project_http"
EPOCH = "epoch_http"
P = f"/v1/projects/{PROJECT}"
WRITER, RECEIVER, HERMES, READER = "codex-p1", "codex-p2", "hermes", "reader_actor"
OUTSIDER = "outsider"  # a writer of another project in the same tenant
OTHER_PROJECT = "project_other"
LEASE_MS = 120_000
START_MS = 1_700_000_000_000
# Every in-process and socket app is built with this admin token's SHA-256 (ADM-1); the edge
# backend's runtime has an admin token of its own, which `Backend.admin_token` reports.
ADMIN_TOKEN = "admin-token-for-contract-tests"
ADMIN_TOKEN_SHA256 = hashlib.sha256(ADMIN_TOKEN.encode()).digest()
# The one browser origin every backend lets call the MCP endpoint (MCP-7).
MCP_ORIGIN = "https://agents.example"

# A header value of None removes the header the client would otherwise send.
Headers = Mapping[str, str | None]
Query = Mapping[str, str | int] | str | None


class Client(Protocol):
    """How a test reaches one backend: one HTTP exchange, JSON decoded when there is any."""

    def request(
        self,
        method: str,
        path: str,
        *,
        token: str | None = None,
        json: Any = None,
        body: bytes | None = None,
        headers: Headers | None = None,
        query: Query = None,
    ) -> tuple[int, dict[str, str], Any]:
        """`(status, lower-case headers, decoded JSON body or None)`."""
        ...


def encode_query(query: Query) -> str:
    """A query string from a mapping (urlencoded) or a raw string (sent as is)."""
    if query is None:
        return ""
    if isinstance(query, str):
        return query
    return urlencode({k: str(v) for k, v in query.items()})


def request_parts(
    token: str | None, json: Any, body: bytes | None, headers: Headers | None
) -> tuple[dict[str, str], bytes]:
    """The headers and body bytes a client sends: JSON bodies default to application/json."""
    out: dict[str, str] = {}
    if json is not None:
        body = jsonlib.dumps(json).encode()
        out["content-type"] = "application/json"
    if token is not None:
        out["authorization"] = f"Bearer {token}"
    for key, value in (headers or {}).items():
        if value is None:
            out.pop(key.lower(), None)
        else:
            out[key.lower()] = value
    return out, body or b""


def decode_body(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return jsonlib.loads(raw)
    except ValueError:
        return raw


def body_limit(method: str, path: str) -> int:
    """The most a route reads: 1 MiB, or its larger limit (the archive import's 256 MiB)."""
    route = resolve(method, path).route
    return max(MAX_REQUEST_BODY_BYTES, route.max_body if route is not None else 0)


class InProcessClient:
    """Calls `HttpApp.dispatch` directly, with the body held whole (its size known to the
    pipeline's stage one, as a declared `Content-Length` is)."""

    def __init__(self, app: HttpApp) -> None:
        self.app = app

    def request(
        self,
        method: str,
        path: str,
        *,
        token: str | None = None,
        json: Any = None,
        body: bytes | None = None,
        headers: Headers | None = None,
        query: Query = None,
    ) -> tuple[int, dict[str, str], Any]:
        hdrs, raw = request_parts(token, json, body, headers)
        if raw and "content-length" not in hdrs:  # as an HTTP client declares it
            hdrs["content-length"] = str(len(raw))
        response = self.app.dispatch(
            Request(method=method, path=path, query=encode_query(query), headers=hdrs, body=raw)
        )
        data = response.body if response.stream is None else b"".join(response.stream)
        return response.status, dict(response.headers), decode_body(data)


@dataclass
class Backend:
    """One running service under test."""

    client: Client
    identity: IdentityService
    close: Callable[[], None]
    admin_token: str | None = None  # the token of the admin routes; None: not configured
    # The canonical store behind the project (the edge: its project object's), for tests that
    # load rows in bulk without a request each.
    store: Callable[[], Any] | None = None


BackendFactory = Callable[[Path, FixedClock], Backend]


def _app(
    store: Any,
    clock: FixedClock,
    bodies: Any = None,
    semantic: Any = None,
    search_wait_s: float = WAIT_S,
) -> HttpApp:
    # Artifact bodies (ART-*): local files where the backend has a directory, else in memory.
    return HttpApp(
        store,
        clock=clock,
        handoff_lease_ms=LEASE_MS,
        admin_token_sha256=ADMIN_TOKEN_SHA256,
        mcp_allowed_origins=frozenset({MCP_ORIGIN}),
        bodies=MemoryBodies() if bodies is None else bodies,
        semantic=semantic,
        search_wait_s=search_wait_s,
    )


def _in_process(store: Any, clock: FixedClock, bodies: Any = None) -> Backend:
    app = _app(store, clock, bodies)
    return Backend(
        InProcessClient(app), app.services.identity, store.close, ADMIN_TOKEN, lambda: store
    )


def _uvicorn(store: Any, clock: FixedClock, bodies: Any = None) -> Backend:
    """A real socket: uvicorn and the origin ASGI adapter in front of the app."""
    from tests.contract.live import SocketClient, shared_server

    app = _app(store, clock, bodies)
    client = SocketClient(shared_server(app).port)

    def close() -> None:
        client.close()
        store.close()

    return Backend(client, app.services.identity, close, ADMIN_TOKEN, lambda: store)


def _edge(tmp: Path, clock: FixedClock) -> Backend:
    """The Worker and its Durable Objects in the CPython runtime double (`tests/edge`)."""
    from tests.edge.backend import edge_backend

    backend: Backend = edge_backend(tmp, clock)
    if backend.admin_token is None:
        # The runtime double holds the Worker's admin token (its ADMIN_TOKEN_SHA256 secret).
        runtime = getattr(backend.client, "runtime", None)
        backend.admin_token = getattr(runtime, "admin_token", None)
    return backend


def _edge_postgres(tmp: Path, clock: FixedClock) -> Backend:
    """The Worker and its Durable Objects with `STORAGE_MODE=postgres`: pg8000 through
    PgBouncer in transaction pool mode (standing in for Hyperdrive) to the real PostgreSQL."""
    from tests.edge.backend import edge_postgres_backend

    backend: Backend = edge_postgres_backend(tmp, clock)
    return backend


def _postgres(driver: str, *, pooled: bool = False) -> BackendFactory:
    """PostgreSQL with `driver`; `pooled` through PgBouncer in transaction pool mode (no
    session state survives a transaction, as behind Hyperdrive)."""

    def make(tmp: Path, clock: FixedClock) -> Backend:
        db = pg.create_database(pooled=pooled)
        try:
            store = db.open(driver)
        except BaseException:
            db.drop()
            raise
        backend = _in_process(store, clock, LocalBodies(tmp / "artifacts"))

        def close() -> None:
            store.close()
            db.drop()

        backend.close = close
        return backend

    return make


BACKENDS: dict[str, BackendFactory] = {
    "memory": lambda tmp, clock: _in_process(InMemoryStore(), clock),
    "sqlite_file": lambda tmp, clock: _in_process(
        SqliteStore.open_file(tmp / "ssot.sqlite"), clock, LocalBodies(tmp / "artifacts")
    ),
    "durable_object": lambda tmp, clock: _in_process(
        SqliteStore.on_durable_object(DoStorage()), clock
    ),
    "postgres_psycopg": _postgres("psycopg"),
    "postgres_pg8000": _postgres("pg8000"),
    "pgbouncer_psycopg": _postgres("psycopg", pooled=True),
    "pgbouncer_pg8000": _postgres("pg8000", pooled=True),
    "edge": _edge,
    "edge_postgres": _edge_postgres,
    "uvicorn_sqlite": lambda tmp, clock: _uvicorn(
        SqliteStore.open_file(tmp / "ssot.sqlite", synchronous="OFF"),
        clock,
        LocalBodies(tmp / "artifacts"),
    ),
}


@dataclass
class Reply:
    """One answer: status, headers and decoded body, with the error code at hand."""

    status: int
    headers: dict[str, str]
    body: Any

    @property
    def code(self) -> str | None:
        if isinstance(self.body, dict) and isinstance(self.body.get("error"), dict):
            code = self.body["error"].get("code")
            return code if isinstance(code, str) else None
        return None

    def expect(self, status: int, code: str | None = None) -> Any:
        """Assert the status (and error code); return the body."""
        assert (self.status, self.code) == (status, code), self.body
        return self.body


@dataclass
class Api:
    """The fixture: a provisioned project on one backend, plus helpers to talk to it."""

    backend_name: str
    client: Client
    identity: IdentityService
    clock: FixedClock
    tokens: dict[str, str] = field(default_factory=dict)
    admin_token: str | None = None  # the backend's admin token (ADM-1), when it has one
    store: Callable[[], Any] | None = None  # the backend's canonical store (`Backend.store`)

    def call(
        self,
        method: str,
        path: str,
        *,
        as_: str | None = None,
        token: str | None = None,
        json: Any = None,
        body: bytes | None = None,
        headers: Headers | None = None,
        query: Query = None,
    ) -> Reply:
        if as_ is not None:
            token = self.tokens[as_]
        status, hdrs, decoded = self.client.request(
            method, path, token=token, json=json, body=body, headers=headers, query=query
        )
        check_response(method, path, status, hdrs, decoded)
        return Reply(status, hdrs, decoded)

    def get(self, path: str, as_: str | None = WRITER, *, query: Query = None) -> Reply:
        return self.call("GET", path, as_=as_, query=query)

    def post(self, path: str, json: Any, as_: str | None = WRITER) -> Reply:
        return self.call("POST", path, as_=as_, json=json)

    # -- provisioning ---------------------------------------------------------------------

    def provision(
        self,
        actor_id: str,
        role: Role,
        *,
        project_id: str = PROJECT,
        epoch: str | None = EPOCH,
        tenant_id: str = TENANT,
    ) -> str:
        token = secrets.token_hex(32)
        self.identity.bootstrap(
            tenant_id=tenant_id,
            project_id=project_id,
            actor_id=actor_id,
            role=role,
            project_epoch=epoch,
            token_sha256=hashlib.sha256(token.encode()).digest(),
        )
        self.tokens[actor_id] = token
        return token

    def set_status(self, actor_id: str, status: MemberStatus) -> None:
        self.identity.set_membership(TENANT, PROJECT, actor_id, status=status)

    def set_role(self, actor_id: str, role: Role) -> None:
        self.identity.set_membership(TENANT, PROJECT, actor_id, role=role)

    # -- typed helpers ----------------------------------------------------------------------

    def session(
        self, session_id: str, *, source_id: str | None = "project:aidememo", as_: str = WRITER
    ) -> dict[str, Any]:
        payload: dict[str, Any] = {"session_id": session_id, "topic": f"topic {session_id}"}
        if source_id is not None:
            payload["source_id"] = source_id
        body = {"command_id": f"cmd_{session_id}", "payload": payload}
        result: dict[str, Any] = self.post(f"{P}/sessions", body, as_).expect(200)
        return result

    def fact(
        self, fact_id: str, session_id: str, content: str, *, as_: str = WRITER
    ) -> dict[str, Any]:
        body = {
            "command_id": f"cmd_{fact_id}",
            "payload": {"fact_id": fact_id, "session_id": session_id, "content": content},
        }
        result: dict[str, Any] = self.post(f"{P}/facts", body, as_).expect(200)
        return result

    def send(
        self,
        handoff_id: str,
        session_id: str,
        to_actor: str,
        *,
        as_: str = WRITER,
        context_id: str | None = None,
    ) -> Reply:
        payload: dict[str, Any] = {
            "handoff_id": handoff_id,
            "session_id": session_id,
            "to_actor": to_actor,
            "focus": f"focus {handoff_id}",
        }
        if context_id is not None:
            payload["context_id"] = context_id
        return self.post(
            f"{P}/handoffs", {"command_id": f"cmd_send_{handoff_id}", "payload": payload}, as_
        )

    def transition(
        self,
        handoff_id: str,
        kind: str,
        payload: dict[str, Any],
        expected_revision: Any,
        *,
        as_: str = RECEIVER,
        command_id: str | None = None,
    ) -> Reply:
        body = {
            "command_id": command_id or f"cmd_{kind}_{handoff_id}_{secrets.token_hex(4)}",
            "expected_revision": expected_revision,
            "payload": payload,
        }
        return self.post(f"{P}/handoffs/{handoff_id}/{kind}", body, as_)

    def status_of(self, handoff_id: str, as_: str = WRITER) -> dict[str, Any]:
        result: dict[str, Any] = self.get(f"{P}/handoffs/{handoff_id}", as_).expect(200)
        return result

    def put_note(self, note_id: str, payload: Any, *, as_: str = WRITER, **extra: Any) -> Reply:
        body = {
            "command_id": f"cmd_put_{note_id}",
            "project_id": PROJECT,
            "expected_revision": None,
            "operation": "resource.put",
            "resource": {"kind": "custom.note", "id": note_id},
            "change": "upsert",
            "payload": payload,
            **extra,
        }
        return self.post("/v1/commands", body, as_)

    def head(self, as_: str = WRITER) -> int:
        snap = self.get(f"{P}/snapshot", as_).expect(200)
        return int(snap["at_seq"])
