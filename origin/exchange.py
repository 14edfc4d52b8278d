"""One request and its answer on an origin connection (`origin.transport`, SPEC.md HTTP-9).

- `Exchange`: a request as the connection reads it; its body is either collected whole on the
  event loop (a declared length within the JSON routes' 1 MiB) or an `ArrivingBody`.
- `ArrivingBody`: a body the core reads from a pool thread while the loop receives it (chunked,
  over 1 MiB, or behind `Expect: 100-continue`), with flow control: the connection stops
  reading while more than `HIGH_WATER` bytes wait for the reader.
- `encode`: the one writer of a response head, for every answer and every refusal.
"""

from __future__ import annotations

import asyncio
import http
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import Enum
from queue import SimpleQueue

from aidememo.domain.errors import ErrorCode, fail
from aidememo.http.body import EMPTY, Body, StreamBody
from aidememo.http.types import Request, Response
from origin.asgi_common import REQUEST_ID_HEADER, bodyless, request_id

HIGH_WATER = 64 * 1024
"""Bytes of an arriving body that may wait for its reader before the connection stops reading."""

_HEADER_NAME_BAD = re.compile(b'[\x00-\x1f\x7f()<>@,;:\\[\\]={} \t\\\\"]')
_HEADER_VALUE_BAD = re.compile(b"[\x00-\x08\x0a-\x1f\x7f]")
_NAMES: dict[str, bytes] = {}
"""Header names already encoded and checked: a response's names come from a small set."""
_MAX_NAMES = 256


def _status_line(status: int) -> bytes:
    try:
        phrase = http.HTTPStatus(status).phrase
    except ValueError:
        phrase = ""
    return f"HTTP/1.1 {status} {phrase}\r\n".encode()


STATUS_LINE = {status: _status_line(status) for status in range(100, 600)}


@dataclass(slots=True, eq=False)
class Exchange:
    """One request of a connection from its head to its answer: `complete` once its whole
    message was read, `started` once it went to its lane, `answered` once its response is
    written (or dropped), `disconnected` when the client went away first."""

    method: str
    path: str
    query: str
    headers: dict[str, str]
    keep_alive: bool
    body: bytearray | ArrivingBody
    complete: bool = False
    started: float = 0.0
    answered: bool = False
    disconnected: bool = False

    def request(self) -> Request:
        """The core's request of this exchange."""
        body: Body
        if isinstance(self.body, ArrivingBody):
            body = self.body
        else:
            body = EMPTY if bodyless(self.method, self.headers) else Body.of(bytes(self.body))
        headers = self.headers
        return Request(self.method, self.path, self.query, headers, body, request_id(headers))


class _Mark(Enum):
    """What an arriving body's queue holds besides chunks."""

    END = "end"  # the whole body arrived
    GONE = "gone"  # the client went away first


class ArrivingBody(StreamBody):
    """A body the event loop receives (`put`, `end`, `gone`) while a pool thread reads it.
    `pause` and `resume` stop and restart the connection's reading; `first_read` (an `Expect:
    100-continue` answer) is called on the loop when the reader first asks for a chunk. When
    the client goes away the read raises and `aborted` is set: nothing is answered then."""

    __slots__ = (
        "_first_read",
        "_lock",
        "_loop",
        "_pause",
        "_queue",
        "_queued",
        "_resume",
        "aborted",
    )

    def __init__(
        self,
        length: int | None,
        loop: asyncio.AbstractEventLoop,
        pause: Callable[[], None],
        resume: Callable[[], None],
        first_read: Callable[[], None] | None,
    ) -> None:
        super().__init__(self._receive(), length)
        self._loop = loop
        self._pause = pause
        self._resume = resume
        self._first_read = first_read
        self._queue: SimpleQueue[bytes | _Mark] = SimpleQueue()
        self._lock = threading.Lock()
        self._queued = 0  # bytes put and not yet taken
        self.aborted = False

    # -- on the event loop -----------------------------------------------------------------

    def put(self, chunk: bytes) -> None:
        """A chunk arrived; reading stops while the reader is more than `HIGH_WATER` behind."""
        with self._lock:
            self._queued += len(chunk)
            over = self._queued > HIGH_WATER
        self._queue.put(chunk)
        if over:
            self._pause()

    def end(self) -> None:
        """The whole body arrived."""
        self._queue.put(_Mark.END)

    def gone(self) -> None:
        """The client went away (or timed out) before the body's end."""
        self._queue.put(_Mark.GONE)

    def _resume_if_drained(self) -> None:
        with self._lock:
            drained = self._queued <= HIGH_WATER
        if drained:
            self._resume()

    # -- on the reading thread -------------------------------------------------------------

    def _receive(self) -> Iterator[bytes]:
        if self._first_read is not None:
            self._loop.call_soon_threadsafe(self._first_read)
        while True:
            chunk = self._queue.get()
            if chunk is _Mark.END:
                return
            if chunk is _Mark.GONE:
                self.aborted = True
                raise fail(ErrorCode.INVALID_COMMAND, "the client went away mid-body")
            with self._lock:
                was_over = self._queued > HIGH_WATER
                self._queued -= len(chunk)
                drained = was_over and self._queued <= HIGH_WATER
            if drained:
                self._loop.call_soon_threadsafe(self._resume_if_drained)
            yield chunk


def _name(name: str) -> bytes:
    raw = _NAMES.get(name)
    if raw is None:
        raw = name.encode("latin-1").lower()
        if _HEADER_NAME_BAD.search(raw):
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
) -> tuple[bytes, bool, bool]:
    """The response head of `response`, whether the connection stays open after it, and
    whether a streamed body is sent chunked: the status line, the server's default headers
    (`date`), the response's headers (validated), `content-length` of a whole body or
    `transfer-encoding: chunked` for a stream without a declared length, `x-request-id` and
    `connection: close` when the connection closes. Raises RuntimeError on an invalid header
    or a declared length that is not the body's."""
    parts = [STATUS_LINE[response.status]]
    for raw_name, raw_value in default_headers:
        parts += (raw_name, b": ", raw_value, b"\r\n")
    length = -1
    has_id = has_close = False
    for name, value in response.headers:
        raw_name = _name(name)
        raw_value = value.encode("latin-1")
        if _HEADER_VALUE_BAD.search(raw_value):
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
    chunked = False
    if length < 0:
        if response.stream is None:
            parts += (b"content-length: ", str(len(response.body)).encode(), b"\r\n")
        else:
            chunked = True
            parts.append(b"transfer-encoding: chunked\r\n")
    elif response.stream is None and length != len(response.body) and not head_only:
        raise RuntimeError("Response content length differs from Content-Length")
    if not has_id:
        parts += (b"x-request-id: ", rid.encode(), b"\r\n")
    if not keep_alive and not has_close:
        parts.append(b"connection: close\r\n")
    parts.append(b"\r\n")
    return b"".join(parts), keep_alive, chunked
