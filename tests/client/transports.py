"""httpx transports over the contract suite's backends, so `aidememo.client` runs unchanged
against every one of them (`tests.contract.support.BACKENDS`).

`BackendTransport` hands each request to a backend's `Client.request` (in process or the edge
runtime double) and turns the answer back into an `httpx.Response`; against the uvicorn
backend the client uses httpx's own network transport on the server's real socket
(`transport_for`).
`Faulty` wraps it to fail the way networks do: before the request reaches the server (a
refused connection) or after the server applied it (the answer lost on the way back).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

from aidememo.client.transport import default_async_transport, default_transport
from tests.contract.support import Client

BASE_URL = "http://aidememo.test"

# Headers that belong to one hop of httpx's own connection, not to the request.
_HOP = frozenset({"host", "connection", "content-length", "transfer-encoding", "accept-encoding"})


class BackendTransport(httpx.BaseTransport):
    """One request, one `Client.request` call."""

    def __init__(self, backend: Client) -> None:
        self.backend = backend

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        body = request.read()
        headers = {k.lower(): v for k, v in request.headers.items() if k.lower() not in _HOP}
        query = request.url.query.decode("ascii")
        status, answer_headers, decoded = self.backend.request(
            request.method,
            request.url.path,
            body=body or None,
            headers=headers,
            query=query or None,
        )
        if decoded is None:
            content = b""
        elif isinstance(decoded, bytes):
            content = decoded
        else:
            content = json.dumps(decoded, ensure_ascii=False).encode("utf-8")
        kept = {k: v for k, v in answer_headers.items() if k.lower() not in _HOP}
        return httpx.Response(status, headers=kept, content=content, request=request)


Match = Callable[[httpx.Request], bool]


@dataclass
class Fault:
    """Fail the next `times` requests `match` selects: `before` the server sees them (a
    connect error) or after it answered (`lost`: the answer never arrives)."""

    match: Match
    lost: bool
    times: int = 1
    error: type[httpx.TransportError] = httpx.ReadTimeout
    hits: int = 0


@dataclass
class Faulty(httpx.BaseTransport):
    """`inner` with faults injected (`Fault`), in the order they were armed; every request
    that reaches `inner` is recorded in `sent` as (method, path, body)."""

    inner: httpx.BaseTransport
    faults: list[Fault] = field(default_factory=list)
    sent: list[tuple[str, str, bytes]] = field(default_factory=list)

    def _forward(self, request: httpx.Request) -> httpx.Response:
        self.sent.append((request.method, request.url.path, request.read()))
        response = self.inner.handle_request(request)
        response.read()
        return response

    def lose_answer(
        self, match: Match, times: int = 1, error: type[httpx.TransportError] = httpx.ReadTimeout
    ) -> Fault:
        fault = Fault(match, lost=True, times=times, error=error)
        self.faults.append(fault)
        return fault

    def refuse(self, match: Match, times: int = 1) -> Fault:
        fault = Fault(match, lost=False, times=times, error=httpx.ConnectError)
        self.faults.append(fault)
        return fault

    def close(self) -> None:
        self.inner.close()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        fault = next((f for f in self.faults if f.hits < f.times and f.match(request)), None)
        if fault is None:
            return self._forward(request)
        fault.hits += 1
        if fault.lost:
            self._forward(request)  # the server applies it ...
            raise fault.error("injected: the answer was lost", request=request)  # ... unseen
        raise fault.error("injected: connection refused", request=request)


class AsyncAdapter(httpx.AsyncBaseTransport):
    """A synchronous transport for `AsyncClient`: the backends answer synchronously, and the
    edge runtime double runs an event loop of its own, so each request runs in a thread."""

    def __init__(self, inner: httpx.BaseTransport) -> None:
        self.inner = inner

    async def aclose(self) -> None:
        self.inner.close()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        await request.aread()
        return await asyncio.to_thread(self.inner.handle_request, request)


def posts_to(suffix: str) -> Match:
    """Requests that POST to a path ending in `suffix`."""
    return lambda request: request.method == "POST" and request.url.path.endswith(suffix)


def transport_for(backend: Client) -> tuple[str, httpx.BaseTransport]:
    """The base URL and transport that reach `backend`: the client's own default transport
    on the real socket of a uvicorn server, else `BackendTransport`."""
    from tests.contract.live import SocketClient

    if isinstance(backend, SocketClient) and backend.port is not None:
        return f"http://127.0.0.1:{backend.port}", default_transport()
    return BASE_URL, BackendTransport(backend)


def async_transport_for(backend: Client) -> tuple[str, httpx.AsyncBaseTransport]:
    """`transport_for` for `AsyncClient`."""
    from tests.contract.live import SocketClient

    if isinstance(backend, SocketClient) and backend.port is not None:
        return f"http://127.0.0.1:{backend.port}", default_async_transport()
    return BASE_URL, AsyncAdapter(BackendTransport(backend))
