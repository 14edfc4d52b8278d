"""A thin ASGI 3 adapter around the core's framework-free `dispatch(request) -> response`.

The adapter only translates; every decision about a request (routing, limits, auth, errors)
lives in `aidememo.http`, so the origin and the edge answer identically. What it does:

- Reads the body, but never more than the route's limit (`HttpApp.body_limit`: 1 MiB, or
  256 MiB for archive imports): a `Content-Length` above the limit is refused without
  reading, and a streamed body is dropped as soon as it passes the limit. Either way the
  core sees `Request.body_too_large=True` and answers 413, and the response closes the
  connection so the rest of the body is never received.
- Lower-cases header names and joins repeated headers with ", "; passes the raw query string.
- Assigns a request id: the incoming `x-request-id` when it is a valid identifier (ID-1),
  otherwise 16 random hex characters; it is echoed in the `x-request-id` response header and
  in the access log line.
- Logs one access line per request on the `aidememo.access` logger: request id, method, path
  (never the query string), status and duration. Headers are never logged, so neither is the
  `Authorization` bearer token. The record is an `origin.logsink.AccessRecord` handed to the
  logger directly (no caller lookup, no `LogRecord.__init__`); under `origin.server` a
  writer thread formats and writes the lines in batches (`origin.logsink`).
- Offloaded requests (see below) run in a pool of `threads` threads of their own when given
  (`origin.server` gives 64), so that many writers can wait in one SQLite group commit.
- Answers the ASGI `lifespan` protocol; `on_shutdown` (closing the store) runs after the server
  has finished its in-flight requests.

Inline or worker thread: measured, not guessed. `dispatch` is synchronous, and a SQLite
`synchronous=FULL` commit waits for fsync, so it could block the event loop. Three modes exist
(`dispatch_mode`): `inline` (every request on the loop), `thread` (every request in the loop's
default thread pool) and `writes` (GET and HEAD inline, other methods in the pool). Measured on
this shared 2-core machine, uvicorn 0.54 with uvloop and httptools, one process, `wrk -t2 -c32`:

1. A stand-in dispatch (decode a 200-byte JSON body, one INSERT, commit; WAL, FULL) while a raw
   commit cost 0.47 ms, three rounds of 5-8 s:

       POST inline  1,200-1,800 req/s  p50 16-21 ms  p99 75-880 ms
       POST thread  1,020-1,070 req/s  p50 26-29 ms  p99 64-90 ms
       GET  inline  6,300-7,000 req/s  p50 4.5-5 ms  p99 9-10 ms
       GET  thread  2,900-3,100 req/s  p50 10-11 ms  p99 18-25 ms

2. The real `HttpApp` through `aidememo serve` with its access log (POST session creates with
   unique ids, GET identity), three rounds while other jobs loaded the machine and a raw commit
   cost 2-5 ms:

       POST inline     90-165 req/s  p50 125-182 ms  p99 1.2-1.4 s
       POST thread    394-483 req/s  p50 64-72 ms    p99 122-317 ms
       POST writes    356-450 req/s  p50 62-77 ms    p99 137-621 ms
       GET  inline    632-1,330 req/s                p99 384-970 ms
       GET  thread    645-1,370 req/s                p99 82-426 ms
       GET  writes  1,673-1,960 req/s  p50 15 ms     p99 141-197 ms

   (GET runs inline in both `inline` and `writes`; their spread is the noise of the loaded
   machine. The real app on a quiet machine is `scripts/bench_http.py`'s job.)

A thread hop costs more than a cheap fsync hides, so with fast commits inline POST wins by up
to 1.7x; but when a commit is slow, a write on the loop stalls every connection, while in a
worker thread the fsync (which releases the GIL) overlaps the next requests' parsing,
authentication and encoding, and POST throughput triples. Reads gain nothing from a thread:
inline reads are 1.5-2.2x faster. The default is therefore `writes`: reads inline, commands in
the pool. Its worst case (fast disk) costs a fraction of the POST rate; inline's worst case
(slow disk) costs two thirds of it and seconds of tail latency for every connection.

The hot path, measured with `scripts/bench_http.py` (same machine, loaded by other jobs: the
hello baseline itself swung from 8,500 to 15,000 req/s, so ratios to it are noise here). Before
is `logger.info` to a `StreamHandler` on the loop and the loop's default pool (6 threads);
after is the template record, the batching writer thread, 64 pool threads and no route
lookup for bodiless requests. Three alternating full runs, medians:

                    before                          after
    POST facts      423 req/s  p50 74 ms  p99 124   656 req/s  p50 48 ms  p99 81
    GET resource    2,660 req/s          p99 32     2,762 req/s          p99 23
    adapter hello   5,271 req/s                     6,219 req/s
    handoff cycle   p50 14.5 ms                     p50 11.7 ms

Server CPU per request (user + system, all threads, interleaved A/B runs, steadier than
req/s): adapter hello 171 -> 125 us, GET resource 357 -> 305-345 us, POST facts 1,736 ->
1,366-1,406 us. Group commit now carries about 15 writers per fsync under this load (the
default pool allowed at most 5); 32, 64 or 128 threads made no difference at 32 connections.
`sys.setswitchinterval` (0.2-50 ms) changed nothing measurable. What is left is the core's:
in-process, `HttpApp.dispatch` alone costs about 150 us per GET resource (a third of it in
`bearer_digest`) and 675 us of CPU per POST fact with `synchronous=OFF`, and under 32
writers a group-commit callback takes about three times as long as alone (GIL contention).
"""

