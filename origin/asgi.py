"""A thin ASGI 3 adapter around the core's framework-free `dispatch(request) -> response`.

The adapter only translates; every decision about a request (routing, limits, auth, errors)
is the core's request pipeline (`aidememo.http.pipeline`), so the origin and the edge answer
identically. What it does:

- Hands the core the body as a `Body` (`aidememo.http.body`) without reading ahead of the
  pipeline: a bodiless request gets the empty body; a `Content-Length` above 1 MiB (the
  smallest route limit) gets a stream with nothing read yet, so stage one can refuse it
  unread; otherwise the first ASGI message is received, and a body that is whole in it is
  handed over whole. A body still arriving is an `AsgiBody`: the dispatch, always in a
  worker thread then, receives each further chunk from the event loop
  (`asyncio.run_coroutine_threadsafe`) only when the core reads it, after stage one passed,
  counted against the route's limit. A response to a request whose body was not read to
  its end closes the connection, so the rest is never received.
- Lower-cases header names and joins repeated headers with ", "; passes the raw query string;
  assigns a request id (the incoming `x-request-id` when it is a valid identifier, ID-1,
  otherwise 16 random hex characters), echoed in `x-request-id` and the access log line
  (`origin.asgi_common`, shared with `origin.live`).
- Sends a `Response.stream` (an artifact download) chunk by chunk, each read in a worker
  thread.
- Logs one access line per request on the `aidememo.access` logger: request id, method, path
  (never the query string), status and duration; never headers, so never the bearer token.
  The record is an `origin.logsink.AccessRecord` handed to the logger directly; under
  `origin.server` a writer thread formats and writes the lines in batches.
- Answers the ASGI `lifespan` protocol; `on_shutdown` (closing the store) runs after the server
  has finished its in-flight requests.

Where `dispatch` runs (`dispatch_mode`): `inline` (on the event loop), `thread` (in the pool)
or `writes`, the default: GET and HEAD inline, every other method in the pool (`threads`
threads of the adapter's own when given; `origin.server` gives 64, so many writers can wait
in one SQLite group commit). `dispatch` is synchronous and a `synchronous=FULL` commit waits
for fsync: on the loop, one slow commit would stall every connection, while in a thread the
fsync releases the GIL and overlaps the next requests' work; reads gain nothing from the
thread hop. The measurements behind this are in `docs/bench-notes.md`. A request that would
go to the pool with its whole body, given a write queue (`writes`) that `accepts` it, goes to
the queue instead: the write committer (`origin.committer`, HTTP-10) answers a command with its
batch, one commit for many; the store pool (`origin.store_pool`, HTTP-12) answers a request
whose only I/O is the store's on as many threads as the store has connections.
"""

from __future__ import annotations

import asyncio
import logging
import time
from asyncio import get_running_loop
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

from aidememo.domain.errors import ErrorCode, fail
from aidememo.domain.limits import MAX_REQUEST_BODY_BYTES
from aidememo.http.body import EMPTY, Body, StreamBody, declared_length
from aidememo.http.types import Request, Response
from origin.accesslog import AccessLog
from origin.asgi_common import (
    OFF_LOOP_READ_THREADS,
    AsgiApp,
    AsgiMessage,
    AsgiReceive,
    AsgiScope,
    AsgiSend,
    fold_headers,
    internal_error,
    log_safe,
    new_request_id,
    off_loop_read,
    out_headers,
    request_id,
    send_stream,
)
from origin.direct import DirectEntry
from origin.write_queue import WriteQueue

__all__ = ["AsgiApp", "AsgiBody", "create_asgi_app", "new_request_id"]

ACCESS_LOGGER = "aidememo.access"
ERROR_LOGGER = "aidememo.error"
ACCESS_FORMAT = "request_id=%s method=%s path=%s status=%d duration_ms=%.2f"

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


class AsgiBody(StreamBody):
    """A body still arriving over ASGI, read from a worker thread: each chunk after `first` is
    received on the event loop when the core asks for it. When the client goes away the read
    raises and `aborted` is set, and the adapter sends nothing."""

    __slots__ = ("aborted",)

    def __init__(
        self,
        receive: AsgiReceive,
        loop: asyncio.AbstractEventLoop,
        length: int | None,
        first: bytes | None,
    ) -> None:
        super().__init__(self._receive(receive, loop, first), length)
        self.aborted = False

    def _receive(
        self, receive: AsgiReceive, loop: asyncio.AbstractEventLoop, first: bytes | None
    ) -> Iterator[bytes]:
        async def next_message() -> AsgiMessage:
            return await receive()

        if first is not None:
            yield first
        while True:
            message = asyncio.run_coroutine_threadsafe(next_message(), loop).result()
            if message["type"] != "http.request":
                self.aborted = True
                raise fail(ErrorCode.INVALID_COMMAND, "the client went away mid-body")
            yield message.get("body", b"")
            if not message.get("more_body", False):
                return


_GONE = Body.unread(None)  # what `_first` answers when the client went away


async def _first(receive: AsgiReceive, length: int | None) -> Body:
    """The body after its first ASGI message: whole when that message ends it, else an
    `AsgiBody` holding the first chunk; `_GONE` when the client disconnected."""
    message = await receive()
    if message["type"] != "http.request":
        return _GONE
    chunk: bytes = message.get("body", b"")
    if not message.get("more_body", False):
        return Body.of(chunk)
    return AsgiBody(receive, get_running_loop(), length, chunk)


