"""The artifact failure gate against a real `aidememo serve` on SQLite with local bodies
(SPEC.md ART-9, ART-3, ART-4, ART-7, ART-8).

Each crash case starts the server with `AIDEMEMO_TEST_CRASH_AT=<point>`, drives the lifecycle
until the connection drops, asserts the point was reached (stderr) and the process died,
restarts it without the hook, retries the exact same requests and checks they converge on one
publication with the right bytes. A SIGKILL in the middle of a streamed upload, a 64 MiB
upload's peak server memory, the start-up refusal of another body store identity and the
GC's crash after its object delete complete the gate.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from aidememo.cli.main import main
from aidememo.domain.artifacts import GC_LEASE_MS
from tests.origin.test_serve_process import REPO, ServeProcess

PROJECT = "/v1/projects/demo"
PATH = "sessions/s1/artifacts/out.bin"
DATA = os.urandom(300_000)


@pytest.fixture
def servers() -> Iterator[list[ServeProcess]]:
    started: list[ServeProcess] = []
    yield started
    for server in started:
        server.kill()


_CLIENTS: list[httpx.Client] = []


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    while _CLIENTS:
        _CLIENTS.pop().close()


class Lifecycle:
    """The three requests of one upload, with fixed command ids so a retry is exact."""

    def __init__(self, url: str, token: str, data: bytes = DATA) -> None:
        self.http = httpx.Client(
            base_url=url, headers={"authorization": f"Bearer {token}"}, timeout=60
        )
        _CLIENTS.append(self.http)
        self.data = data
        self.rid: str | None = None

    def reserve(self) -> httpx.Response:
        payload = {"path": PATH, "size_bytes": len(self.data), "content_type": "text/plain"}
        body = {"command_id": "gate.reserve", "payload": payload}
        response = self.http.post(f"{PROJECT}/artifact-reservations", json=body)
        if response.status_code == 200:
            self.rid = response.json()["reservation_id"]
        return response

    def upload(self) -> httpx.Response:
        return self.http.put(
            f"{PROJECT}/artifact-reservations/{self.rid}/body",
            content=self.data,
            headers={"content-type": "application/octet-stream"},
        )

    def publish(self) -> httpx.Response:
        return self.http.post(
            f"{PROJECT}/artifact-reservations/{self.rid}/publish",
            json={"command_id": "gate.publish"},
        )

    def run(self) -> dict[str, object]:
        for step in (self.reserve, self.upload, self.publish):
            response = step()
            assert response.status_code == 200, response.text
        ref: dict[str, object] = response.json()
        return ref

    def download(self, ref: dict[str, object]) -> bytes:
        response = self.http.post(
            f"{PROJECT}/artifacts/{ref['artifact_id']}/downloads",
            json={"revision": ref["revision"]},
        )
        assert response.status_code == 200, response.text
        return response.content


def _crash(home: Path, log: Path, point: str) -> ServeProcess:
    return ServeProcess(home, log, environ={"AIDEMEMO_TEST_CRASH_AT": point})


@pytest.mark.parametrize(
    "point", ["after_reservation", "after_upload", "during_verification", "after_metadata_commit"]
)
def test_art9_art4_crash_then_exact_retry_converges(
    tmp_path: Path, home: Path, token: str, servers: list[ServeProcess], point: str
) -> None:
    log = tmp_path / "serve.log"
    crashing = _crash(home, log, point)
    servers.append(crashing)
    steps = Lifecycle(crashing.url, token)
    with pytest.raises(httpx.TransportError):
        steps.run()
    assert crashing.proc.wait(timeout=10) == 137
    assert f"crash point {point} reached" in crashing.stderr()
    again = ServeProcess(home, log)
    servers.append(again)
    retry = Lifecycle(again.url, token)
    ref = retry.run()
    assert ref["revision"] == 1 and ref["sha256"] == hashlib.sha256(DATA).hexdigest()
    assert retry.download(ref) == DATA
    meta = retry.http.get(f"{PROJECT}/artifacts/resolve", params={"path": PATH}).json()
    assert meta["generation"] == ref["generation"]
    objects = list((home / "ssot.sqlite.artifacts" / "objects").rglob("gen_*"))
    assert [p.name for p in objects] == [ref["generation"]]


def test_art3_sigkill_mid_upload_then_exact_retry(
    tmp_path: Path, home: Path, token: str, servers: list[ServeProcess]
) -> None:
    log = tmp_path / "serve.log"
    server = ServeProcess(home, log)
    servers.append(server)
    big = os.urandom(8 << 20)
    steps = Lifecycle(server.url, token, big)
    assert steps.reserve().status_code == 200
    sent = threading.Event()

    def slow() -> Iterator[bytes]:
        for i in range(0, len(big), 1 << 20):
            yield big[i : i + (1 << 20)]
            if i >= 2 << 20:
                sent.set()
                time.sleep(0.2)

    def upload() -> None:
        try:
            steps.http.put(
                f"{PROJECT}/artifact-reservations/{steps.rid}/body",
                content=slow(),
                headers={
                    "content-type": "application/octet-stream",
                    "content-length": str(len(big)),
                },
            )
        except httpx.TransportError:
            pass

    worker = threading.Thread(target=upload)
    worker.start()
    assert sent.wait(30)
    server.proc.send_signal(signal.SIGKILL)
    server.proc.wait(timeout=10)
    worker.join(30)
    again = ServeProcess(home, log)
    servers.append(again)
    retry = Lifecycle(again.url, token, big)
    ref = retry.run()  # the same command ids: the reservation replays, the upload is exact
    assert retry.download(ref) == big


def test_art3_direct_upload_streams_64_mib(
    tmp_path: Path, home: Path, token: str, servers: list[ServeProcess]
) -> None:
    server = ServeProcess(home, tmp_path / "serve.log")
    servers.append(server)
    idle = _hwm_kib(server.proc.pid)
    data = os.urandom(64 << 20)
    ref = Lifecycle(server.url, token, data).run()
    peak = _hwm_kib(server.proc.pid)
    assert ref["size_bytes"] == len(data)
    assert (peak - idle) < 32 * 1024, (idle, peak)


def _hwm_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


def test_art8_start_up_refuses_another_body_store_identity(
    tmp_path: Path, home: Path, token: str
) -> None:
    from aidememo.stores.sqlite import SqliteStore

    store = SqliteStore.open_file(home / "ssot.sqlite")
    store.transaction(lambda tx: tx.bind_body_store_identity("r2:v1:elsewhere"))
    store.close()
    log = tmp_path / "serve.log"
    with pytest.raises(AssertionError, match="pinned to body store"):
        ServeProcess(home, log)


GC_SCRIPT = """
import sys
from aidememo.bodies.local import LocalBodies
from aidememo.domain.clock import FixedClock
from aidememo.service.artifact_gc import ArtifactGc
from aidememo.stores.sqlite import SqliteStore
store = SqliteStore.open_file(sys.argv[1])
report = ArtifactGc(store, LocalBodies(sys.argv[2]), FixedClock(int(sys.argv[3]))).run_once()
print(report.to_json())
"""


def test_art9_art7_gc_crash_after_object_delete_is_idempotent(
    tmp_path: Path, home: Path, token: str, servers: list[ServeProcess]
) -> None:
    server = ServeProcess(home, tmp_path / "serve.log")
    servers.append(server)
    v1 = Lifecycle(server.url, token).run()
    replace = Lifecycle(server.url, token, b"two")
    payload = {"path": PATH, "size_bytes": 3, "mutation_token": v1["mutation_token"]}
    r = replace.http.post(
        f"{PROJECT}/artifact-reservations", json={"command_id": "two", "payload": payload}
    )
    replace.rid = r.json()["reservation_id"]
    assert replace.upload().status_code == 200
    assert (
        replace.http.post(
            f"{PROJECT}/artifact-reservations/{replace.rid}/publish", json={"command_id": "two.p"}
        ).status_code
        == 200
    )
    server.kill()
    db, root = home / "ssot.sqlite", home / "ssot.sqlite.artifacts"
    later = str(int(time.time() * 1000) + 120_000)
    argv = [sys.executable, "-c", GC_SCRIPT, str(db), str(root), later]
    env = {**os.environ, "AIDEMEMO_TEST_CRASH_AT": "after_object_delete"}
    crashed = subprocess.run(argv, check=False, cwd=REPO, env=env, capture_output=True, text=True)
    assert crashed.returncode == 137 and "crash point after_object_delete reached" in crashed.stderr
    env.pop("AIDEMEMO_TEST_CRASH_AT")
    argv[-1] = str(int(later) + GC_LEASE_MS)  # once the crashed pass's lease ran out
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, check=True)
    assert "'deleted': 1" in done.stdout  # the intent survived the crash; the delete repeats
    names = [p.name for p in (root / "objects").rglob("gen_*")]
    assert str(v1["generation"]) not in names and len(names) == 1


def test_art3_chunked_upload_without_length_is_411(
    tmp_path: Path, home: Path, token: str, servers: list[ServeProcess]
) -> None:
    server = ServeProcess(home, tmp_path / "serve.log")
    servers.append(server)
    steps = Lifecycle(server.url, token)
    assert steps.reserve().status_code == 200

    def chunks() -> Iterator[bytes]:
        yield DATA[:1000]
        yield DATA[1000:]

    response = steps.http.put(
        f"{PROJECT}/artifact-reservations/{steps.rid}/body",
        content=chunks(),  # no Content-Length: sent chunked
        headers={"content-type": "application/octet-stream"},
    )
    assert response.status_code == 411
    assert response.json()["error"]["code"] == "length_required"


def test_art7_admin_gc_one_pass_collects_an_aborted_body(
    tmp_path: Path, home: Path, token: str, servers: list[ServeProcess],
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    server = ServeProcess(home, tmp_path / "serve.log")
    servers.append(server)
    steps = Lifecycle(server.url, token)
    payload = {"path": PATH, "size_bytes": len(DATA), "ttl_ms": 1}
    r = steps.http.post(
        f"{PROJECT}/artifact-reservations", json={"command_id": "gc", "payload": payload}
    )
    steps.rid = r.json()["reservation_id"]
    server.kill()
    capsys.readouterr()
    assert main(["admin", "gc"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["expired_reservations"] == 1 and first["deleted"] == 0  # due after the grace


def test_art8_admin_gc_needs_an_artifact_root_with_postgresql(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["admin", "gc", "--database", "postgresql://127.0.0.1:1/none"]) == 2
    assert "--artifact-root is required" in capsys.readouterr().err


def test_art8_serve_needs_an_artifact_root_with_postgresql(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # refused at start-up, before any connection is tried (the URL leads nowhere)
    assert main(["serve", "--database", "postgresql://127.0.0.1:1/none"]) == 2
    assert "--artifact-root is required" in capsys.readouterr().err
