"""Anonymous 200 MiB archive uploads against a real `aidememo serve` (HTTP-1, ADM-1, ADM-4).

Eight clients at once (five rounds of them) each send `POST /v1/admin/import` with a 200 MiB
body streamed from a generator (half with `Content-Length`, half chunked), none with a valid
admin token: every one is refused (401, or 403 `admin_disabled` with administration off)
before its body is read, the server's resident set grows by less than 64 MiB, and `/health`
from another client answers all the while. The figures (VmRSS before, peak and after, the
bytes each upload got to send, `/health` latencies) are printed; only the generous memory
bound is asserted.
"""

from __future__ import annotations

import contextlib
import select
import socket
import statistics
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from aidememo.cli.main import main
from tests.conformance.test_archive_staging import generated
from tests.origin.test_live_overflow import rss
from tests.origin.test_serve_limits import error_code, status_and_body
from tests.origin.test_serve_process import ServeProcess

MIB = 1 << 20
UPLOAD = 200 * MIB
UPLOADS = 8  # at once
ROUNDS = 5  # of eight, so that /health is asked several times meanwhile
GROWTH_BOUND = 64 * MIB
PIECE = (b'{"type":"fact","data":{"content":"' + b"x" * 990 + b'"}}\n') * 64  # ~64 KiB


def pieces(total: int) -> Iterator[bytes]:
    """The upload's body, generated piece by piece (never held whole)."""
    sent = 0
    while sent < total:
        piece = PIECE[: total - sent]
        sent += len(piece)
        yield piece


