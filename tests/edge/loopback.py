"""The edge runtime double behind a real HTTP server on 127.0.0.1, for real client processes.

    with Loopback(tmp_path / "edge") as edge:      # uvicorn on a free loopback port
        edge.url                                    # http://127.0.0.1:PORT
        edge.admin_token                            # the deployment's admin token
        subprocess.run([".venv/bin/aidememo", ..., "--url", edge.url])

Every HTTP request a client sends is handed, unchanged but for its URL (rewritten to the
double's `https://edge.test` origin, as Cloudflare terminates TLS in front of the Worker),
to `Runtime.fetch`: a fresh `Default` per request, the Durable Objects, their storage. A
WebSocket upgrade goes to `Runtime.connect`; a 101 bridges the client's socket to the
double's `ClientSocket` (messages both ways, the object's close code and reason back), and a
refusal is sent as the HTTP answer the Worker gave.

The double is single-threaded, as one isolate is, so every call into it runs on one worker
thread, in arrival order. The deployment runs on the real clock (`SystemClock`), so leases
run out as they would in production, and the worker thread fires due Durable Object alarms
every `ALARM_TICK_S` (workerd fires them by itself).

`Loopback(folder, db=database)` is the PostgreSQL storage mode (`STORAGE_MODE=postgres`, the
Hyperdrive binding naming a `tests.pg.Database`); the fixtures `edge_loopback` and
`edge_postgres_loopback` give one of each.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import pytest

from aidememo.domain.clock import SystemClock
from tests.edge.runtime import Runtime
from tests.edge.runtime.harness import BASE_URL
from tests.edge.runtime.hyperdrive import Hyperdrive
from tests.edge.runtime.websockets import ClientSocket

T = TypeVar("T")
ALARM_TICK_S = 0.2
SOCKET_POLL_S = 0.02
# `host` is kept: the client's own host, as a Worker sees it behind Cloudflare (the console's
# same-origin checks compare it with `Origin`, CONSOLE-3, CONSOLE-4).
_HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "upgrade", "content-length"}
)
_ANSWER_DROPPED = frozenset({"connection", "keep-alive", "transfer-encoding", "content-length"})


class Loopback:
    """One simulated deployment served on a loopback port (HTTP and WebSocket)."""

    def __init__(
        self,
        folder: Path,
        *,
        vars: dict[str, str] | None = None,
        db: Any = None,
        admin_token: str = "admin-token-for-tests",
    ) -> None:
        self.admin_token = admin_token
        self._worker = ThreadPoolExecutor(1, thread_name_prefix="edge-double")
        variables = dict(vars or {})
        hyperdrive = None
        if db is not None:  # the PostgreSQL storage mode, through the Hyperdrive binding
            variables["STORAGE_MODE"] = "postgres"
            hyperdrive = Hyperdrive(db.url)
        self.runtime: Runtime = self._call(
            lambda: Runtime(
                folder,
                SystemClock(),
                admin_token=admin_token,
                vars=variables,
                hyperdrive=hyperdrive,
                rate_limit=100_000,
            )
        )
        self._stopping = threading.Event()
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._sock.bind(("127.0.0.1", 0))
        self.port: int = self._sock.getsockname()[1]
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._ticker = threading.Thread(target=self._tick, name="edge-alarms", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -- the double's thread --------------------------------------------------------------

    def _call(self, fn: Callable[[], T]) -> T:
        """Run `fn` on the double's one thread and wait for it."""
        return self._worker.submit(fn).result()

    async def _acall(self, fn: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._worker, fn)

    def _tick(self) -> None:
        while not self._stopping.wait(ALARM_TICK_S):
            try:
                self._call(self.runtime.fire_alarms)
            except RuntimeError:  # the worker shut down under us: stopping
                return

    # -- the ASGI app ---------------------------------------------------------------------

    async def _app(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            await self._http(scope, receive, send)
        elif scope["type"] == "websocket":
            await self._websocket(scope, receive, send)

    @staticmethod
    def _target(scope: dict[str, Any]) -> tuple[str, dict[str, str]]:
        path = scope.get("raw_path") or scope["path"].encode()
        url = BASE_URL + path.decode("latin-1")
        if scope.get("query_string"):
            url += "?" + scope["query_string"].decode("latin-1")
        headers: dict[str, str] = {}
        for raw_name, raw_value in scope["headers"]:
            name = raw_name.decode("latin-1").lower()
            if name in _HOP_BY_HOP or name.startswith("sec-websocket"):
                continue
            value = raw_value.decode("latin-1")
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        return url, headers

    async def _http(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        url, headers = self._target(scope)
        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        if body:
            headers["content-length"] = str(len(body))
        method = scope["method"]
        status, answer_headers, data = await self._acall(
            lambda: self.runtime.fetch(method, url, headers, body)
        )
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (k.encode("latin-1"), v.encode("latin-1"))
                    for k, v in answer_headers.items()
                    if k.lower() not in _ANSWER_DROPPED
                ]
                + [(b"content-length", str(len(data)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": data})

    async def _websocket(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        url, headers = self._target(scope)
        await receive()  # websocket.connect
        status, answer_headers, body, client = await self._acall(
            lambda: self.runtime.connect(url, headers)
        )
        if status != 101 or client is None:
            await send(
                {
                    "type": "websocket.http.response.start",
                    "status": status,
                    "headers": [
                        (k.encode("latin-1"), v.encode("latin-1"))
                        for k, v in answer_headers.items()
                        if k.lower() not in _ANSWER_DROPPED
                    ],
                }
            )
            await send({"type": "websocket.http.response.body", "body": body or b""})
            return
        await send({"type": "websocket.accept"})
        await self._bridge(client, receive, send)

    async def _bridge(self, client: ClientSocket, receive: Any, send: Any) -> None:
        """Forward the object's messages and close to the client, and the client's to it."""
        incoming = asyncio.ensure_future(receive())
        try:
            while True:
                texts = await self._acall(lambda: _take(client))
                for text in texts:
                    await send({"type": "websocket.send", "text": text})
                if client.closed:
                    await send(
                        {
                            "type": "websocket.close",
                            "code": client.close_code,
                            "reason": client.close_reason,
                        }
                    )
                    return
                done, _ = await asyncio.wait({incoming}, timeout=SOCKET_POLL_S)
                if not done:
                    continue
                message = incoming.result()
                if message["type"] == "websocket.disconnect":
                    code = message.get("code", 1000)
                    await self._acall(partial(client.close, 1000 if code == 1005 else code))
                    return
                text = message.get("text")
                if text is not None:
                    await self._acall(partial(client.send, text))
                incoming = asyncio.ensure_future(receive())
        finally:
            if not incoming.done():
                incoming.cancel()

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> Loopback:
        import uvicorn

        from origin.server import ws_protocol

        config = uvicorn.Config(
            self._app,
            interface="asgi3",
            ws=ws_protocol(),  # the WebSocket protocol `aidememo serve` runs on
            log_level="warning",
            access_log=False,
            lifespan="off",
            ws_ping_interval=None,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=lambda: asyncio.run(self._server.serve(sockets=[self._sock])),
            name="edge-loopback",
            daemon=True,
        )
        self._thread.start()
        deadline = time.monotonic() + 15
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the loopback server did not start")
            time.sleep(0.005)
        self._ticker.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._ticker.is_alive():
            self._ticker.join(timeout=5)
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(timeout=15)
        self._sock.close()
        try:
            self._call(self.runtime.close)
        finally:
            self._worker.shutdown(wait=True)

    def __enter__(self) -> Loopback:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _take(client: ClientSocket) -> list[str]:
    texts = list(client.inbox)
    client.inbox.clear()
    return texts


@pytest.fixture
def edge_loopback(tmp_path: Path) -> Iterator[Loopback]:
    """The edge double (Durable Object storage) served on a loopback port."""
    with Loopback(tmp_path / "edge-loopback") as served:
        yield served


@pytest.fixture
def edge_postgres_loopback(tmp_path: Path) -> Iterator[Loopback]:
    """The edge double in PostgreSQL storage mode (through PgBouncer in transaction pool mode,
    as Hyperdrive pools) served on a loopback port; skipped without the test cluster."""
    from tests import pg

    db = pg.create_database(pooled=True)
    try:
        with Loopback(tmp_path / "edge-pg-loopback", db=db) as served:
            yield served
    finally:
        db.drop()
