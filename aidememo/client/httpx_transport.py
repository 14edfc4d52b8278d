"""httpx under the client's transports: `HttpxAsyncTransport`, `AsyncClient`'s default, and
`HttpxTransport`, which puts any synchronous httpx transport (one through a proxy, say) under
`Client`.

Each request goes straight to an httpx transport, not through `httpx.Client`: an API call
needs none of its layers (cookies, redirects, auth flows, event hooks), so it pays for none
of them (docs/bench-notes.md has the cost). httpx's failures become `AidememoUnreachable`
named by their httpx class (`ConnectError`, `ReadTimeout`, ...), as `KeepAliveTransport`
names its own.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx

from aidememo.client.errors import AidememoUnreachable
from aidememo.client.transport import Answer, AsyncAnswer, AsyncTransport, Request, unreachable

# Every write of a request goes out at once: httpx sends a request's head and body in separate
# writes, and with Nagle's algorithm the body would wait for the head's acknowledgement.
SOCKET_OPTIONS = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]

# The failures an identical retry may cure (CLIENT-1).
RETRYABLE = (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError)


def failure(exc: httpx.TransportError) -> AidememoUnreachable:
    """An httpx transport failure as the client's error, named by its class."""
    error = unreachable(type(exc).__name__, str(exc))
    error.retryable = isinstance(exc, RETRYABLE)
    return error


def _request(request: Request, content: Any) -> httpx.Request:
    extensions = {
        "timeout": {
            "connect": request.timeouts.connect,
            "read": request.timeouts.read,
            "write": request.timeouts.read,
            "pool": request.timeouts.connect,
        }
    }
    return httpx.Request(
        request.method, request.url, headers=request.headers, content=content,
        extensions=extensions,
    )  # fmt: skip


def _headers(response: httpx.Response) -> dict[str, str]:
    """The answer's headers, their names lower-case (as `Answer.headers` holds them)."""
    return {k.lower(): v for k, v in response.headers.items()}


async def _async_chunks(chunks: Iterator[bytes]) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield chunk


class HttpxTransport:
    """A synchronous httpx transport as a `Transport`."""

    def __init__(self, inner: httpx.BaseTransport) -> None:
        self.inner = inner

    def exchange(self, request: Request, *, stream: bool = False) -> Answer:
        try:
            response = self.inner.handle_request(_request(request, request.body))
            headers = _headers(response)
            if stream and 200 <= response.status_code < 300:
                return Answer(
                    response.status_code, headers, stream=_read(response), release=response.close
                )
            try:
                content = response.read()
            finally:
                response.close()
        except httpx.TransportError as exc:
            raise failure(exc) from None
        return Answer(response.status_code, headers, content)

    def close(self) -> None:
        self.inner.close()


def _read(response: httpx.Response) -> Iterator[bytes]:
    try:
        yield from response.iter_bytes()
    except httpx.TransportError as exc:
        raise failure(exc) from None
    finally:
        response.close()


class HttpxAsyncTransport:
    """An asynchronous httpx transport (default: httpx's own with `TCP_NODELAY`) as an
    `AsyncTransport`."""

    def __init__(self, inner: httpx.AsyncBaseTransport | None = None) -> None:
        self.inner = inner or httpx.AsyncHTTPTransport(socket_options=SOCKET_OPTIONS)

    async def exchange(self, request: Request, *, stream: bool = False) -> AsyncAnswer:
        body = request.body
        content = body if body is None or isinstance(body, bytes) else _async_chunks(body)
        try:
            response = await self.inner.handle_async_request(_request(request, content))
            headers = _headers(response)
            if stream and 200 <= response.status_code < 300:
                return AsyncAnswer(
                    response.status_code, headers, stream=_aread(response), release=response.aclose
                )
            try:
                content = await response.aread()
            finally:
                await response.aclose()
        except httpx.TransportError as exc:
            raise failure(exc) from None
        return AsyncAnswer(response.status_code, headers, content)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def _aread(response: httpx.Response) -> AsyncIterator[bytes]:
    try:
        async for chunk in response.aiter_bytes():
            yield chunk
    except httpx.TransportError as exc:
        raise failure(exc) from None
    finally:
        await response.aclose()


def default_async_transport() -> AsyncTransport:
    """The asynchronous client's transport when it is given none."""
    return HttpxAsyncTransport()