def create_asgi_app(
    http_app: Dispatcher,
    *,
    dispatch_mode: str = DISPATCH_WRITES,
    on_startup: Callable[[], None] | None = None,
    on_shutdown: Callable[[], None] | None = None,
    access_logger: logging.Logger | None = None,
    websocket: WebSocketHandler | None = None,
    threads: int | None = None,
    direct: bool = True,
    writes: WriteQueue | None = None,
) -> AsgiApp:
    """Wrap `http_app` in an ASGI 3 application.

    `dispatch_mode` is `inline` (on the event loop), `thread` (every request in the loop's
    default thread pool) or `writes` (GET and HEAD inline, every other method in the pool);
    `docs/bench-notes.md` has the measurements behind the default. `websocket` serves the
    live change feed (`origin.live.LiveFeed`); without it every WebSocket is refused.
    `threads` gives the offloaded requests a pool of their own with that many threads (shut
    down at the lifespan shutdown, before `on_shutdown`); None uses the loop's default pool.
    `direct` gives the app its `direct` attribute, the `origin.direct.DirectEntry` the
    origin's transport answers ordinary requests through without ASGI; False: none, every
    request goes through ASGI. `writes` is the write queue the requests it `accepts`
    are handed to, on either path (stopped at the lifespan shutdown, before `on_shutdown`).
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

    read_pool: list[ThreadPoolExecutor] = []

    def slow_reads() -> ThreadPoolExecutor:
        """The few threads searches run in (SRCH-7): made on first use, so at most
        `OFF_LOOP_READ_THREADS` searches hold the interpreter at once, never the loop."""
        if not read_pool:
            read_pool.append(
                ThreadPoolExecutor(OFF_LOOP_READ_THREADS, thread_name_prefix="aidememo-search")
            )
        return read_pool[0]

    def stop_pool() -> None:
        if writes is not None:
            writes.stop()
        while own_pool:
            own_pool.pop().shutdown(wait=True)
        while read_pool:
            read_pool.pop().shutdown(wait=True)

    access = access_logger if access_logger is not None else logging.getLogger(ACCESS_LOGGER)
    errors = logging.getLogger(ERROR_LOGGER)
    dispatch = http_app.dispatch
    perf = time.perf_counter
    access_log = AccessLog(access, ACCESS_FORMAT, "handle_http")

    async def handle_http(scope: AsgiScope, receive: AsgiReceive, send: AsgiSend) -> None:
        started = perf()
        headers = fold_headers(scope["headers"])
        rid = request_id(headers)
        method: str = scope["method"]
        path: str = scope["path"]
        body: Body
        if "content-length" not in headers and "transfer-encoding" not in headers:
            # No body announced: a bodiless method reads nothing; any other gets one message.
            body = EMPTY if method in _BODYLESS else await _first(receive, None)
        else:
            length = declared_length(headers)
            if length is not None and length > MAX_REQUEST_BODY_BYTES:
                # Over the smallest route limit: stage one decides before anything is read.
                body = AsgiBody(receive, get_running_loop(), length, None)
            else:
                body = await _first(receive, length)
        if body is _GONE:
            return  # the client disconnected before sending its body
        # A body still arriving is read from a worker thread (the loop receives its chunks).
        streamed = type(body) is AsgiBody
        request = Request(
            method=method,
            path=path,
            query=scope.get("query_string", b"").decode("latin-1"),
            headers=headers,
            body=body,
            request_id=rid,
        )
        try:
            offload = offload_all or (offload_writes and method not in _READS)
            if off_loop_read(method, path):
                response = await get_running_loop().run_in_executor(slow_reads(), dispatch, request)
            elif writes is not None and not streamed and offload and writes.accepts(method, path):
                response = await _committed(writes, request)
            elif streamed or offload:
                response = await get_running_loop().run_in_executor(pool(), dispatch, request)
            else:
                response = dispatch(request)
        except Exception:
            errors.exception("dispatch raised; request_id=%s", rid)
            response = internal_error(rid)
        if type(body) is AsgiBody and body.aborted:
            return  # the client went away while its body was read
        await send(
            {
                "type": "http.response.start",
                "status": response.status,
                "headers": out_headers(response, rid, body.complete),
            }
        )
        if response.stream is None:
            await send({"type": "http.response.body", "body": response.body})
        else:
            await send_stream(response.stream, send, pool())
        if access_log.enabled():
            elapsed = (perf() - started) * 1000.0
            access_log.write((rid, log_safe(method), log_safe(path), response.status, elapsed))

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

    if direct:
        app.direct = DirectEntry(  # type: ignore[attr-defined]
            dispatch,
            offload_all=offload_all,
            offload_writes=offload_writes,
            pool=pool,
            slow_reads=slow_reads,
            access=access_log,
            errors=errors,
            writes=writes,
        )
    return app


async def _committed(writes: WriteQueue, request: Request) -> Response:
    """The answer the write queue gives `request` (the committer once its batch committed,
    the store pool once it was dispatched)."""
    answer: asyncio.Future[Response] = get_running_loop().create_future()

    def deliver(response: Response) -> None:
        if not answer.done():
            answer.set_result(response)

    writes.submit(get_running_loop(), request, deliver)
    return await answer
