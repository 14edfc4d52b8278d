"""`Runtime`: the Worker and its three Durable Object namespaces in one CPython process.

    rt = Runtime(tmp_path, clock)          # installs the stand-in `workers`, imports the edge
    status, headers, body = rt.fetch("GET", "https://edge.test/health")
    rt.close()                             # closes storage, uninstalls every edge module

Each `fetch` constructs a new `Default(ctx, env)`, as workerd does per request; state that
lives per isolate (the token cache) sits on the class, and the runtime gives each `Runtime`
its own subclass, so tests never share an isolate by accident. The Durable Object classes
are subclassed the same way to run on the test's clock.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import json as jsonlib
import sys
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from aidememo.domain.clock import RandomIds
from aidememo.ports import Clock, Ids
from tests.edge.runtime import streams, websockets, workers_module
from tests.edge.runtime.ai_vectorize import VectorizeIndex, WorkersAI
from tests.edge.runtime.objects import Namespace
from tests.edge.runtime.r2 import R2Bucket
from tests.edge.runtime.ratelimit import RateLimiter, configured

EDGE_PACKAGES = ("worker", "durable_objects")
BASE_URL = "https://edge.test"


def _edge_modules() -> list[str]:
    return [
        name
        for name in sys.modules
        if name in EDGE_PACKAGES or name.startswith(tuple(f"{p}." for p in EDGE_PACKAGES))
    ]


class Env(types.SimpleNamespace):
    """The Worker's `env`: bindings and vars as attributes."""


class Context:
    """The `ExecutionContext` of one request: `waitUntil` keeps work alive past the answer."""

    def __init__(self) -> None:
        self.pending: list[Any] = []

    def waitUntil(self, awaitable: Any) -> None:
        self.pending.append(getattr(awaitable, "obj", awaitable))  # a pyodide proxy's target

    async def drain(self) -> None:
        """Wait for everything handed to `waitUntil` (its failures are the code's logs)."""
        await asyncio.gather(*self.pending, return_exceptions=True)


