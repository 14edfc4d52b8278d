"""Reading one HTTP/1.1 answer from a socket: the status line, the headers and the body
(`content-length`, chunked, or up to the connection's end).

`KeepAliveTransport` reads answers with this instead of `http.client`, whose import (it parses
headers with the `email` package) cost more than the rest of an agent command's start-up.
A malformed or truncated answer raises `Malformed`; socket errors and timeouts pass through.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

CHUNK = 64 << 10
MAX_HEAD = 64 << 10  # bytes of status line and headers
NO_BODY = frozenset({204, 304})


class Malformed(Exception):
    """Not an HTTP/1.1 answer, or one cut short (the server closed the connection)."""


class Reader:
    """Buffered reads from one socket."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._buffer = b""

    def _fill(self) -> None:
        data = self._sock.recv(CHUNK)
        if not data:
            raise Malformed("the server closed the connection")
        self._buffer += data

    def line(self) -> bytes:
        while (end := self._buffer.find(b"\r\n")) < 0:
            if len(self._buffer) > MAX_HEAD:
                raise Malformed("an answer's head is too long")
            self._fill()
        line, self._buffer = self._buffer[:end], self._buffer[end + 2 :]
        return line

    def exact(self, size: int) -> Iterator[bytes]:
        """`size` bytes, in the pieces they arrive in."""
        while size > 0:
            if not self._buffer:
                self._fill()
            piece, self._buffer = self._buffer[:size], self._buffer[size:]
            size -= len(piece)
            yield piece

    def rest(self) -> Iterator[bytes]:
        """Everything up to the connection's end."""
        if self._buffer:
            yield self._buffer
            self._buffer = b""
        while data := self._sock.recv(CHUNK):
            yield data


class Head:
    """An answer's status and headers (lower-case names), and how its body is framed."""

    def __init__(self, reader: Reader, method: str) -> None:
        self.reader = reader
        try:
            version, status, *_ = reader.line().decode("latin-1").split(" ", 2)
            self.status = int(status)
        except (ValueError, UnicodeDecodeError):
            raise Malformed("not an HTTP/1.1 status line") from None
        if not version.startswith("HTTP/1.") or not 100 <= self.status <= 999:
            raise Malformed("not an HTTP/1.1 status line")
        self.headers: dict[str, str] = {}
        while line := reader.line():
            name, colon, value = line.decode("latin-1").partition(":")
            if not colon:
                raise Malformed("a header line without a colon")
            self.headers[name.strip().lower()] = value.strip()
        connection = self.headers.get("connection", "").lower()
        self.will_close = connection == "close" or (
            version == "HTTP/1.0" and connection != "keep-alive"
        )
        self._bodyless = method == "HEAD" or self.status in NO_BODY or self.status < 200
        self.complete = self._bodyless

    def body(self) -> Iterator[bytes]:
        """The body's pieces as they arrive; `complete` once all were read."""
        if self._bodyless:
            return
        if "chunked" in self.headers.get("transfer-encoding", "").lower():
            yield from self._chunked()
        elif "content-length" in self.headers:
            try:
                size = int(self.headers["content-length"])
            except ValueError:
                raise Malformed("content-length is not a number") from None
            yield from self.reader.exact(size)
        else:
            self.will_close = True
            yield from self.reader.rest()
        self.complete = True

    def _chunked(self) -> Iterator[bytes]:
        while True:
            try:
                size = int(self.reader.line().split(b";", 1)[0], 16)
            except ValueError:
                raise Malformed("a chunk size is not a number") from None
            if size == 0:
                while self.reader.line():  # trailers, to the blank line
                    pass
                return
            yield from self.reader.exact(size)
            if self.reader.line():
                raise Malformed("a chunk without its line end")

    def read(self) -> bytes:
        return b"".join(self.body())