from __future__ import annotations

import json
import logging
import os
import time
from asyncio import get_running_loop
from collections.abc import Awaitable, Callable, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from aidememo.domain.errors import STORAGE_RETRY_AFTER_S, ErrorCode, fail
from aidememo.domain.ids import is_valid_id
from aidememo.http.types import Request, Response
from origin.logsink import access_record, record_template

AsgiScope = MutableMapping[str, Any]
AsgiMessage = MutableMapping[str, Any]
AsgiReceive = Callable[[], Awaitable[AsgiMessage]]
AsgiSend = Callable[[AsgiMessage], Awaitable[None]]
AsgiApp = Callable[[AsgiScope, AsgiReceive, AsgiSend], Awaitable[None]]

ACCESS_LOGGER = "aidememo.access"
ERROR_LOGGER = "aidememo.error"
REQUEST_ID_HEADER = "x-request-id"
ACCESS_FORMAT = "request_id=%s method=%s path=%s status=%d duration_ms=%.2f"
INFO = logging.INFO

_BODYLESS = frozenset({"GET", "HEAD", "OPTIONS", "DELETE"})
_READS = frozenset({"GET", "HEAD"})

DISPATCH_INLINE = "inline"
DISPATCH_THREAD = "thread"
DISPATCH_WRITES = "writes"
DISPATCH_MODES = frozenset({DISPATCH_INLINE, DISPATCH_THREAD, DISPATCH_WRITES})


class WebSocketHandler(Protocol):
    """What serves `websocket` scopes: `origin.live.LiveFeed` fits."""

    async def handle(self, scope: AsgiScope, receive: AsgiReceive, send: AsgiSend) -> None:
        """Serve one WebSocket from its connect to its close."""
        ...


class Dispatcher(Protocol):
    """What the adapter needs from the core: `aidememo.http.app.HttpApp` fits."""

    def dispatch(self, request: Request) -> Response:
        """Answer one request; never raises."""
        ...

    def body_limit(self, method: str, path: str) -> int:
        """The largest body the route accepts (1 MiB, or more for archive imports)."""
        ...


def new_request_id() -> str:
    """16 random hex characters."""
    return os.urandom(8).hex()


def _log_safe(text: str) -> str:
    """The text as is when it is plain printable ASCII without spaces, else JSON-quoted."""
    if text.isascii() and text.isprintable() and " " not in text:
        return text
    return json.dumps(text)


def _internal_error(request_id: str) -> Response:
    """What a dispatch bug turns into: a retryable 503 whose message leaks nothing."""
    body = json.dumps(fail(ErrorCode.STORAGE_FAILURE, "dispatch raised").to_json()).encode()
    return Response(
        503,
        [("content-type", "application/json"), ("retry-after", str(STORAGE_RETRY_AFTER_S))],
        body,
    )


