"""The origin's direct request path: an ordinary HTTP request answered without an ASGI cycle.

Under uvicorn every request costs a `RequestResponseCycle`, an asyncio task, the ASGI scope
and `send`/`receive` messages and the adapter's coroutine, several times what the core's own
dispatch of a small read costs (docs/bench-notes.md has the measurements). The adapter built
by `origin.asgi.create_asgi_app` therefore carries a `DirectEntry` (its `direct` attribute),
and the transport (`origin.transport.LimitedHttpProtocol`) hands it the requests it can answer
without ASGI: a plain request whose head and whole body arrived in the same read, with no
earlier request of the connection still unanswered. Everything else (a body still arriving, a
`Content-Length` above the smallest route limit, `Expect: 100-continue`, an upgrade, a
connection whose writes are paused, an application without a `DirectEntry`) takes the ASGI
path unchanged.

On the direct path the adapter's rules hold unchanged: the core's pipeline decides everything;
headers are folded as `origin.asgi_common.fold_headers`; the request id is the incoming valid
`x-request-id` or a new one, echoed; the body is the empty body for a bodiless method without
a declared body, else the bytes received; `dispatch_mode` decides whether `dispatch` runs on
the event loop or in the adapter's pool (the answer is then written from the loop, through
`call_soon_threadsafe`), except a request the adapter's write queue takes (a command the
write committer answers with its batch, `origin.committer`, HTTP-10; a request the store pool
answers, `origin.store_pool`, HTTP-12); one `aidememo.access` line is logged after the answer
is written, from the same record template. `encode` writes the head uvicorn's `RequestResponseCycle`
writes for the adapter's messages: the same status line, `date` header, header validation,
`content-length`, `x-request-id` and `connection: close` rules. A `Response.stream` (an
artifact download) is sent by an ASGI cycle of its own (`DirectEntry.stream`), chunk by chunk
with flow control, as the adapter sends it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial

from uvicorn.protocols.http.httptools_impl import HEADER_RE, HEADER_VALUE_RE, STATUS_LINE

from aidememo.http.body import EMPTY, Body
from aidememo.http.types import Request, Response
from origin.accesslog import AccessLog
from origin.asgi_common import (
    REQUEST_ID_HEADER,
    AsgiSend,
    internal_error,
    log_safe,
    off_loop_read,
    out_headers,
    request_id,
    send_stream,
)
from origin.write_queue import WriteQueue

_READS = frozenset({"GET", "HEAD"})
_BODYLESS = frozenset({"GET", "HEAD", "OPTIONS", "DELETE"})
_NAMES: dict[str, bytes] = {}
"""Header names already encoded and checked: a response's names come from a small set."""
_MAX_NAMES = 256


class _NoEvent:
    """What uvicorn sets on a cycle when the connection changes; a direct request waits on
    nothing."""

    __slots__ = ()

    def set(self) -> None:
        return None


NO_EVENT = _NoEvent()


class DirectCycle:
    """One request on the direct path, standing where the transport and uvicorn expect a
    `RequestResponseCycle` (`protocol.cycle`): `response_complete` tells a pipelined request
    to wait and graceful shutdown that a response is still due; `keep_alive` is cleared by a
    shutdown or a timer; `disconnected` is set when the connection is lost; `body` collects
    the body as the parser delivers it."""

    __slots__ = (
        "body",
        "bodyless",
        "disconnected",
        "headers",
        "keep_alive",
        "message_event",
        "method",
        "more_body",
        "path",
        "query",
        "response_complete",
        "response_started",
        "started",
    )

    def __init__(
        self,
        method: str,
        path: str,
        query: bytes,
        headers: dict[str, str],
        keep_alive: bool,
    ) -> None:
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.bodyless = (
            method in _BODYLESS
            and "content-length" not in headers
            and "transfer-encoding" not in headers
        )
        self.keep_alive = keep_alive
        self.body = bytearray()
        self.more_body = True
        self.response_started = False
        self.response_complete = False
        self.disconnected = False
        self.message_event = NO_EVENT
        self.started = 0.0  # when the whole request was here (the transport stamps it)


Respond = Callable[[DirectCycle, str, Response], None]


