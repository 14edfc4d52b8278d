"""Servers and CLI processes for the agent CLI's tests (tests/cli/test_agent_cli.py).

Every command runs as a real `aidememo` process (the console script next to this Python),
with its own `AIDEMEMO_HOME` and no other `AIDEMEMO_*` setting. Servers:
- `origin`: a real `aidememo serve` process on a free loopback port, on SQLite or on a
  PostgreSQL schema of the test cluster (`tests.pg`), with an admin token file;
- `edge`: the edge runtime double served by `tests.edge.loopback.Loopback`, in Durable Object
  storage mode or PostgreSQL mode (through PgBouncer).
Members are provisioned over the admin route (`POST /v1/admin/bootstrap`, what `aidememo
bootstrap --url` sends), then logged in with `aidememo auth login`.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

AIDEMEMO = str(Path(sys.executable).with_name("aidememo"))
REPO = Path(__file__).resolve().parents[2]
TENANT = "t-cli"
PROJECT = "p-cli"
STARTUP_TIMEOUT_S = 20.0
COMMAND_TIMEOUT_S = 60.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def clean_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIDEMEMO_")}
    env["AIDEMEMO_HOME"] = str(home)
    env["PYTHONUNBUFFERED"] = "1"
    return env


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


@dataclass
class Cli:
    """`aidememo` processes sharing one `AIDEMEMO_HOME`."""

    home: Path
    extra_env: dict[str, str] = field(default_factory=dict)

    def env(self) -> dict[str, str]:
        return {**clean_env(self.home), **self.extra_env}

    def run(self, *args: str, stdin: str | None = None) -> Result:
        done = subprocess.run(
            [AIDEMEMO, *args],
            input=stdin if stdin is not None else "",
            capture_output=True,
            text=True,
            env=self.env(),
            cwd=self.home.parent,
            timeout=COMMAND_TIMEOUT_S,
            check=False,
        )
        return Result(done.returncode, done.stdout, done.stderr)

    def ok(self, *args: str, stdin: str | None = None) -> Result:
        result = self.run(*args, stdin=stdin)
        assert result.code == 0, (args, result)
        return result

    def json(self, *args: str, stdin: str | None = None) -> Any:
        return self.ok(*args, "--json", stdin=stdin).json()

    def as_(self, profile: str, *args: str, stdin: str | None = None) -> Any:
        """`aidememo ARGS --profile PROFILE --json`, parsed; the command must succeed."""
        return self.json(*args, "--profile", profile, stdin=stdin)

    @contextmanager
    def watch(self, profile: str, *args: str) -> Iterator[Watch]:
        proc = subprocess.Popen(
            [AIDEMEMO, "watch", "--profile", profile, "--json", *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=self.env(),
        )
        watcher = Watch(proc)
        try:
            yield watcher
        finally:
            proc.terminate()
            proc.wait(timeout=15)
            assert proc.stdout is not None and proc.stderr is not None
            proc.stdout.close()
            proc.stderr.close()


class Watch:
    """A running `aidememo watch --json`: its stdout lines, read as they come."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def until_seq(self, seq: int, timeout: float = 30.0) -> list[dict[str, Any]]:
        """Every batch printed until one reaches `seq`; fails if the process ends first."""
        batches: list[dict[str, Any]] = []
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no batch reached seq {seq}: {batches}") from None
            if line is None:
                assert self.proc.stderr is not None
                raise AssertionError(f"watch ended: {self.proc.stderr.read()}")
            batch = json.loads(line)
            batches.append(batch)
            if batch.get("next_cursor", {}).get("after_seq", -1) >= seq:
                return batches


