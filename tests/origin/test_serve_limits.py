"""The origin transport's limits and logs (SPEC.md HTTP-4, HTTP-5, HTTP-6) against a real
`aidememo serve` process, spoken to through raw sockets so that a test controls every byte.

The timeouts are shortened through the test-only environment variables of HTTP-5. The stall
test prints the second client's `/health` latencies while a 128 MiB header is sent, and the
server CPU time the header cost; nothing asserts on time. The tests that reach the store (a
token, a body, the live feed) run on SQLite and on PostgreSQL (`store`).
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from aidememo.cli.main import main
from origin.limits import TransportLimits
from tests import pg
from tests.origin.test_serve_process import ServeProcess

EPOCH = "e1"
SECRET = "s3cr3t-in-the-query-string"
PROBE = "probe-header-value-9f2c"
SHORT = {
    "AIDEMEMO_HEADER_TIMEOUT_S": "1",
    "AIDEMEMO_BODY_TIMEOUT_S": "1",
    "AIDEMEMO_IDLE_TIMEOUT_S": "1",
}


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in list(os.environ):  # the server's settings, not the test cluster's URLs
        if name.startswith("AIDEMEMO_") and not name.startswith("AIDEMEMO_TEST_"):
            monkeypatch.delenv(name)
    home = tmp_path / "home"
    monkeypatch.setenv("AIDEMEMO_HOME", str(home))
    return home


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, home: Path) -> Iterator[list[str]]:
    """The `--database` arguments of `aidememo serve` and `bootstrap`: none (SQLite in the
    home directory) or a fresh PostgreSQL schema."""
    if request.param == "sqlite":
        yield []
        return
    with pg.fresh_database() as database:
        yield ["--database", database.url]


@pytest.fixture
def token(tmp_path: Path, home: Path, store: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    path = tmp_path / "demo.token"
    assert main(["token", "new", "--out", str(path)]) == 0
    args = ["--tenant-id", "local", "--project-id", "demo", "--actor-id", "demo-agent"]
    args += ["--project-epoch", EPOCH, "--token-file", str(path)]
    assert main(["bootstrap", *store, *args]) == 0
    capsys.readouterr()
    return path.read_text().strip()


@pytest.fixture
def serve(tmp_path: Path, home: Path) -> Iterator[list[ServeProcess]]:
    started: list[ServeProcess] = []
    yield started
    for server in started:
        server.kill()


def start(
    started: list[ServeProcess],
    tmp_path: Path,
    home: Path,
    environ: dict[str, str] | None = None,
    database: list[str] | None = None,
) -> ServeProcess:
    log = tmp_path / f"serve{len(started)}.log"
    server = ServeProcess(home, log, *(database or []), environ=environ)
    started.append(server)
    return server


def connect(server: ServeProcess, timeout: float = 10.0) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def read_all(sock: socket.socket) -> bytes:
    """Everything until the server closes (a reset counts as the close)."""
    out = b""
    try:
        while chunk := sock.recv(65536):
            out += chunk
    except ConnectionResetError:
        pass
    return out


def read_response(sock: socket.socket) -> bytes:
    """One response with a content-length, on a connection that stays open."""
    raw = b""
    while b"\r\n\r\n" not in raw:
        raw += sock.recv(65536)
    head_part, _, body = raw.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head_part.lower().split(b"\r\n")
        if line.startswith(b"content-length:")
    )
    while len(body) < length:
        body += sock.recv(65536)
    return raw[: len(head_part) + 4] + body


def status_and_body(raw: bytes) -> tuple[int, bytes]:
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


def error_code(body: bytes) -> str:
    code: str = json.loads(body)["error"]["code"]
    return code


def head(*lines: str) -> bytes:
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def test_http4_over_100_header_fields_431_and_close(
    tmp_path: Path, home: Path, serve: list[ServeProcess]
) -> None:
    server = start(serve, tmp_path, home)
    fields = [f"x-field-{i}: {i}" for i in range(99)]  # plus host: 100 fields
    with connect(server) as sock:
        sock.sendall(head("GET /health HTTP/1.1", "host: x", *fields))
        assert status_and_body(read_response(sock))[0] == 200
    with connect(server) as sock:
        sock.sendall(head("GET /health HTTP/1.1", "host: x", *fields, "x-one-more: 1"))
        raw = read_all(sock)  # ends: the server closed the connection
    status, body = status_and_body(raw)
    assert (status, error_code(body)) == (431, "headers_too_large")
    assert b"connection: close" in raw


def test_http4_head_over_64_kib_431_and_close(
    tmp_path: Path, home: Path, serve: list[ServeProcess]
) -> None:
    server = start(serve, tmp_path, home)
    with connect(server) as sock:  # just under the bound: served
        sock.sendall(head("GET /health HTTP/1.1", "host: x", "x-pad: " + "a" * 60_000))
        assert status_and_body(read_response(sock))[0] == 200
    with connect(server) as sock:
        sock.sendall(head("GET /health HTTP/1.1", "host: x", "x-pad: " + "a" * 66_000))
        status, body = status_and_body(read_all(sock))
    assert (status, error_code(body)) == (431, "headers_too_large")


def test_http4_huge_header_refused_early_while_health_answers(
    tmp_path: Path, home: Path, store: list[str], serve: list[ServeProcess]
) -> None:
    """A 128 MiB header in 64 KiB pieces, 200 half-open connections held, and a second client
    asking `/health` throughout: the header is refused after its first 64 KiB (431 or a
    close), and every `/health` is answered within its client timeout."""
    server = start(serve, tmp_path, home, database=store)
    held = []
    for _ in range(200):
        sock = connect(server)
        sock.sendall(b"GET /health HTTP/1.1\r\nhost: x\r\nx-half: ")
        held.append(sock)
    total = 128 << 20
    piece = b"a" * (64 << 10)
    outcome: dict[str, object] = {}
    cpu_before = cpu_seconds(server.proc.pid)

    def flood() -> None:
        sent = 0
        with connect(server, timeout=30) as sock:
            try:
                sock.sendall(b"GET /health HTTP/1.1\r\nhost: x\r\nx-huge: ")
                while sent < total:
                    sock.sendall(piece)
                    sent += len(piece)
                outcome["answer"] = sock.recv(65536)
            except OSError as exc:  # reset or broken pipe: the server closed on us
                outcome["error"] = type(exc).__name__
                try:
                    outcome["answer"] = sock.recv(65536)
                except OSError:
                    outcome["answer"] = b""
        outcome["sent"] = sent

    sender = threading.Thread(target=flood)
    latencies: list[float] = []
    with httpx.Client(base_url=server.url, timeout=5.0) as client:
        sender.start()
        while sender.is_alive() or len(latencies) < 200:
            began = time.perf_counter()
            assert client.get("/health").status_code == 200  # a timeout raises here
            latencies.append(time.perf_counter() - began)
        sender.join()
    cpu_used = cpu_seconds(server.proc.pid) - cpu_before
    for sock in held:
        sock.close()
    answer = outcome.get("answer", b"")
    assert isinstance(answer, bytes)
    sent = outcome["sent"]
    assert isinstance(sent, int) and sent < total, "the whole 128 MiB was read"
    if answer:
        status, body = status_and_body(answer)
        assert (status, error_code(body)) == (431, "headers_too_large")
    else:
        assert "error" in outcome or answer == b""  # closed without an answer we could read
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    print(
        f"\nstall ({'postgres' if store else 'sqlite'}): huge header refused after "
        f"{sent / 1024:.0f} KiB sent "
        f"({outcome.get('error', 'answered')}, {len(answer)} bytes read); "
        f"/health {len(latencies)} requests p50 {latencies[len(latencies) // 2] * 1000:.1f} ms "
        f"p99 {p99 * 1000:.1f} ms max {latencies[-1] * 1000:.1f} ms; "
        f"server CPU in that time (header, /health, held connections) {cpu_used * 1000:.0f} ms"
    )


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_http5_slow_header_408_after_header_timeout(
    tmp_path: Path, home: Path, serve: list[ServeProcess]
) -> None:
    server = start(serve, tmp_path, home, SHORT)
    with connect(server) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nhost: x\r\n")  # half the head, then silence
        began = time.monotonic()
        raw = read_all(sock)
        waited = time.monotonic() - began
    status, body = status_and_body(raw)
    assert (status, error_code(body)) == (408, "request_timeout")
    with connect(server) as sock:  # nothing at all: closed without an answer
        assert read_all(sock) == b""
    print(f"\nslow header closed after {waited:.2f} s (timeout 1 s)")


def test_http5_announced_body_not_sent_408_after_body_timeout(
    tmp_path: Path, home: Path, store: list[str], token: str, serve: list[ServeProcess]
) -> None:
    server = start(serve, tmp_path, home, SHORT, store)
    with connect(server) as sock:
        sock.sendall(
            head(
                "POST /v1/projects/demo/sessions HTTP/1.1",
                "host: x",
                f"authorization: Bearer {token}",
                "content-type: application/json",
                "content-length: 200",
            )
            + b'{"session_id": '
        )
        raw = read_all(sock)
    status, body = status_and_body(raw)
    assert (status, error_code(body)) == (408, "request_timeout")
    with httpx.Client(base_url=server.url, timeout=5.0) as client:  # the server serves on
        assert client.get("/health").status_code == 200


def test_http5_idle_keepalive_closed_after_idle_timeout(
    tmp_path: Path, home: Path, serve: list[ServeProcess]
) -> None:
    server = start(serve, tmp_path, home, SHORT)
    with connect(server) as sock:
        sock.sendall(head("GET /health HTTP/1.1", "host: x"))
        status, body = status_and_body(read_response(sock))
        assert status == 200 and b"status" in body
        assert read_all(sock) == b""  # closed by the server, nothing more sent


def test_http6_logs_hold_no_query_address_header_or_error(
    tmp_path: Path, home: Path, store: list[str], token: str, serve: list[ServeProcess]
) -> None:
    """Requests and WebSocket upgrades (accepted, refused by the application, refused by the
    WebSocket library) with a secret in the query string and a probe header value: the log
    holds neither, no client address, no ERROR; each refused upgrade is one access line."""
    server = start(serve, tmp_path, home, database=store)
    live = "/v1/projects/demo/changes/live"
    upgrade = [
        "host: x",
        "upgrade: websocket",
        "connection: Upgrade",
        "sec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==",
        "sec-websocket-version: 13",
        f"x-probe: {PROBE}",
    ]
    clients: list[str] = []

    def exchange(request: bytes) -> bytes:
        with connect(server) as sock:
            clients.append(f"{sock.getsockname()[0]}:{sock.getsockname()[1]}")
            sock.sendall(request)
            return read_all(sock)

    refused_app = exchange(
        head(
            f"GET {live}?project_epoch={EPOCH}&after_seq=0&token={SECRET} HTTP/1.1",
            f"authorization: Bearer {token}",
            "x-request-id: refused-by-app",
            *upgrade,
        )
    )
    status, body = status_and_body(refused_app)
    assert (status, error_code(body)) == (400, "invalid_command")  # LIVE-1: before the upgrade
    refused_lib = exchange(
        head(f"GET {live}?token={SECRET} HTTP/1.1", *upgrade[:3], f"x-probe: {PROBE}")
    )
    assert status_and_body(refused_lib)[0] == 400
    with connect(server) as sock:  # accepted, then closed by the client
        clients.append(f"{sock.getsockname()[0]}:{sock.getsockname()[1]}")
        sock.sendall(
            head(
                f"GET {live}?project_epoch={EPOCH}&after_seq=0 HTTP/1.1",
                f"authorization: Bearer {token}",
                "x-request-id: accepted-upgrade",
                *upgrade,
            )
        )
        assert sock.recv(65536).startswith(b"HTTP/1.1 101")
    plain = exchange(
        head(
            f"GET /health?token={SECRET} HTTP/1.1",
            "host: x",
            f"x-probe: {PROBE}",
            "connection: close",
        )
    )
    assert status_and_body(plain)[0] in (200, 400)
    exchange(head("GET /health HTTP/1.1", "host: x", *[f"x-{i}: {PROBE}" for i in range(101)]))
    code, _ = server.terminate()
    assert code == 0
    log = server.stderr()
    assert SECRET not in log and PROBE not in log and token not in log
    assert "project_epoch=" not in log and "after_seq=" not in log
    for client in clients:
        assert client not in log
    assert " ERROR " not in log and "Traceback" not in log
    refusals = [line for line in log.splitlines() if "refused-by-app" in line]
    assert len(refusals) == 1 and "aidememo.access" in refusals[0] and "status=400" in refusals[0]
    lines = log.splitlines()
    assert sum("path=/v1/projects/demo/changes/live status=400" in line for line in lines) == 2
    assert sum("method=- path=- status=431" in line for line in lines) == 1
    websocket_lines = ("WebSocket", "connection open", "connection closed", "connection rejected")
    assert not [line for line in lines if any(text in line for text in websocket_lines)]


@pytest.mark.parametrize("text", ["0", "-1", "soon", "inf", "nan"])
def test_http5_timeout_override_must_be_positive_seconds(text: str) -> None:
    with pytest.raises(ValueError, match="AIDEMEMO_BODY_TIMEOUT_S"):
        TransportLimits.from_environ({"AIDEMEMO_BODY_TIMEOUT_S": text})
    limits = TransportLimits.from_environ({"AIDEMEMO_HEADER_TIMEOUT_S": "0.5"})
    assert (limits.header_timeout_s, limits.body_timeout_s, limits.idle_timeout_s) == (0.5, 30, 75)
    assert (limits.max_head_bytes, limits.max_header_fields) == (64 * 1024, 100)


def test_http4_pipelined_requests_beyond_64_kib_in_one_read_are_served(
    tmp_path: Path, home: Path, serve: list[ServeProcess]
) -> None:
    """The 64 KiB bound is per head: many small pipelined requests sent at once are not one
    large head."""
    server = start(serve, tmp_path, home)
    request = head("GET /health HTTP/1.1", "host: x", "x-pad: " + "p" * 100)
    count = 2 * (64 << 10) // len(request)
    with connect(server) as sock:
        sock.sendall(request * count + head("GET /health HTTP/1.1", "connection: close"))
        raw = read_all(sock)
    assert raw.count(b"HTTP/1.1 200 OK") == count + 1
    assert b"headers_too_large" not in raw
