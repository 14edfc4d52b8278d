"""`KeepAliveTransport`: the synchronous client's default transport, on plain sockets.

An API call is one small request and one small answer. This transport keeps one HTTP/1.1
keep-alive connection per thread and (scheme, host, port), writes each request's head and
body in one `sendall` (`TCP_NODELAY`; a streamed body follows chunk by chunk), reads the
answer with `aidememo.client.http11`, and turns every failure into
`AidememoUnreachable` naming its kind (`aidememo.client.transport.unreachable`), so the client
retries the ones an identical retry may cure (SPEC.md CLIENT-1). It needs no HTTP library
(not even `http.client`), so an agent command starts without importing one; `ssl` is
imported for the first https connection only.

A kept connection is checked before reuse: one the server closed while idle is readable (its
end of file) and is replaced instead of failing the request.
"""

from __future__ import annotations

import select
import socket
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from aidememo.client.errors import AidememoUnreachable
from aidememo.client.http11 import Head, Malformed, Reader
from aidememo.client.transport import Answer, Request, Transport, unreachable

if TYPE_CHECKING:
    import ssl

Key = tuple[str, str, int]
# Methods whose bodyless request still says `content-length: 0` (as HTTP clients do).
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


def _split(url: str) -> tuple[Key, str, str]:
    """The connection key, the Host header and the request target of `url`."""
    parts = urlsplit(url)
    scheme, host = parts.scheme, parts.hostname or ""
    if scheme not in ("http", "https"):
        raise unreachable(
            "UnsupportedProtocol", f"the URL scheme must be http or https, not {scheme}"
        )
    try:
        port = parts.port or (443 if scheme == "https" else 80)
    except ValueError:
        raise unreachable("UnsupportedProtocol", "the URL has an invalid port") from None
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return (scheme, host, port), parts.netloc.rpartition("@")[2], target


def _head(request: Request, host: str, target: str) -> bytes:
    """The request line and headers; a header that would split the head is refused."""
    headers = {"host": host, **request.headers}
    body = request.body
    if isinstance(body, bytes):
        headers["content-length"] = str(len(body))
    elif body is None and request.method in BODY_METHODS:
        headers["content-length"] = "0"
    elif body is not None and "content-length" not in headers:
        headers["transfer-encoding"] = "chunked"
    lines = [f"{request.method} {target} HTTP/1.1"]
    for name, value in headers.items():
        if any(c in name or c in value for c in "\r\n\0"):
            raise unreachable("LocalProtocolError", "a header holds a line break or NUL")
        lines.append(f"{name}: {value}")
    lines.append("\r\n")
    return "\r\n".join(lines).encode("latin-1")


class KeepAliveTransport:
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
        try:
            # An ASCII host as bytes: a str one loads the IDNA codec (and stringprep).
            address = host.encode() if host.isascii() else host
            sock = socket.create_connection((address, port), timeout=connect)  # type: ignore[arg-type]
        except TimeoutError:
            raise unreachable("ConnectTimeout", f"connecting to {host}:{port} timed out") from None
        except OSError as exc:
            raise unreachable("ConnectError", f"cannot connect to {host}:{port}: {exc}") from None
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if scheme == "https":
                if self._ssl is None:
                    import ssl

                    self._ssl = ssl.create_default_context()
                sock = self._ssl.wrap_socket(sock, server_hostname=host)
        except OSError as exc:
            sock.close()
            raise unreachable("ConnectError", f"no TLS session with {host}:{port}: {exc}") from None
        with self._lock:
            self._open.add(sock)
        return sock

    def _drop(self, key: Key) -> None:
        sock = self._pool().pop(key, None)
        if sock is not None:
            self._forget(sock)

    def _connection(self, key: Key, connect: float | None) -> socket.socket:
        sock = self._pool().get(key)
        if sock is not None and _readable(sock):
            self._drop(key)  # closed by the server while idle
            sock = None
        if sock is None:
            sock = self._pool()[key] = self._new(key, connect)
        return sock

    def exchange(self, request: Request, *, stream: bool = False) -> Answer:
        key, host, target = _split(request.url)
        head = _head(request, host, target)
        sock = self._connection(key, request.timeouts.connect)
        try:
            sock.settimeout(request.timeouts.read)
            _send(sock, head, request)
            answer = Head(Reader(sock), request.method)
            if stream and 200 <= answer.status < 300:
                self._pool().pop(key)  # the stream's own until read to its end
                return Answer(
                    answer.status,
                    answer.headers,
                    stream=self._stream(key, sock, answer),
                    release=lambda: None if answer.complete else self._forget(sock),
                )
            content = answer.read()
        except BaseException as exc:
            self._drop(key)
            raise _failure(exc) from None
        if answer.will_close:
            self._drop(key)
        return Answer(answer.status, answer.headers, content)

    def _stream(self, key: Key, sock: socket.socket, answer: Head) -> Iterator[bytes]:
        try:
            yield from answer.body()
        except BaseException as exc:
            self._forget(sock)
            raise _failure(exc) from None
        if answer.will_close or key in self._pool():
            self._forget(sock)
        else:
            self._pool()[key] = sock  # read to its end: kept for the next request

    def _forget(self, sock: socket.socket) -> None:
        sock.close()
        with self._lock:
            self._open.discard(sock)

    def close(self) -> None:
        with self._lock:
            socks, self._open = self._open, set()
        for sock in socks:
            sock.close()
        self._local = threading.local()


def _send(sock: socket.socket, head: bytes, request: Request) -> None:
    body = request.body
    if body is None or isinstance(body, bytes):
        sock.sendall(head + (body or b""))
        return
    sock.sendall(head)
    chunked = "content-length" not in request.headers
    for chunk in body:
        if chunk:
            sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk) if chunked else chunk)
    if chunked:
        sock.sendall(b"0\r\n\r\n")


def _failure(exc: BaseException) -> BaseException:
    """A failure after the connection was made, as the client's error (others unchanged)."""
    if isinstance(exc, AidememoUnreachable):
        return exc
    if isinstance(exc, TimeoutError):
        return unreachable("ReadTimeout", "no answer in time")
    if isinstance(exc, Malformed):
        return unreachable("RemoteProtocolError", str(exc))
    if isinstance(exc, OSError):
        return unreachable("ReadError", f"the connection failed: {exc}")
    return exc


def _readable(sock: socket.socket) -> bool:
    """Whether an idle kept connection has something to read: its end of file, since no
    answer is due."""
    try:
        ready, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(ready)


def default_transport() -> Transport:
    """The synchronous client's transport when it is given none."""
    return KeepAliveTransport()
