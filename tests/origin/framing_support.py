"""A real `aidememo serve` to send requests to in each body framing (SPEC.md HTTP-1, HTTP-9):
the server with its admin token and members, the raw-socket sender and the outcome an answer
is compared by.

`send` writes a request's body in one of three framings: with a `Content-Length` (its head
and body in one write when small; a body over 64 KiB after the head, so that a refusal of
the declared size is read before the body is sent), chunked in one chunk in one write, and
chunked in three chunks written apart (each its own read at the server; sending stops once
an answer arrives, as a client does when a body is refused unread).
"""

from __future__ import annotations

import hashlib
import os
import select
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from tests.origin.http_support import Answer, Conn
from tests.origin.test_serve_process import ServeProcess

FRAMINGS = ("length", "one_chunk", "chunks")
TENANT, PROJECT = "local", "demo"
BASE = f"/v1/projects/{PROJECT}"
WRITER, RECEIVER = "writer", "receiver"
Sent = tuple[str, dict[str, str], bytes]  # path (with its query), headers, body
SMALL = 64 * 1024  # a body this big or smaller goes in the head's write


def new_token() -> tuple[str, str]:
    """A fresh member token and its SHA-256 (hex)."""
    token = os.urandom(32).hex()
    return token, hashlib.sha256(token.encode()).hexdigest()


class Site:
    """One running server with an admin token, a writer and a receiver in project `demo`."""

    def __init__(self, server: ServeProcess, admin: str) -> None:
        self.server = server
        self.port = server.port
        self.admin = admin
        self.tokens: dict[str, str] = {}
        for actor in (WRITER, RECEIVER):
            self.tokens[actor] = self.bootstrap(TENANT, PROJECT, actor)

    def call(
        self, method: str, path: str, body: Any = None, *, as_: str | None = WRITER
    ) -> httpx.Response:
        """A request by httpx for setting a case up; it must succeed."""
        token = self.admin if as_ is None else self.tokens[as_]
        reply = httpx.request(
            method,
            self.server.url + path,
            json=body,
            headers={"authorization": f"Bearer {token}"},
            timeout=30,
        )
        assert reply.is_success, f"{method} {path}: {reply.status_code} {reply.text}"
        return reply

    def bootstrap(self, tenant: str, project: str, actor: str) -> str:
        """A new writer `actor` of `project` in `tenant` (both made when new); its token."""
        token, digest = new_token()
        body = {"tenant_id": tenant, "project_id": project, "actor_id": actor}
        self.call("POST", "/v1/admin/bootstrap", {**body, "token_sha256": digest}, as_=None)
        return token

    def bearer(self, actor: str = WRITER) -> dict[str, str]:
        return {"authorization": f"Bearer {self.tokens[actor]}"}


@contextmanager
def serving(tmp: Path, database: str, *extra: str, **environ: str) -> Iterator[Site]:
    """A server on `database` (a SQLite path or a PostgreSQL URL) with an admin token file."""
    admin = os.urandom(32).hex()
    admin_file = tmp / "admin.token"
    admin_file.write_text(admin + "\n")
    admin_file.chmod(0o600)
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    args = ["--database", database, "--admin-token-file", str(admin_file), *extra]
    server = ServeProcess(home, tmp / "serve.log", *args, environ=environ)
    try:
        yield Site(server, admin)
    finally:
        server.kill()


def send(port: int, method: str, sent: Sent, framing: str) -> Answer:
    """`sent` written in `framing`; the answer read back."""
    path, headers, body = sent
    lines = [f"{method} {path} HTTP/1.1", "host: 127.0.0.1"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    if framing == "length":
        lines.append(f"content-length: {len(body)}")
        writes = [body] if len(body) <= SMALL else [b"", body]
    else:
        lines.append("transfer-encoding: chunked")
        size = max(1, len(body) if framing == "one_chunk" else -(-len(body) // 3))
        pieces = [body[i : i + size] for i in range(0, len(body), size)]
        frames = [b"%x\r\n%s\r\n" % (len(piece), piece) for piece in pieces]
        frames[-1:] = [b"".join([*frames[-1:], b"0\r\n\r\n"])]  # the end with the last chunk
        writes = [b"".join(frames)] if framing == "one_chunk" else frames
    head = ("\r\n".join(lines) + "\r\n\r\n").encode()
    with Conn(port, timeout=30) as conn:
        conn.send(head + writes[0])
        wait = 1.0 if framing == "length" else 0.05  # a declared size is refused at once
        for data in writes[1:]:  # apart: each piece its own read at the server
            if select.select([conn.sock], [], [], wait)[0]:
                break  # answered before the whole body (refused unread)
            try:
                conn.send(data)
            except OSError:
                break
        return conn.read()


def alike(answer: Answer) -> tuple[bytes, list[tuple[str, str]], bytes]:
    """What must not depend on the framing of a refusal: status line, headers and body, but
    `date`, the new request id and `connection` (an answer closes when its request's body was
    not read to its end, HTTP-9: a chunked body refused before it is read)."""
    status_line, headers, body = answer.comparable()
    return status_line, [(k, v) for k, v in headers if k != "connection"], body


def outcome(answer: Answer) -> tuple[int, str | None]:
    """The status and, for an error, its code: an HTTP error's, or a JSON-RPC error's (MCP-6)
    as `jsonrpc <code>`."""
    status = int(answer.status_line.split(b" ")[1])
    code = None
    if status >= 400:
        code = answer.json()["error"]["code"]
    elif answer.header("content-type") == "application/json" and answer.body:
        error = answer.json().get("error") if answer.body.startswith(b"{") else None
        if isinstance(error, dict) and isinstance(error.get("code"), int):
            code = f"jsonrpc {error['code']}"
    return status, code
