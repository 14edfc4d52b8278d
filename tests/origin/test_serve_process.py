"""`aidememo serve` as a real subprocess on a free port, spoken to through real sockets.

Covers: /health and authenticated requests over uvicorn, file modes of the data directory and
the database files (with -wal and -shm), the access log (request id, never the token), SIGTERM
exiting 0 promptly, a request in flight at SIGTERM being finished, and acknowledged writes
surviving a restart.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from aidememo.stores.sqlite import SCHEMA_VERSION

REPO = Path(__file__).resolve().parents[2]
STARTUP_TIMEOUT_S = 20.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class ServeProcess:
    """One `python -m aidememo serve` child with its stderr in a file."""

    def __init__(
        self,
        home: Path,
        log: Path,
        *extra: str,
        environ: dict[str, str] | None = None,
    ) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("AIDEMEMO_")}
        env.update(environ or {})
        env["AIDEMEMO_HOME"] = str(home)
        urls = [*extra, env.get("AIDEMEMO_DATABASE_URL", "")]
        postgres = any(str(a).startswith(("postgres://", "postgresql://")) for a in urls)
        chosen = {"--artifact-root", "--artifact-backend"} & set(extra)
        if postgres and not chosen and "AIDEMEMO_ARTIFACT_ROOT" not in env:
            # a PostgreSQL serve needs its body directory (ART-8)
            env["AIDEMEMO_ARTIFACT_ROOT"] = str(log.parent / f"artifacts-{self.port}")
        env["PYTHONUNBUFFERED"] = "1"
        self.log = log
        command = [sys.executable, "-m", "aidememo"]
        with open(log, "ab") as err:
            self.proc = subprocess.Popen(
                [*command, "serve", "--port", str(self.port), *extra],
                cwd=REPO,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
        self.wait_healthy()

    def wait_healthy(self) -> None:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"serve exited {self.proc.returncode}: {self.stderr()}")
            try:
                if httpx.get(f"{self.url}/health", timeout=1.0).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        raise AssertionError(f"serve did not become healthy: {self.stderr()}")

    def stderr(self) -> str:
        return self.log.read_text(errors="replace")

    def terminate(self, timeout: float = 10.0) -> tuple[int, float]:
        started = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=timeout)
        return code, time.monotonic() - started

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


@pytest.fixture
def servers(tmp_path: Path, home: Path) -> Iterator[list[ServeProcess]]:
    started: list[ServeProcess] = []
    yield started
    for server in started:
        server.kill()


def start(servers: list[ServeProcess], home: Path, log: Path) -> ServeProcess:
    server = ServeProcess(home, log)
    servers.append(server)
    return server


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_http9_store4_serve_over_real_socket_sigterm_exit_0_and_restart_keeps_acknowledged_writes(
    tmp_path: Path, home: Path, token: str, servers: list[ServeProcess]
) -> None:
    log = tmp_path / "serve.log"
    os.chmod(home, 0o755)  # serve puts it back to 0700
    server = start(servers, home, log)
    auth = {"authorization": f"Bearer {token}"}
    with httpx.Client(base_url=server.url, timeout=5.0) as client:
        health = client.get("/health")
        assert health.json() == {
            "status": "ok",
            "mode": "single_node",
            "schema_version": SCHEMA_VERSION,
            "state": "ok",
        }
        identity = client.get("/v1/projects/demo/identity", headers=auth)
        assert identity.status_code == 200, identity.text
        assert identity.json()["actor_id"] == "demo-agent"
        created = client.post(
            "/v1/projects/demo/sessions",
            headers={**auth, "x-request-id": "req-create-1"},
            json={"command_id": "cmd-1", "payload": {"session_id": "s1", "topic": "durable"}},
        )
        assert created.status_code == 200, created.text
        assert created.headers["x-request-id"] == "req-create-1"
        receipt = created.json()
        denied = client.get("/v1/projects/demo/identity")
        assert denied.status_code == 401
        denied_id = denied.headers["x-request-id"]

        # Files while serving: data directory 0700; database, -wal and -shm 0600.
        db = home / "ssot.sqlite"
        assert mode(home) == 0o700
        for name in ("ssot.sqlite", "ssot.sqlite-wal", "ssot.sqlite-shm"):
            assert mode(home / name) == 0o600, name

    code, elapsed = server.terminate()
    assert code == 0, server.stderr()
    assert elapsed < 5.0
    assert mode(db) == 0o600
    for sidecar in (home / "ssot.sqlite-wal", home / "ssot.sqlite-shm"):
        assert not sidecar.exists() or mode(sidecar) == 0o600

    stderr = server.stderr()
    access = [line for line in stderr.splitlines() if "aidememo.access" in line]
    assert any("request_id=req-create-1" in line and "status=200" in line for line in access)
    assert any(f"request_id={denied_id}" in line and "status=401" in line for line in access)
    assert token not in stderr and "Bearer" not in stderr

    again = start(servers, home, log)
    with httpx.Client(base_url=again.url, timeout=5.0) as client:
        stored = client.get("/v1/projects/demo/resources/session/s1", headers=auth)
        assert stored.status_code == 200, stored.text
        assert "durable" in stored.text
        replay = client.post(
            "/v1/projects/demo/sessions",
            headers=auth,
            json={"command_id": "cmd-1", "payload": {"session_id": "s1", "topic": "durable"}},
        )
        assert replay.status_code == 200 and replay.json() == receipt
    assert again.terminate()[0] == 0


def test_http9_sigterm_finishes_a_request_in_flight(
    tmp_path: Path, home: Path, token: str, servers: list[ServeProcess]
) -> None:
    log = tmp_path / "serve.log"
    server = start(servers, home, log)
    body = json.dumps(
        {"command_id": "cmd-inflight", "payload": {"session_id": "s-inflight", "topic": "late"}}
    ).encode()
    head = (
        f"POST /v1/projects/demo/sessions HTTP/1.1\r\nhost: 127.0.0.1\r\n"
        f"authorization: Bearer {token}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(head + body[:10])
        time.sleep(0.3)  # the server has parsed the head and waits for the rest of the body
        server.proc.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        assert server.proc.poll() is None, "exited with a request in flight"
        sock.sendall(body[10:])
        response = b""
        while chunk := sock.recv(65536):
            response += chunk
    status_line = response.split(b"\r\n", 1)[0]
    assert status_line == b"HTTP/1.1 200 OK", response
    assert server.proc.wait(timeout=10) == 0

    again = start(servers, home, log)
    stored = httpx.get(
        f"{again.url}/v1/projects/demo/resources/session/s-inflight",
        headers={"authorization": f"Bearer {token}"},
        timeout=5.0,
    )
    assert stored.status_code == 200, stored.text
    assert again.terminate()[0] == 0


def test_http9_sigint_exits_0_after_a_write(
    tmp_path: Path, home: Path, token: str, servers: list[ServeProcess]
) -> None:
    mode = "sigint"
    server = ServeProcess(home, tmp_path / "serve.log")
    servers.append(server)
    created = httpx.post(
        f"{server.url}/v1/projects/demo/sessions",
        headers={"authorization": f"Bearer {token}"},
        json={"command_id": f"cmd-{mode}", "payload": {"session_id": mode, "topic": "t"}},
        timeout=5.0,
    )
    assert created.status_code == 200, created.text
    server.proc.send_signal(signal.SIGINT)
    assert server.proc.wait(timeout=10) == 0, server.stderr()
    assert "stopped on SIGINT" in server.stderr()


def test_http1_oversized_body_gets_413_over_a_real_socket(
    tmp_path: Path, home: Path, token: str, servers: list[ServeProcess]
) -> None:
    server = start(servers, home, tmp_path / "serve.log")
    big = b"x" * (2 * 1024 * 1024)
    response = httpx.post(
        f"{server.url}/v1/projects/demo/sessions",
        headers={"authorization": f"Bearer {token}", "content-type": "application/json"},
        content=big,
        timeout=10.0,
    )
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "payload_too_large"
    assert httpx.get(f"{server.url}/health", timeout=5.0).status_code == 200
    assert server.terminate()[0] == 0