class DirectEntry:
    """The adapter's entry for the direct path: `run` answers one complete request."""

    __slots__ = (
        "_access",
        "_dispatch",
        "_errors",
        "_offload_all",
        "_offload_writes",
        "_pool",
        "_slow_reads",
        "_writes",
    )

    def __init__(
        self,
        dispatch: Callable[[Request], Response],
        *,
        offload_all: bool,
        offload_writes: bool,
        pool: Callable[[], ThreadPoolExecutor | None],
        access: AccessLog,
        slow_reads: Callable[[], ThreadPoolExecutor] | None = None,
        errors: logging.Logger,
        writes: WriteQueue | None = None,
    ) -> None:
        self._dispatch = dispatch
        self._writes = writes
        self._offload_all = offload_all
        self._offload_writes = offload_writes
        self._pool = pool
        self._slow_reads = slow_reads
        self._access = access
        self._errors = errors

    def on_loop(self, method: str, path: str) -> bool:
        """True when a request of `method` to `path` is answered on the event loop (`run`
        answers it before it returns), not in the pool or the write queue."""
        return not (
            self._offload_all
            or (self._offload_writes and method not in _READS)
            or off_loop_read(method, path)
        )

    def run(self, loop: asyncio.AbstractEventLoop, cycle: DirectCycle, respond: Respond) -> None:
        """Answer `cycle`: `respond(cycle, request_id, response)` is called on the loop, now
        (a read under `writes`, everything under `inline`) or once the pool has dispatched, or
        once the write queue it `accepts` (the write committer, the store pool) answered it."""
        method = cycle.method
        if self._slow_reads is not None and off_loop_read(method, cycle.path):
            self._slow_reads().submit(self._in_thread, loop, cycle, respond)
            return
        if not self.on_loop(method, cycle.path):
            writes = self._writes
            if writes is not None and writes.accepts(method, cycle.path):
                request = self.request(cycle)
                writes.submit(loop, request, partial(respond, cycle, request.request_id))
                return
            pool = self._pool()
            if pool is None:
                loop.run_in_executor(None, self._in_thread, loop, cycle, respond)
            else:
                pool.submit(self._in_thread, loop, cycle, respond)
        else:
            rid, response = self.answer(cycle)
            respond(cycle, rid, response)

    def _in_thread(
        self, loop: asyncio.AbstractEventLoop, cycle: DirectCycle, respond: Respond
    ) -> None:
        rid, response = self.answer(cycle)
        try:
            loop.call_soon_threadsafe(respond, cycle, rid, response)
        except RuntimeError:  # the loop is closed: the server is gone, nobody to answer
            pass

    def request(self, cycle: DirectCycle) -> Request:
        """The core's request of `cycle`, with its request id."""
        headers = cycle.headers
        return Request(
            cycle.method,
            cycle.path,
            cycle.query.decode("latin-1"),
            headers,
            EMPTY if cycle.bodyless else Body.of(bytes(cycle.body)),
            request_id(headers),
        )

    def answer(self, cycle: DirectCycle) -> tuple[str, Response]:
        """The core's response to `cycle` and its request id; a dispatch bug is the
        adapter's retryable 503."""
        request = self.request(cycle)
        rid = request.request_id
        try:
            return rid, self._dispatch(request)
        except Exception:
            self._errors.exception("dispatch raised; request_id=%s", rid)
            return rid, internal_error(rid)

    def log(self, rid: str, cycle: DirectCycle, status: int) -> None:
        """The request's `aidememo.access` line, as the adapter logs it."""
        access = self._access
        if access.enabled():
            elapsed = (time.perf_counter() - cycle.started) * 1000.0
            access.write((rid, log_safe(cycle.method), log_safe(cycle.path), status, elapsed))

    async def stream(
        self, send: AsgiSend, cycle: DirectCycle, rid: str, response: Response
    ) -> None:
        """Send a streamed response through an ASGI `send`, then log its line."""
        headers = out_headers(response, rid, True)
        await send({"type": "http.response.start", "status": response.status, "headers": headers})
        assert response.stream is not None
        await send_stream(response.stream, send, self._pool())
        self.log(rid, cycle, response.status)


def _name(name: str) -> bytes:
    raw = _NAMES.get(name)
    if raw is None:
        raw = name.encode("latin-1").lower()
        if HEADER_RE.search(raw):
            raise RuntimeError("Invalid HTTP header name.")
        if len(_NAMES) < _MAX_NAMES:
            _NAMES[name] = raw
    return raw


def encode(
    response: Response,
    rid: str,
    default_headers: list[tuple[bytes, bytes]],
    keep_alive: bool,
    head_only: bool,
) -> tuple[bytes, bool]:
    """The response head uvicorn writes for the adapter's `http.response.start` of a whole
    (not streamed) `response`, and whether the connection stays open after it. Raises
    RuntimeError where uvicorn's cycle would: an invalid header, a body whose length is not
    the declared `content-length`."""
    parts = [STATUS_LINE[response.status]]
    for raw_name, raw_value in default_headers:
        parts += (raw_name, b": ", raw_value, b"\r\n")
    length = -1
    has_id = has_close = False
    for name, value in response.headers:
        raw_name = _name(name)
        raw_value = value.encode("latin-1")
        if HEADER_VALUE_RE.search(raw_value):
            raise RuntimeError("Invalid HTTP header value.")
        if raw_name == b"content-length":
            if length < 0:
                length = int(raw_value)
        elif name == REQUEST_ID_HEADER:
            has_id = True
        elif raw_name == b"connection":
            if b"close" in [token.lower().strip() for token in raw_value.split(b",")]:
                keep_alive = False
                has_close = True
        parts += (raw_name, b": ", raw_value, b"\r\n")
    if length < 0:
        length = len(response.body)
        parts += (b"content-length: ", str(length).encode(), b"\r\n")
    elif length != len(response.body) and not head_only:
        raise RuntimeError("Response content length differs from Content-Length")
    if not has_id:
        parts += (b"x-request-id: ", rid.encode(), b"\r\n")
    if not keep_alive and not has_close:
        parts.append(b"connection: close\r\n")
    parts.append(b"\r\n")
    return b"".join(parts), keep_alive
