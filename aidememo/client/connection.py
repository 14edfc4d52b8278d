"""`KeepAliveTransport`: the synchronous client's default httpx transport, over `http.client`.

An API call is one small request and one small answer; httpcore's general machinery (its
pool, h11's event state, tracing) costs more CPU per call than the exchange itself on
loopback, and sends a request's head and body in separate writes. This transport keeps one
HTTP/1.1 keep-alive connection per thread and host, writes head and body in one `send`
(`TCP_NODELAY`), and maps every failure to the httpx exception it stands for, so the client
sees the same errors (and retries the same ones, SPEC.md CLIENT-1) as with
`httpx.HTTPTransport`, which any caller may still pass instead.

A kept connection is checked before reuse: one the server closed while idle is readable (its
end of file), and is replaced instead of failing the request.
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


class KeepAliveTransport(httpx.BaseTransport):
    """HTTP/1.1 over `http.client`, one kept connection per thread and (scheme, host, port)."""

    def __init__(self, *, ssl_context: ssl.SSLContext | None = None) -> None:
        self._ssl = ssl_context  # made on the first https connection unless given
        self._local = threading.local()
        self._lock = threading.Lock()
        self._open: set[http.client.HTTPConnection] = set()

    def _pool(self) -> dict[Key, http.client.HTTPConnection]:
        pool: dict[Key, http.client.HTTPConnection] | None = getattr(self._local, "pool", None)
        if pool is None:
            pool = self._local.pool = {}
        return pool

    def _new(self, key: Key, connect: float | None) -> http.client.HTTPConnection:
        scheme, host, port = key
        conn: http.client.HTTPConnection
        if scheme == "https":
            if self._ssl is None:
                self._ssl = ssl.create_default_context()
            conn = http.client.HTTPSConnection(host, port, timeout=connect, context=self._ssl)
        elif scheme == "http":
            conn = http.client.HTTPConnection(host, port, timeout=connect)
        else:
            raise httpx.UnsupportedProtocol(f"the URL scheme must be http or https, not {scheme}")
        try:
            conn.connect()
        except TimeoutError as exc:
            conn.close()
            raise httpx.ConnectTimeout(f"connecting to {host}:{port} timed out") from exc
        except OSError as exc:
            conn.close()
            raise httpx.ConnectError(f"cannot connect to {host}:{port}: {exc}") from exc
        if conn.sock is not None:
            conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self._lock:
            self._open.add(conn)
        return conn

    def _drop(self, key: Key) -> None:
        conn = self._pool().pop(key, None)
        if conn is not None:
            conn.close()
            with self._lock:
                self._open.discard(conn)

    def _connection(self, key: Key, connect: float | None) -> http.client.HTTPConnection:
        conn = self._pool().get(key)
        if conn is not None and (conn.sock is None or _readable(conn.sock)):
            self._drop(key)  # closed by the server while idle (or never opened)
            conn = None
        if conn is None:
            conn = self._pool()[key] = self._new(key, connect)
        return conn

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        port = url.port or (443 if url.scheme == "https" else 80)
        key = (url.scheme, url.host, port)
        connect, read = _timeouts(request)
        conn = self._connection(key, connect)
        if conn.sock is not None:
            conn.sock.settimeout(read)
        body = request.read()
        try:
            conn.putrequest(
                request.method,
                url.raw_path.decode("ascii"),
                skip_host=True,
                skip_accept_encoding=True,
            )
            for name, value in request.headers.raw:
                conn.putheader(name, value)
            conn.endheaders(body or None)
            response = conn.getresponse()
            content = response.read()
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
            conns, self._open = self._open, set()
        for conn in conns:
            conn.close()
        self._local = threading.local()


def _readable(sock: socket.socket) -> bool:
    """Whether an idle kept connection has something to read: its end of file, since no
    answer is due."""
    try:
        ready, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(ready)
