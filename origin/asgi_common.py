"""What the origin's entry points share: `origin.asgi` (HTTP over ASGI), `origin.direct` (HTTP
without it) and `origin.live` (the live feed's WebSockets).

The ASGI 3 type aliases, header folding, request ids, the log-safe rendering of a request
line's text, and the parts of an HTTP answer both HTTP paths send alike: the response headers
the adapter adds, the 503 a dispatch bug turns into, and the chunk-by-chunk sending of a
streamed body.
"""

from __future__ import annotations

import json
from asyncio import get_running_loop
from collections.abc import Awaitable, Callable, Iterable, Iterator, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from random import getrandbits
from typing import Any

from aidememo.domain.errors import STORAGE_RETRY_AFTER_S, ErrorCode, fail
from aidememo.domain.ids import is_valid_id
from aidememo.http.types import Response

AsgiScope = MutableMapping[str, Any]
AsgiMessage = MutableMapping[str, Any]
AsgiReceive = Callable[[], Awaitable[AsgiMessage]]
AsgiSend = Callable[[AsgiMessage], Awaitable[None]]
AsgiApp = Callable[[AsgiScope, AsgiReceive, AsgiSend], Awaitable[None]]

REQUEST_ID_HEADER = "x-request-id"


def fold_headers(raw: Iterable[tuple[bytes, bytes]]) -> dict[str, str]:
    """ASGI headers as a dict: names lower-cased, repeated headers joined with ", "."""
    headers: dict[str, str] = {}
    for raw_name, raw_value in raw:
        name = raw_name.decode("latin-1").lower()
        if name in headers:
            headers[name] = f"{headers[name]}, {raw_value.decode('latin-1')}"
        else:
            headers[name] = raw_value.decode("latin-1")
    return headers


OFF_LOOP_READ_THREADS = 1
"""Threads of the pool `off_loop_read` requests run in: searches queue there rather than many
of them taking turns with the event loop for the interpreter (docs/bench-notes.md: with two
threads `/health`'s p99 under eight hostile clients was 58 ms, with one 29 ms)."""


def off_loop_read(method: str, path: str) -> bool:
    """A read whose own work can take long, a search (SRCH-7): answered from a worker thread
    even where other reads are answered on the event loop, so `/health` never waits for it."""
    return method == "GET" and path.endswith("/search")


def new_request_id() -> str:
    """16 random hex characters: an identifier, not a secret, so from the process's
    pseudo-random generator (reseeded in every forked worker) rather than a system call."""
    return f"{getrandbits(64):016x}"


def request_id(headers: dict[str, str]) -> str:
    """The incoming `x-request-id` when it is a valid identifier (ID-1), else a new one."""
    incoming = headers.get(REQUEST_ID_HEADER)
    return incoming if incoming is not None and is_valid_id(incoming) else new_request_id()


def log_safe(text: str) -> str:
    """The text as is when it is plain printable ASCII without spaces, else JSON-quoted."""
    if text.isascii() and text.isprintable() and " " not in text:
        return text
    return json.dumps(text)


def internal_error(request_id: str) -> Response:
    """What a dispatch bug turns into: a retryable 503 whose message leaks nothing."""
    body = json.dumps(fail(ErrorCode.STORAGE_FAILURE, "dispatch raised").to_json()).encode()
    return Response(
        503,
        [("content-type", "application/json"), ("retry-after", str(STORAGE_RETRY_AFTER_S))],
        body,
    )


def out_headers(response: Response, rid: str, complete: bool) -> list[tuple[bytes, bytes]]:
    """The ASGI headers of `response`: its own, then `content-length` unless it has one (a
    stream without one is sent chunked), `x-request-id` unless it has one, and `connection:
    close` when the request's body was not read to its end (`complete` False), so its rest
    is never received."""
    out: list[tuple[bytes, bytes]] = []
    has_length = has_id = False
    for name, value in response.headers:
        if name == "content-length":
            has_length = True
        elif name == REQUEST_ID_HEADER:
            has_id = True
        out.append((name.encode("latin-1"), value.encode("latin-1")))
    if not has_length and response.stream is None:
        out.append((b"content-length", str(len(response.body)).encode()))
    if not has_id:
        out.append((b"x-request-id", rid.encode()))
    if not complete:
        out.append((b"connection", b"close"))
    return out


async def send_stream(
    stream: Iterator[bytes], send: AsgiSend, pool: ThreadPoolExecutor | None
) -> None:
    """A streamed answer (an artifact download): each chunk is read in a worker thread, so
    file reads never block the event loop, and sent before the next is read."""
    loop = get_running_loop()
    try:
        while True:
            chunk = await loop.run_in_executor(pool, next, stream, None)
            if chunk is None:
                break
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
    finally:
        close = getattr(stream, "close", None)
        if close is not None:
            await loop.run_in_executor(pool, close)
