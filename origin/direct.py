"""The origin's direct request path: an ordinary HTTP request answered without an ASGI cycle.

Under uvicorn every request costs a `RequestResponseCycle`, an asyncio task, the ASGI scope
and `send`/`receive` messages and the adapter's coroutine, several times what the core's own
dispatch of a small read costs. The adapter built by `origin.asgi.create_asgi_app` therefore
carries a `DirectEntry` (its `direct` attribute), and the transport
(`origin.transport.LimitedHttpProtocol`) hands it the requests it can answer without ASGI: a
plain request whose head and whole body arrived in the same read, with no earlier request of
the connection still unanswered (SPEC.md HTTP-9). Everything else takes the ASGI path.

On the direct path the adapter's rules hold unchanged: the core's pipeline decides everything;
headers are folded and the request id chosen as `origin.asgi_common` does; the request runs in
the lane `origin.lanes` names, through the same scheduler as the adapter's; the access line is
`origin.accesslog.ACCESS`'s. `encode` is the origin's one writer of a response head (the
direct answers' and the transport's refusals'): the head uvicorn's `RequestResponseCycle`
writes for the adapter's messages, the same status line, `date` header, header validation,
`content-length`, `x-request-id` and `connection: close` rules. A `Response.stream` (an
artifact download) is sent by an ASGI cycle of its own (`DirectEntry.stream`), chunk by chunk
with flow control, as the adapter sends it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from functools import partial

from aidememo.http.body import EMPTY, Body
from aidememo.http.types import Request, Response
from origin.accesslog import ACCESS
from origin.asgi_common import (
    REQUEST_ID_HEADER,
    AsgiSend,
    bodyless,
    out_headers,
    request_id,
    send_stream,
)
from origin.lanes import Lane, Scheduler
from origin.uvicorn_parts import HEADER_RE, HEADER_VALUE_RE, STATUS_LINE

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
        self.bodyless = bodyless(method, headers)
        self.keep_alive = keep_alive
        self.body = bytearray()
        self.more_body = True
        self.response_started = False
        self.response_complete = False
        self.disconnected = False
        self.message_event = NO_EVENT
        self.started = 0.0  # when the whole request was here (the transport stamps it)


Respond = Callable[[DirectCycle, str, Response], None]
"""Where a direct request's answer goes: the transport's `_respond`."""


class DirectEntry:
    """The adapter's entry for the direct path: `place` names a complete request's lane, `run`
    answers it there."""

    __slots__ = ("scheduler",)

    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler

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

    def place(self, request: Request) -> Lane:
        """The lane of a complete request (`origin.lanes`)."""
        return self.scheduler.place(request, True)

    def run(
        self,
        loop: asyncio.AbstractEventLoop,
        cycle: DirectCycle,
        request: Request,
        where: Lane,
        respond: Respond,
    ) -> None:
        """Answer `cycle`'s `request` in lane `where`: `respond(cycle, request_id, response)`
        is called on the loop, now (the loop lane) or once its lane answered it."""
        if where is Lane.LOOP:  # the scheduler's loop lane, without a callback to make
            respond(cycle, request.request_id, self.scheduler.call(request))
        else:
            self.scheduler.run(loop, request, where, partial(respond, cycle, request.request_id))

    def log(self, rid: str, cycle: DirectCycle, status: int) -> None:
        """The request's access line."""
        ACCESS.request(rid, cycle.method, cycle.path, status, time.perf_counter() - cycle.started)

    async def stream(
        self, send: AsgiSend, cycle: DirectCycle, rid: str, response: Response
    ) -> None:
        """Send a streamed response through an ASGI `send`, then log its line."""
        headers = out_headers(response, rid, True)
        await send({"type": "http.response.start", "status": response.status, "headers": headers})
        assert response.stream is not None
        await send_stream(response.stream, send, self.scheduler.pool())
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