@pytest.fixture(params=["admin_on", "admin_off"])
def server(
    request: pytest.FixtureRequest, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> Iterator[ServeProcess]:
    """A real server on a SQLite file, with an admin token configured or administration off."""
    if not Path("/proc/self/status").exists():
        pytest.skip("needs /proc to read the server's VmRSS")
    database = str(tmp_path / "aidememo.db")
    token_file = tmp_path / "demo.token"
    assert main(["token", "new", "--out", str(token_file)]) == 0
    ids = ["--tenant-id", "local", "--project-id", "demo", "--actor-id", "demo-agent"]
    assert main(["bootstrap", "--database", database, *ids, "--token-file", str(token_file)]) == 0
    extra = ["--database", database]
    if request.param == "admin_on":
        admin_file = tmp_path / "admin.token"
        assert main(["token", "new", "--out", str(admin_file)]) == 0
        extra += ["--admin-token-file", str(admin_file)]
    capsys.readouterr()
    proc = ServeProcess(tmp_path / "home", tmp_path / "serve.log", *extra)
    try:
        yield proc
    finally:
        proc.kill()


def _frames(chunked: bool) -> Iterator[tuple[bytes, int]]:
    """(bytes on the wire, body bytes) of the upload, framed as chunks when `chunked`."""
    for piece in pieces(UPLOAD):
        if chunked:
            yield f"{len(piece):x}\r\n".encode() + piece + b"\r\n", len(piece)
        else:
            yield piece, len(piece)
    if chunked:
        yield b"0\r\n\r\n", 0


def _complete(raw: bytes) -> bool:
    """Whether `raw` holds a whole response with a Content-Length."""
    head, sep, body = raw.partition(b"\r\n\r\n")
    for line in head.lower().split(b"\r\n"):
        if line.startswith(b"content-length:"):
            return bool(sep) and len(body) >= int(line.split(b":", 1)[1])
    return False


def upload(port: int, authorization: str | None, chunked: bool) -> tuple[int, str, int]:
    """One 200 MiB import sent until the server answers: (status, code, body bytes sent)."""
    lines = ["POST /v1/admin/import HTTP/1.1", "Host: aidememo.test"]
    lines.append("Content-Type: application/x-ndjson")
    if authorization is not None:
        lines.append(f"Authorization: {authorization}")
    lines.append("Transfer-Encoding: chunked" if chunked else f"Content-Length: {UPLOAD}")
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    with contextlib.closing(sock):
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        sent, raw, pending = 0, b"", b""
        frames: Iterator[tuple[bytes, int]] | None = _frames(chunked)
        while b"\r\n\r\n" not in raw:
            want_write = [sock] if frames is not None or pending != b"" else []
            readable, writable, _ = select.select([sock], want_write, [], 60)
            if not readable and not writable:
                raise AssertionError(f"no answer after {sent} bytes")
            if readable:
                if not (chunk := sock.recv(65536)):
                    break
                raw += chunk
                continue
            if not pending and frames is not None:
                frame = next(frames, None)
                if frame is None:
                    frames = None
                    continue
                pending, size = frame
                sent += size
            try:
                pending = pending[sock.send(pending) :]
            except (BrokenPipeError, ConnectionResetError):
                frames, pending = None, b""
        with contextlib.suppress(OSError):  # a reset after the answer ends it too
            sock.settimeout(5)
            while not _complete(raw) and (chunk := sock.recv(65536)):
                raw += chunk
    assert raw, f"no answer after {sent} bytes"
    status, rest = status_and_body(raw)
    return status, error_code(rest) if rest.startswith(b"{") else "", sent


def test_http1_adm1_anonymous_200_mib_imports_are_refused_before_their_body(
    server: ServeProcess, request: pytest.FixtureRequest
) -> None:
    pid = server.proc.pid
    admin_on = request.node.callspec.params["server"] == "admin_on"
    with httpx.Client(base_url=server.url, timeout=10.0) as health:
        for _ in range(5):  # warm the process up before the baseline
            assert health.get("/health").status_code == 200
        time.sleep(0.3)
        before = rss(pid)
        peak = before
        stop = threading.Event()
        latencies: list[float] = []
        failures: list[str] = []

        def watch() -> None:
            nonlocal peak
            while not stop.is_set():
                peak = max(peak, rss(pid))
                started = time.monotonic()
                try:
                    status = health.get("/health").status_code
                    if status != 200:
                        failures.append(f"/health {status}")
                except httpx.TransportError as exc:
                    failures.append(f"/health {exc!r}")
                latencies.append(time.monotonic() - started)
                time.sleep(0.005)

        results: list[tuple[int, str, int]] = []
        auths = [None, "Bearer " + "f" * 64, "Basic abc", "Bearer"] * 2

        def one(i: int) -> None:
            nonlocal peak
            results.append(upload(server.port, auths[i], chunked=i % 2 == 1))
            peak = max(peak, rss(pid))

        watcher = threading.Thread(target=watch)
        watcher.start()
        started = time.monotonic()
        for _ in range(ROUNDS):
            clients = [threading.Thread(target=one, args=(i,)) for i in range(UPLOADS)]
            for t in clients:
                t.start()
            for t in clients:
                t.join(timeout=120)
        took = time.monotonic() - started
        stop.set()
        watcher.join()
        peak = max(peak, rss(pid))
        time.sleep(0.3)
        after = rss(pid)
        assert health.get("/health").status_code == 200
    p99 = statistics.quantiles(latencies, n=100)[98] if len(latencies) > 1 else latencies[0]
    sent = sorted(s for _, _, s in results)
    state = "on" if admin_on else "off"
    print(
        f"\n{ROUNDS} x {UPLOADS} anonymous {UPLOAD // MIB} MiB imports (admin {state}) in"
        f" {took:.2f} s: VmRSS before {before / MIB:.1f} MiB, peak {peak / MIB:.1f} MiB, after"
        f" {after / MIB:.1f} MiB; sent before the answer {sent[0] / MIB:.1f}-"
        f"{sent[-1] / MIB:.1f} MiB; /health n={len(latencies)} p50"
        f" {statistics.median(latencies) * 1000:.1f} ms p99 {p99 * 1000:.1f} ms"
    )
    assert len(results) == ROUNDS * UPLOADS
    expected = {(401, "authentication_failed")} if admin_on else {(403, "admin_disabled")}
    assert {(status, code) for status, code, _ in results} == expected, results
    assert all(sent < UPLOAD for _, _, sent in results), results
    assert not failures, failures
    assert peak - before < GROWTH_BOUND, (before, peak)


def test_adm4_arc9_authenticated_200_mib_import_stays_under_64_mib(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An authenticated 200 MiB import, streamed to a real server, is imported whole (its
    lines staged in the database page by page, ARC-9) while the server's resident set grows
    by less than 64 MiB."""
    if not Path("/proc/self/status").exists():
        pytest.skip("needs /proc to read the server's VmRSS")
    database = str(tmp_path / "aidememo.db")
    admin_file = tmp_path / "admin.token"
    assert main(["token", "new", "--out", str(admin_file)]) == 0
    assert main(["admin", "migrate", "--database", database]) == 0
    capsys.readouterr()
    proc = ServeProcess(
        tmp_path / "home",
        tmp_path / "serve.log",
        "--database",
        database,
        "--admin-token-file",
        str(admin_file),
    )
    try:
        pid = proc.proc.pid
        size = [0]
        pairs = 6_400  # each resource and its change carry about 16 KiB: about 200 MiB

        def body() -> Iterator[bytes]:
            for data in generated(pairs, 16_300):
                size[0] += len(data)
                yield data

        headers = {
            "authorization": f"Bearer {admin_file.read_text().strip()}",
            "content-type": "application/x-ndjson",
        }
        peak = before = rss(pid)
        stop = threading.Event()

        def watch() -> None:
            nonlocal peak
            while not stop.is_set():
                peak = max(peak, rss(pid))
                time.sleep(0.02)

        watcher = threading.Thread(target=watch)
        watcher.start()
        started = time.monotonic()
        try:
            with httpx.Client(base_url=proc.url, timeout=300.0) as client:
                answer = client.post("/v1/admin/import", content=body(), headers=headers)
        finally:
            stop.set()
            watcher.join()
        took = time.monotonic() - started
        peak = max(peak, rss(pid))
        print(
            f"\nauthenticated {size[0] / MIB:.1f} MiB import in {took:.1f} s: VmRSS before"
            f" {before / MIB:.1f} MiB, peak {peak / MIB:.1f} MiB, after {rss(pid) / MIB:.1f} MiB"
        )
        assert answer.status_code == 200, answer.text
        assert answer.json()["counts"]["change"] == pairs
        assert size[0] > UPLOAD
        assert peak - before < GROWTH_BOUND, (before, peak)
    finally:
        proc.kill()
