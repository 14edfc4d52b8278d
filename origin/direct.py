"""The parts of one HTTP exchange at the origin's transport (`origin.transport`), the one
entry of HTTP requests (SPEC.md HTTP-9).

- `DirectCycle`: a request whose head and whole body came in one read, standing where uvicorn
  expects its `RequestResponseCycle`; `request()` is the core's `Request` of it.
- `ReceivedBody` and `first_body`: the body of any other request, received through a uvicorn
  cycle: whole when its first message ends it, else read from a pool thread chunk by chunk,
  each received on the event loop when the core asks for it.
- `encode`: the one writer of a response head (every answer's and the transport's refusals'),
  the head uvicorn's cycle writes for an ASGI `http.response.start`: the same status line,
  `date` header, header validation, `content-length`, `x-request-id` and `connection: close`
  rules.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

from aidememo.domain.errors import ErrorCode, fail
from aidememo.http.body import EMPTY, Body, StreamBody
from aidememo.http.types import Request, Response
from origin.asgi_common import REQUEST_ID_HEADER, AsgiMessage, AsgiReceive, bodyless, request_id
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
    """One request whose whole body came with its head, standing where the transport and
    uvicorn expect a `RequestResponseCycle` (`protocol.cycle`): `response_complete` tells a
    pipelined request to wait and graceful shutdown that a response is still due;
    `keep_alive` is cleared by a shutdown or a timer; `disconnected` is set when the
    connection is lost; `body` collects the body as the parser delivers it."""

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

    def request(self) -> Request:
        """The core's request of this cycle, with its request id."""
        headers = self.headers
        return Request(
            self.method,
            self.path,
            self.query.decode("latin-1"),
            headers,
            EMPTY if self.bodyless else Body.of(bytes(self.body)),
            request_id(headers),
        )


class ReceivedBody(StreamBody):
    """A body still arriving through a uvicorn cycle, read from a worker thread: each chunk
    after `first` is received on the event loop when the core asks for it. When the client
    goes away the read raises and `aborted` is set, and nothing is answered."""

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


GONE = Body.unread(None)
"""What `first_body` answers when the client went away."""


async def first_body(receive: AsgiReceive, length: int | None) -> Body:
    """The body after its first message: whole when that message ends it, else a
    `ReceivedBody` holding the first chunk; `GONE` when the client disconnected."""
    message = await receive()
    if message["type"] != "http.request":
        return GONE
    chunk: bytes = message.get("body", b"")
    if not message.get("more_body", False):
        return Body.of(chunk)
    return ReceivedBody(receive, asyncio.get_running_loop(), length, chunk)


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
    """The response head of `response`, and whether the connection stays open after it: the
    head uvicorn writes for an ASGI `http.response.start` (a stream without a declared length
    is sent chunked). Raises RuntimeError where uvicorn's cycle would: an invalid header, a
    whole body whose length is not the declared `content-length`."""
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
        if response.stream is None:
            parts += (b"content-length: ", str(len(response.body)).encode(), b"\r\n")
        else:  # a stream without a declared length
            parts.append(b"transfer-encoding: chunked\r\n")
    elif response.stream is None and length != len(response.body) and not head_only:
        raise RuntimeError("Response content length differs from Content-Length")
    if not has_id:
        parts += (b"x-request-id: ", rid.encode(), b"\r\n")
    if not keep_alive and not has_close:
        parts.append(b"connection: close\r\n")
    parts.append(b"\r\n")
    return b"".join(parts), keep_alive
