"""Raw-socket helpers for the origin transport's tests (SPEC.md HTTP-9): requests written
byte for byte, responses read back one at a time from a buffered connection."""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass
from typing import Any


@dataclass
class Answer:
    """One HTTP response as read off the socket."""

    status_line: bytes
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.headers if k == name), None)

    def json(self) -> Any:
        return json.loads(self.body)

    def comparable(self) -> tuple[bytes, list[tuple[str, str]], bytes]:
        """Everything but the headers that differ per answer (`date`, a new request id)."""
        kept = sorted((k, v) for k, v in self.headers if k not in {"date", "x-request-id"})
        return self.status_line, kept, self.body


class Conn:
    """One client connection with a read buffer, so pipelined answers are read in turn."""

    def __init__(self, port: int, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffer = b""

    def __enter__(self) -> Conn:
        return self

    def __exit__(self, *exc: object) -> None:
        self.sock.close()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _fill(self) -> bool:
        try:
            chunk = self.sock.recv(65536)
        except ConnectionResetError:
            chunk = b""
        self.buffer += chunk
        return bool(chunk)

    def _take(self, size: int) -> bytes:
        while len(self.buffer) < size:
            if not self._fill():
                raise EOFError("the server closed mid-answer")
        out, self.buffer = self.buffer[:size], self.buffer[size:]
        return out

    def _line(self) -> bytes:
        while b"\r\n" not in self.buffer:
            if not self._fill():
                raise EOFError("the server closed mid-answer")
        line, _, self.buffer = self.buffer.partition(b"\r\n")
        return line

    def read(self, head_only: bool = False) -> Answer:
        """The next answer; `head_only` for the answer to a HEAD request (no body follows)."""
        while b"\r\n\r\n" not in self.buffer:
            if not self._fill():
                raise EOFError(f"the server closed before an answer: {self.buffer!r}")
        head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        status_line, *lines = head.split(b"\r\n")
        headers = []
        for line in lines:
            name, _, value = line.decode("latin-1").partition(":")
            headers.append((name.strip().lower(), value.strip()))
        answer = Answer(status_line, headers, b"")
        if head_only or status_line.split(b" ")[1] in (b"100", b"204", b"304"):
            return answer
        length = answer.header("content-length")
        if length is not None:
            answer.body = self._take(int(length))
        elif answer.header("transfer-encoding") == "chunked":
            parts = []
            while size := int(self._line(), 16):
                parts.append(self._take(size))
                self._take(2)
            self._take(2)
            answer.body = b"".join(parts)
        return answer

    def closed(self) -> bool:
        """True when the server closes the connection with nothing more to read."""
        while self._fill():
            pass
        return self.buffer == b""


def request(
    method: str,
    target: str,
    body: bytes = b"",
    *,
    version: str = "1.1",
    headers: dict[str, str] | None = None,
) -> bytes:
    """A request's bytes; a body gets its `content-length`."""
    lines = [f"{method} {target} HTTP/{version}", "host: 127.0.0.1"]
    for name, value in (headers or {}).items():
        lines.append(f"{name}: {value}")
    if body:
        lines.append(f"content-length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body
