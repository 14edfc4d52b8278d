"""What both clients share on httpx: the request they build, timeouts, transport failures.

The clients hand each request straight to an httpx transport, not through `httpx.Client`: an
API call needs none of its layers (cookies, redirects, auth flows, event hooks), and leaving
them out halves httpx's cost per request. The default transports are
`aidememo.client.connection.KeepAliveTransport` (synchronous) and `httpx.AsyncHTTPTransport`
with `TCP_NODELAY` (asynchronous); a caller may pass any other, such as
`httpx.HTTPTransport(proxy=...)`: a proxy is not read from the environment.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping

import httpx

from aidememo.client.errors import AidememoUnreachable

Timeout = float | httpx.Timeout
"""Seconds for each phase of an exchange (connect, write, read, pool), or an `httpx.Timeout`."""

# The failures an identical retry may cure: no connection, no answer in time, a connection
# reset or closed before the answer was complete (CLIENT-1).
RETRYABLE = (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError)


URL_CACHE_SIZE = 1024

# Every write of a request goes out at once: httpx sends a request's head and body in separate
# writes, and with Nagle's algorithm the body would wait for the head's acknowledgement.
SOCKET_OPTIONS = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]


def default_transport() -> httpx.BaseTransport:
    from aidememo.client.connection import KeepAliveTransport

    return KeepAliveTransport()


def default_async_transport() -> httpx.AsyncHTTPTransport:
    return httpx.AsyncHTTPTransport(socket_options=SOCKET_OPTIONS)


class Wire:
    """How one client's requests are built: the base URL, headers and timeout extension."""

    def __init__(
        self, base_url: str, token: str, timeout: Timeout, extra: Mapping[str, str] | None
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, not {base_url!r}")
        self.base_url = base_url.rstrip("/")
        headers = {"accept": "application/json", "authorization": f"Bearer {token}"}
        headers.update({k.lower(): v for k, v in (extra or {}).items()})
        for name, value in headers.items():
            if any(c in name + value for c in "\r\n\0"):
                raise ValueError(f"header {name!r} (or the token) holds a line break or NUL")
        self.headers = httpx.Headers(headers)
        self.json_headers = httpx.Headers({**headers, "content-type": "application/json"})
        self._urls: dict[str, httpx.URL] = {}
        limits = timeout if isinstance(timeout, httpx.Timeout) else httpx.Timeout(timeout)
        self.extensions = {"timeout": limits.as_dict()}

    def url(self, target: str) -> httpx.URL:
        """The URL of `target`; parsed once per target (httpx validates every component,
        which costs more than the rest of building a request), the most recent kept."""
        url = self._urls.get(target)
        if url is None:
            if len(self._urls) >= URL_CACHE_SIZE:
                self._urls.clear()
            url = self._urls[target] = httpx.URL(self.base_url + target)
        return url

    def request(self, method: str, target: str, body: bytes | None) -> httpx.Request:
        return httpx.Request(
            method,
            self.url(target),
            headers=self.headers if body is None else self.json_headers,
            content=body,
            extensions=self.extensions,
        )


def unreachable(exc: httpx.TransportError) -> AidememoUnreachable:
    """A transport failure as the client's error; its message names the failure's type."""
    detail = str(exc) or type(exc).__name__
    return AidememoUnreachable(
        f"{type(exc).__name__}: {detail}", retryable=isinstance(exc, RETRYABLE)
    )