class ServeProcess:
    """`aidememo serve` as a child process with an admin token file."""

    def __init__(self, home: Path, admin_token_file: Path, database: str, *extra: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = home.parent / f"serve-{self.port}.log"
        with open(self.log, "ab") as err:
            self.proc = subprocess.Popen(
                [
                    AIDEMEMO,
                    "serve",
                    "--port",
                    str(self.port),
                    "--database",
                    database,
                    "--admin-token-file",
                    str(admin_token_file),
                    "--artifact-root",  # required with PostgreSQL (ART-8)
                    str(home / "artifacts"),
                    *extra,
                ],
                cwd=REPO,
                env=clean_env(home),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"serve exited: {self.log.read_text(errors='replace')}")
            try:
                if httpx.get(f"{self.url}/health", timeout=1.0).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        self.stop()
        raise AssertionError("serve did not become healthy")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@dataclass
class Server:
    """A server the CLI reaches, with its admin token in a file."""

    kind: str
    url: str
    admin_token_file: Path
    stop: Any


def write_secret(path: Path, text: str) -> Path:
    path.write_text(text + "\n")
    path.chmod(0o600)
    return path


@contextmanager
def start_server(kind: str, tmp: Path, *serve_args: str) -> Iterator[Server]:
    """A fresh server of `kind` (`sqlite`, `postgres`, `edge`, `edge_postgres`); `serve_args`
    are more `aidememo serve` options of the first two."""
    home = tmp / "server-home"
    home.mkdir()
    if kind in ("sqlite", "postgres"):
        admin = write_secret(tmp / "admin.token", "cli-admin-" + os.urandom(16).hex())
        db: Any = None
        if kind == "postgres":
            from tests import pg

            db = pg.create_database()
            database = db.url
        else:
            database = str(home / "ssot.sqlite")
        try:
            served = ServeProcess(home, admin, database, *serve_args)
            try:
                yield Server(kind, served.url, admin, served.stop)
            finally:
                served.stop()
        finally:
            if db is not None:
                db.drop()
        return
    from tests.edge.loopback import Loopback

    db = None
    if kind == "edge_postgres":
        from tests import pg

        db = pg.create_database(pooled=True)
    try:
        with Loopback(tmp / "edge", db=db) as edge:
            admin = write_secret(tmp / "admin.token", edge.admin_token)
            yield Server(kind, edge.url, admin, edge.stop)
    finally:
        if db is not None:
            db.drop()


def provision(cli: Cli, server: Server, actor: str, role: str = "writer") -> Path:
    """A token file (0600) for a new member `actor` of the test project, bound over the admin
    route as `aidememo bootstrap --url` binds it (tests/cli/test_cli_admin.py runs that one)."""
    token = os.urandom(32).hex()
    token_file = write_secret(cli.home.parent / f"{actor}.token", token)
    admin = server.admin_token_file.read_text().strip()
    answer = httpx.post(
        f"{server.url}/v1/admin/bootstrap",
        headers={"authorization": f"Bearer {admin}"},
        json={
            "tenant_id": TENANT,
            "project_id": PROJECT,
            "actor_id": actor,
            "role": role,
            "token_sha256": hashlib.sha256(token.encode()).hexdigest(),
        },
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    return token_file


def login(cli: Cli, server: Server, profile: str, token_file: Path, *extra: str) -> Result:
    return cli.run(
        "auth", "login", "--profile", profile, "--url", server.url, "--project-id", PROJECT,
        "--token-file", str(token_file), *extra,
    )  # fmt: skip


class LosingProxy:
    """An HTTP proxy on a loopback port in front of `upstream` that, while `losing` names a
    path suffix, forwards each request ending so to the server and then drops the connection
    instead of answering: the command was applied, the client never hears so."""

    def __init__(self, upstream: str) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
        from urllib.parse import urlsplit

        parts = urlsplit(upstream)
        proxy = self
        self.losing: str | None = None
        self.lost = 0

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _forward(self) -> None:
                import http.client

                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
                conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
                try:
                    conn.request(self.command, self.path, body=body, headers=headers)
                    answer = conn.getresponse()
                    data = answer.read()
                finally:
                    conn.close()
                path = self.path.split("?", 1)[0]
                if proxy.losing is not None and path.endswith(proxy.losing):
                    proxy.lost += 1
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                self.send_response(answer.status)
                for key, value in answer.getheaders():
                    if key.lower() not in ("content-length", "connection", "transfer-encoding"):
                        self.send_header(key, value)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _forward

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)
