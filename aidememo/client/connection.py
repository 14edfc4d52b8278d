"""`KeepAliveTransport`: the synchronous client's default httpx transport, on plain sockets.

An API call is one small request and one small answer; httpcore's general machinery (its
pool, h11's event state, tracing) costs more CPU per call than the exchange itself on
loopback, and it writes a request's head and body separately, so the server wakes up twice.
This transport keeps one HTTP/1.1 keep-alive connection per thread and (scheme, host, port),
writes each request in one `sendall` (`TCP_NODELAY`), reads the answer with the stdlib's
`http.client.HTTPResponse`, and maps every failure to the httpx exception it stands for, so
the client sees the same errors, and retries the same ones (SPEC.md CLIENT-1), as with
`httpx.HTTPTransport`, which a caller may pass instead.

A kept connection is checked before reuse: one the server closed while idle is readable (its
end of file) and is replaced instead of failing the request.
"""

from __future__ import annotations

import http.client
import select
import socket
import ssl
import threading
from typing import Any

import httpx

Key = tuple[str, str, int]


def _timeouts(request: httpx.Request) -> tuple[float | None, float | None]:
    timeouts: dict[str, Any] = request.extensions.get("timeout", {})
    return timeouts.get("connect"), timeouts.get("read")


def _head(request: httpx.Request) -> bytes:
    """The request line and headers; a header that would split the head is refused."""
    lines = [b"%s %s HTTP/1.1" % (request.method.encode("ascii"), request.url.raw_path)]
    for name, value in request.headers.raw:
        if b"\r" in value or b"\n" in value or b"\r" in name or b"\n" in name:
            raise httpx.LocalProtocolError("a header holds a line break")
        lines.append(name + b": " + value)
    lines.append(b"\r\n")
    return b"\r\n".join(lines)


class KeepAliveTransport(httpx.BaseTransport):
    """HTTP/1.1 with keep-alive, one kept connection per thread and (scheme, host, port)."""

    def __init__(self, *, ssl_context: ssl.SSLContext | None = None) -> None:
        self._ssl = ssl_context  # made on the first https connection unless given
        self._local = threading.local()
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()

    def _pool(self) -> dict[Key, socket.socket]:
        pool: dict[Key, socket.socket] | None = getattr(self._local, "pool", None)
        if pool is None:
            pool = self._local.pool = {}
        return pool

    def _new(self, key: Key, connect: float | None) -> socket.socket:
        scheme, host, port = key
        if scheme not in ("http", "https"):
            raise httpx.UnsupportedProtocol(f"the URL scheme must be http or https, not {scheme}")
        try:
            sock = socket.create_connection((host, port), timeout=connect)
        except TimeoutError as exc:
            raise httpx.ConnectTimeout(f"connecting to {host}:{port} timed out") from exc
        except OSError as exc:
            raise httpx.ConnectError(f"cannot connect to {host}:{port}: {exc}") from exc
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if scheme == "https":
                if self._ssl is None:
                    self._ssl = ssl.create_default_context()
                sock = self._ssl.wrap_socket(sock, server_hostname=host)
        except OSError as exc:
            sock.close()
            raise httpx.ConnectError(f"no TLS session with {host}:{port}: {exc}") from exc
        with self._lock:
            self._open.add(sock)
        return sock

    def _drop(self, key: Key) -> None:
        sock = self._pool().pop(key, None)
        if sock is not None:
            sock.close()
            with self._lock:
                self._open.discard(sock)

    def _connection(self, key: Key, connect: float | None) -> socket.socket:
        sock = self._pool().get(key)
        if sock is not None and _readable(sock):
            self._drop(key)  # closed by the server while idle
            sock = None
        if sock is None:
            sock = self._pool()[key] = self._new(key, connect)
        return sock

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        port = url.port or (443 if url.scheme == "https" else 80)
        key = (url.scheme, url.host, port)
        data = _head(request) + request.read()
        connect, read = _timeouts(request)
        sock = self._connection(key, connect)
        try:
            sock.settimeout(read)
            sock.sendall(data)
            response = http.client.HTTPResponse(sock, method=request.method)
            try:
                response.begin()
                content = response.read()
            finally:
                response.close()  # its buffered reader over the socket, not the socket
        except TimeoutError as exc:
            self._drop(key)
            raise httpx.ReadTimeout("no answer in time") from exc
        except (http.client.RemoteDisconnected, http.client.IncompleteRead) as exc:
            self._drop(key)
            raise httpx.RemoteProtocolError(f"the server closed the connection: {exc!r}") from exc
        except http.client.HTTPException as exc:
            self._drop(key)
            raise httpx.RemoteProtocolError(f"not an HTTP/1.1 answer: {exc!r}") from exc
        except OSError as exc:
            self._drop(key)
            raise httpx.ReadError(f"the connection failed: {exc}") from exc
        if response.will_close:
            self._drop(key)
        return httpx.Response(
            response.status, headers=response.getheaders(), content=content, request=request
        )

    def close(self) -> None:
        with self._lock:
            socks, self._open = self._open, set()
        for sock in socks:
            sock.close()
        self._local = threading.local()


def _readable(sock: socket.socket) -> bool:
    """Whether an idle kept connection has something to read: its end of file, since no
    answer is due."""
    try:
        ready, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(ready)