class Runtime:
    """One simulated deployment: a Worker isolate and its objects."""

    def __init__(
        self,
        folder: Path,
        clock: Clock,
        *,
        ids: Ids | None = None,
        admin_token: str | None = "admin-token-for-tests",
        vars: Mapping[str, str] | None = None,
        rate_limit: int | None = None,
        hyperdrive: Any = None,
        semantic: bool = False,
    ) -> None:
        """`semantic` binds the Workers AI and Vectorize doubles (`self.ai`, `self.vectorize`)
        as wrangler.toml's `[ai]` and `[[vectorize]]` do; without them the edge has no
        semantic search, like an origin without a provider."""
        self.clock = clock
        self.ids = ids or RandomIds()
        self.admin_token = admin_token
        self.loop = asyncio.new_event_loop()
        stand_ins = {"workers": workers_module.module(), "js": websockets.js_module()}
        stand_ins.update(streams.pyodide_modules())
        self._saved = {name: sys.modules.get(name) for name in stand_ins}
        for name in _edge_modules():  # imported against another runtime: start clean
            del sys.modules[name]
        sys.modules.update(stand_ins)
        try:
            entry = importlib.import_module("worker.entry")
        except BaseException:
            self._uninstall()
            raise
        overrides = {"clock": clock, "ids": self.ids}
        self.Default = type(
            "Default",
            (entry.Default,),
            {**overrides, "token_cache": type(entry.Default.token_cache)()},
        )
        folder.mkdir(parents=True, exist_ok=True)
        self.env = Env(**dict(vars or {}))
        if admin_token is not None:
            self.env.ADMIN_TOKEN_SHA256 = hashlib.sha256(admin_token.encode()).hexdigest()
        limit, period = configured()  # wrangler.toml's binding, unless a test sets the limit
        self.env.RATE_LIMITER = RateLimiter(clock, limit=rate_limit or limit, period_s=period)
        self.env.ARTIFACTS = R2Bucket()  # the [[r2_buckets]] binding (tests.edge.runtime.r2)
        if hyperdrive is not None:  # the [[hyperdrive]] binding (tests.edge.runtime.hyperdrive)
            self.env.HYPERDRIVE = hyperdrive
        self.ai = WorkersAI()
        self.vectorize = VectorizeIndex(clock)
        if semantic:  # the [ai] and [[vectorize]] bindings (tests.edge.runtime.ai_vectorize)
            self.env.AI = self.ai
            self.env.VECTORIZE = self.vectorize
        self.namespaces: dict[str, Namespace] = {}
        for binding, cls in (
            ("PROJECTS", entry.ProjectCoordinator),
            ("TENANTS", entry.TenantRegistry),
            ("TOKENS", entry.TokenDirectory),
        ):
            # The SEM-5 wait in real seconds: the Vectorize double's delay runs on the test
            # clock, which nothing advances while a request waits.
            extra = {"index_wait_s": 0.1} if binding == "PROJECTS" else {}
            sub = type(cls.__name__, (cls,), {**overrides, **extra})
            ns = Namespace(sub, self.env, folder / binding.lower(), clock)
            ns.runner = self.run
            (folder / binding.lower()).mkdir(exist_ok=True)
            self.namespaces[binding] = ns
            setattr(self.env, binding, ns)

    # -- requests -------------------------------------------------------------------------

    def isolate(self) -> type:
        """Another isolate of the same deployment: its own `Default` class and token cache."""
        return type("Default", (self.Default,), {"token_cache": type(self.Default.token_cache)()})

    def fetch(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str] | None = None,
        body: bytes = b"",
        *,
        isolate: type | None = None,
        body_used: list[bool] | None = None,
    ) -> tuple[int, dict[str, str], bytes]:
        """One request through a fresh `Default`; `(status, headers, body)`.

        `body_used` receives whether the Worker read the request body."""
        request = workers_module.Request(url, method, dict(headers or {}), body)
        cls = isolate or self.Default
        ctx = Context()
        worker = cls(ctx, self.env)
        response = self.run(worker.fetch(request))
        data = response.body
        if response.stream is not None:  # a streamed body: read it as the client would
            data = self.run(response.stream.read_all())
        if ctx.pending:
            self.run(ctx.drain())
        if body_used is not None:
            body_used.append(request.body_used)
        return response.status, dict(response.headers), data

    def connect(
        self, url: str, headers: Mapping[str, str] | None = None, *, isolate: type | None = None
    ) -> tuple[int, dict[str, str], bytes, websockets.ClientSocket | None]:
        """A WebSocket upgrade through a fresh `Default`: `(status, headers, body, client)`,
        `client` being the socket's client end when the answer is 101."""
        hdrs = {"upgrade": "websocket", "connection": "Upgrade", **dict(headers or {})}
        request = workers_module.Request(url, "GET", hdrs, b"")
        cls = isolate or self.Default
        worker = cls(Context(), self.env)
        response = self.run(worker.fetch(request))
        return response.status, dict(response.headers), response.body, response.web_socket

    def run(self, coro: Any) -> Any:
        """Run a coroutine on this runtime's event loop."""
        return self.loop.run_until_complete(coro)

    def catch_up_index(self, rounds: int = 40, horizon_ms: int = 60_000) -> None:
        """Run the project objects' semantic indexers until idle: the clock moved past the
        Vectorize double's visibility delay (or to a project object's alarm, a backoff,
        within `horizon_ms`), due alarms fired, round after round."""
        projects = self.namespaces["PROJECTS"]
        for _ in range(rounds):
            now = self.clock.now_ms()
            due = [
                s.alarm_ms
                for s in (projects.storages[n] for n in projects.names())
                if s.alarm_ms is not None and s.alarm_ms <= now + horizon_ms
            ]
            if not due:
                return
            step = max(min(due) - now, self.vectorize.delay_ms)
            self.clock.advance(step)  # type: ignore[attr-defined]
            self.fire_alarms()

    def fire_alarms(self) -> int:
        """Run `alarm()` on every live or stored object whose alarm time has come."""
        fired = 0
        now = self.clock.now_ms()
        for ns in self.namespaces.values():
            for name in ns.names():
                storage = ns.storages[name]
                if storage.alarm_ms is not None and storage.alarm_ms <= now:
                    storage.alarm_ms = None
                    self.run(ns.event(name, "alarm"))
                    fired += 1
        return fired

    def admin(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        body: bytes | None = None,
        content_type: str = "application/json",
        isolate: type | None = None,
    ) -> tuple[int, dict[str, str], Any]:
        """A request with the admin token; JSON bodies decoded."""
        headers = {"authorization": f"Bearer {self.admin_token}"}
        if json is not None:
            body = jsonlib.dumps(json).encode()
        if body is not None:
            headers["content-type"] = content_type
        status, hdrs, raw = self.fetch(
            method, BASE_URL + path, headers, body or b"", isolate=isolate
        )
        return status, hdrs, _decode(raw, hdrs)

    # -- teardown -------------------------------------------------------------------------

    def close(self) -> None:
        for ns in self.namespaces.values():
            ns.close()
        self.loop.close()
        self._uninstall()

    def _uninstall(self) -> None:
        for name in _edge_modules():
            del sys.modules[name]
        for name, module in self._saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


def _decode(raw: bytes, headers: Mapping[str, str]) -> Any:
    if not raw:
        return None
    if "json" in headers.get("content-type", "") and "ndjson" not in headers.get(
        "content-type", ""
    ):
        try:
            return jsonlib.loads(raw)
        except ValueError:
            return raw
    return raw


class EdgeClient:
    """The HTTP contract suite's `Client` over `Default.fetch` with `https://` URLs."""

    def __init__(self, runtime: Runtime, base_url: str = BASE_URL) -> None:
        self.runtime = runtime
        self.base_url = base_url

    def request(
        self,
        method: str,
        path: str,
        *,
        token: str | None = None,
        json: Any = None,
        body: bytes | None = None,
        headers: Mapping[str, str | None] | None = None,
        query: Mapping[str, str | int] | str | None = None,
    ) -> tuple[int, dict[str, str], Any]:
        from tests.contract.support import decode_body, encode_query, request_parts

        hdrs, raw = request_parts(token, json, body, headers)
        if raw and "content-length" not in hdrs:
            hdrs["content-length"] = str(len(raw))
        qs = encode_query(query) if not isinstance(query, str) else query
        url = self.base_url + path + (f"?{qs}" if qs else "")
        status, out_headers, out = self.runtime.fetch(method, url, hdrs, raw)
        return status, out_headers, decode_body(out)