def create_asgi_app(
    http_app: Dispatcher,
    *,
    dispatch_mode: str = DISPATCH_WRITES,
    on_startup: Callable[[], None] | None = None,
    on_shutdown: Callable[[], None] | None = None,
    access_logger: logging.Logger | None = None,
    websocket: WebSocketHandler | None = None,
    threads: int | None = None,
) -> AsgiApp:
    """Wrap `http_app` in an ASGI 3 application.

    `dispatch_mode` is `inline` (on the event loop), `thread` (every request in the loop's
    default thread pool) or `writes` (GET and HEAD inline, every other method in the pool);
    the module docstring has the measurements behind the default. `websocket` serves the
    live change feed (`origin.live.LiveFeed`); without it every WebSocket is refused.
    `threads` gives the offloaded requests a pool of their own with that many threads (shut
    down at the lifespan shutdown, before `on_shutdown`); None uses the loop's default pool.
    """
    if dispatch_mode not in DISPATCH_MODES:
        raise ValueError(f"dispatch_mode must be one of {sorted(DISPATCH_MODES)}")
    offload_all = dispatch_mode == DISPATCH_THREAD
    offload_writes = dispatch_mode == DISPATCH_WRITES
    if threads is not None and threads < 1:
        raise ValueError("threads must be at least 1")
    own_pool: list[ThreadPoolExecutor] = []

    def pool() -> ThreadPoolExecutor | None:
        """The pool offloaded requests run in: this app's own (made on first use) or None,
        the loop's default."""
        if threads is None:
            return None
        if not own_pool:
            own_pool.append(ThreadPoolExecutor(threads, thread_name_prefix="aidememo-dispatch"))
        return own_pool[0]

    def stop_pool() -> None:
        while own_pool:
            own_pool.pop().shutdown(wait=True)

    access = access_logger if access_logger is not None else logging.getLogger(ACCESS_LOGGER)
    errors = logging.getLogger(ERROR_LOGGER)
    dispatch = http_app.dispatch
    body_limit = http_app.body_limit
    perf = time.perf_counter
    access_template = record_template(access, ACCESS_FORMAT, "handle_http")

    async def read_body(
        receive: AsgiReceive, headers: dict[str, str], method: str, limit: int
    ) -> tuple[bytes, bool] | None:
        """`(body, too_large)`, or None when the client went away."""
        length = headers.get("content-length")
        if length is not None:
            if length.isdigit() and int(length) > limit:
                return b"", True
        elif method in _BODYLESS and "transfer-encoding" not in headers:
            return b"", False
        message = await receive()
        if message["type"] != "http.request":
            return None
        body: bytes = message.get("body", b"")
        if not message.get("more_body", False):
            return (b"", True) if len(body) > limit else (body, False)
        chunks = [body]
        size = len(body)
        while True:
            if size > limit:
                return b"", True
            message = await receive()
            if message["type"] != "http.request":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        if size > limit:
            return b"", True
        return b"".join(chunks), False

    async def handle_http(scope: AsgiScope, receive: AsgiReceive, send: AsgiSend) -> None:
        started = perf()
        headers: dict[str, str] = {}
        for raw_name, raw_value in scope["headers"]:
            name = raw_name.decode("latin-1").lower()
            if name in headers:
                headers[name] = f"{headers[name]}, {raw_value.decode('latin-1')}"
            else:
                headers[name] = raw_value.decode("latin-1")
        incoming_id = headers.get(REQUEST_ID_HEADER)
        request_id = (
            incoming_id
            if incoming_id is not None and is_valid_id(incoming_id)
            else new_request_id()
        )
        method: str = scope["method"]
        path: str = scope["path"]
        bodyless = method in _BODYLESS and "content-length" not in headers
        if bodyless and "transfer-encoding" not in headers:
            body, too_large = b"", False  # no body: no route lookup for its limit either
        else:
            read = await read_body(receive, headers, method, body_limit(method, path))
            if read is None:
                return  # the client disconnected before sending its whole body
            body, too_large = read
        request = Request(
            method=method,
            path=path,
            query=scope.get("query_string", b"").decode("latin-1"),
            headers=headers,
            body=body,
            body_too_large=too_large,
            request_id=request_id,
        )
        try:
            if offload_all or (offload_writes and method not in _READS):
                response = await get_running_loop().run_in_executor(pool(), dispatch, request)
            else:
                response = dispatch(request)
        except Exception:
            errors.exception("dispatch raised; request_id=%s", request_id)
            response = _internal_error(request_id)
        out: list[tuple[bytes, bytes]] = []
        has_length = has_id = False
        for name, value in response.headers:
            if name == "content-length":
                has_length = True
            elif name == REQUEST_ID_HEADER:
                has_id = True
            out.append((name.encode("latin-1"), value.encode("latin-1")))
        if not has_length:
            out.append((b"content-length", str(len(response.body)).encode()))
        if not has_id:
            out.append((b"x-request-id", request_id.encode()))
        if too_large:
            # The unread rest of the body would otherwise be received and discarded.
            out.append((b"connection", b"close"))
        await send({"type": "http.response.start", "status": response.status, "headers": out})
        await send({"type": "http.response.body", "body": response.body})
        if access.isEnabledFor(INFO):
            access.handle(
                access_record(
                    access_template,
                    (
                        request_id,
                        _log_safe(method),
                        _log_safe(path),
                        response.status,
                        (perf() - started) * 1000.0,
                    ),
                )
            )

    async def handle_lifespan(receive: AsgiReceive, send: AsgiSend) -> None:
        while True:
            message = await receive()
            kind = message["type"]
            if kind == "lifespan.startup":
                try:
                    if on_startup is not None:
                        on_startup()
                except Exception as exc:
                    errors.exception("startup failed")
                    await send({"type": "lifespan.startup.failed", "message": str(exc)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif kind == "lifespan.shutdown":
                try:
                    stop_pool()  # idle by now: the server finished its requests first
                    if on_shutdown is not None:
                        on_shutdown()
                except Exception as exc:
                    errors.exception("shutdown failed")
                    await send({"type": "lifespan.shutdown.failed", "message": str(exc)})
                    return
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def app(scope: AsgiScope, receive: AsgiReceive, send: AsgiSend) -> None:
        kind = scope["type"]
        if kind == "http":
            await handle_http(scope, receive, send)
        elif kind == "lifespan":
            await handle_lifespan(receive, send)
        elif kind == "websocket":
            if websocket is not None:
                await websocket.handle(scope, receive, send)
            else:  # no live feed here: closing before accept answers 403
                await send({"type": "websocket.close", "code": 1008})

    return app
