"""Client transports (`aidememo.client.transport`) over the contract suite's backends, so
`aidememo.client` runs unchanged against every one of them (`tests.contract.support.BACKENDS`).

`BackendTransport` hands each request to a backend's `Client.request` (in process or the edge
runtime double) and turns the answer back into an `Answer`; against the uvicorn backend the
client uses its own default transport on the server's real socket (`transport_for`).
`Faulty` wraps it to fail the way networks do: before the request reaches the server (a
refused connection) or after the server applied it (the answer lost on the way back).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from aidememo.client.connection import default_transport
from aidememo.client.httpx_transport import default_async_transport
from aidememo.client.transport import (
    Answer,
    AsyncAnswer,
    AsyncTransport,
    Request,
    Transport,
    unreachable,
)
from tests.contract.support import Client

BASE_URL = "http://aidememo.test"

# Headers that belong to one hop of a connection, not to the request.
_HOP = frozenset({"host", "connection", "content-length", "transfer-encoding", "accept-encoding"})


def _read(request: Request) -> Request:
    """`request` with its body as bytes (chunks read once, so it can be forwarded after)."""
    body = request.body
    if body is None or isinstance(body, bytes):
        return request
    return request._replace(body=b"".join(body))


def _body(request: Request) -> bytes:
    return request.body if isinstance(request.body, bytes) else b""


class BackendTransport:
    """One request, one `Client.request` call."""

    def __init__(self, backend: Client) -> None:
        self.backend = backend

    def exchange(self, request: Request, *, stream: bool = False) -> Answer:
        body = _body(_read(request))
        url = urlsplit(request.url)
        headers = {k.lower(): v for k, v in request.headers.items() if k.lower() not in _HOP}
        status, answer_headers, decoded = self.backend.request(
            request.method, url.path, body=body or None, headers=headers, query=url.query or None
        )
        if decoded is None:
            content = b""
        elif isinstance(decoded, bytes):
            content = decoded
        else:
            content = json.dumps(decoded, ensure_ascii=False).encode("utf-8")
        kept = {k.lower(): v for k, v in answer_headers.items() if k.lower() not in _HOP}
        return Answer(status, kept, content)

    def close(self) -> None:
        pass


Match = Callable[[Request], bool]


@dataclass
class Fault:
    """Fail the next `times` requests `match` selects: `before` the server sees them (a
    connect error) or after it answered (`lost`: the answer never arrives); `error` names
    the failure as the client's transports do."""

    match: Match
    lost: bool
    times: int = 1
    error: str = "ReadTimeout"
    hits: int = 0


@dataclass
class Faulty:
    """`inner` with faults injected (`Fault`), in the order they were armed; every request
    that reaches `inner` is recorded in `sent` as (method, path, body)."""

    inner: Transport
    faults: list[Fault] = field(default_factory=list)
    sent: list[tuple[str, str, bytes]] = field(default_factory=list)

    def _forward(self, request: Request, stream: bool) -> Answer:
        request = _read(request)
        self.sent.append((request.method, urlsplit(request.url).path, _body(request)))
        return self.inner.exchange(request, stream=stream)

    def lose_answer(self, match: Match, times: int = 1, error: str = "ReadTimeout") -> Fault:
        fault = Fault(match, lost=True, times=times, error=error)
        self.faults.append(fault)
        return fault

    def refuse(self, match: Match, times: int = 1) -> Fault:
        fault = Fault(match, lost=False, times=times, error="ConnectError")
        self.faults.append(fault)
        return fault

    def close(self) -> None:
        self.inner.close()

    def exchange(self, request: Request, *, stream: bool = False) -> Answer:
        fault = next((f for f in self.faults if f.hits < f.times and f.match(request)), None)
        if fault is None:
            return self._forward(request, stream)
        fault.hits += 1
        if fault.lost:
            self._forward(request, False).close()  # the server applies it ...
            raise unreachable(fault.error, "injected: the answer was lost")  # ... unseen
        raise unreachable(fault.error, "injected: connection refused")


class AsyncAdapter:
    """A synchronous transport for `AsyncClient`: the backends answer synchronously, and the
    edge runtime double runs an event loop of its own, so each request runs in a thread."""

    def __init__(self, inner: Transport) -> None:
        self.inner = inner

    async def aclose(self) -> None:
        self.inner.close()

    async def exchange(self, request: Request, *, stream: bool = False) -> AsyncAnswer:
        answer = await asyncio.to_thread(self.inner.exchange, request)
        return AsyncAnswer(answer.status, answer.headers, answer.content)


def posts_to(suffix: str) -> Match:
    """Requests that POST to a path ending in `suffix`."""
    return lambda request: request.method == "POST" and urlsplit(request.url).path.endswith(suffix)


def transport_for(backend: Client) -> tuple[str, Transport]:
    """The base URL and transport that reach `backend`: the client's own default transport
    on the real socket of a uvicorn server, else `BackendTransport`."""
    from tests.contract.live import SocketClient

    if isinstance(backend, SocketClient) and backend.port is not None:
        return f"http://127.0.0.1:{backend.port}", default_transport()
    return BASE_URL, BackendTransport(backend)


def async_transport_for(backend: Client) -> tuple[str, AsyncTransport]:
    """`transport_for` for `AsyncClient`."""
    from tests.contract.live import SocketClient

    if isinstance(backend, SocketClient) and backend.port is not None:
        return f"http://127.0.0.1:{backend.port}", default_async_transport()
    return BASE_URL, AsyncAdapter(BackendTransport(backend))
