"""SEM-7: `aidememo serve` runs its semantic indexer as a child process (`aidememo indexer
--attached`, the same code as the separate indexer), which stops with the server, and also when
the server dies without stopping it (its stdin closes)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import httpx
import pytest

from tests.origin.test_semantic_serve import _post_fact
from tests.origin.test_serve_process import ServeProcess

pytest.importorskip("onnxruntime")

DEADLINE_S = 60.0


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as f:
            found.extend(int(p) for p in f.read().split())
    return found


def _command(pid: int) -> list[str]:
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return [a.decode() for a in f.read().split(b"\0") if a]


def _indexer_child(pid: int) -> int:
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        for child in _children(pid):
            try:
                if _command(child)[-2:] == ["indexer", "--attached"]:
                    return child
            except FileNotFoundError:
                continue
        time.sleep(0.1)
    raise AssertionError("no indexer child")


def _gone(pid: int) -> bool:
    """The process has exited (reaped, or a zombie whose parent has not reaped it yet)."""
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.1)
    return False


pytestmark = pytest.mark.skipif(
    not os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/children"),
    reason="needs /proc/PID/task/TID/children",
)


def test_sem7_serve_indexes_in_a_child_process_that_stops_with_it(
    tmp_path: Path, home: Path, token: str
) -> None:
    server = ServeProcess(home, tmp_path / "serve.log")
    auth = {"authorization": f"Bearer {token}"}
    try:
        child = _indexer_child(server.proc.pid)
        with httpx.Client(base_url=server.url, timeout=10.0) as client:
            session = {"command_id": "c-s1", "payload": {"session_id": "s1", "topic": "ops"}}
            created = client.post("/v1/projects/demo/sessions", headers=auth, json=session)
            assert created.status_code == 200, created.text
            _post_fact(client, auth, "f_oom", "the worker was killed for using too much memory")
            deadline = time.monotonic() + DEADLINE_S
            while True:  # the child's status reaches /ready
                ready = client.get("/ready").json()
                if ready["semantic"]["facts_indexed"] == 1 and ready["semantic"]["index_lag"] == 0:
                    break
                assert time.monotonic() < deadline, ready
                time.sleep(0.1)
        assert ready["semantic"]["semantic_model"]["provider"] == "bundled"
        code, _ = server.terminate(timeout=60.0)
        assert code == 0
        assert _gone(child)
    finally:
        server.kill()


def test_sem7_an_attached_indexer_stops_when_its_server_is_killed(
    tmp_path: Path, home: Path, token: str
) -> None:
    server = ServeProcess(home, tmp_path / "serve.log")
    try:
        child = _indexer_child(server.proc.pid)
        os.kill(server.proc.pid, signal.SIGKILL)
        server.proc.wait(timeout=10)
        assert _gone(child)
    finally:
        server.kill()


def test_sem7_an_indexer_child_that_dies_is_started_again_and_ready_says_so(
    tmp_path: Path, home: Path, token: str
) -> None:
    server = ServeProcess(home, tmp_path / "serve.log")
    try:
        first = _indexer_child(server.proc.pid)
        os.kill(first, signal.SIGKILL)
        deadline = time.monotonic() + DEADLINE_S
        while True:
            ready = httpx.get(f"{server.url}/ready", timeout=5.0).json()
            if ready["semantic"]["errors"] >= 1:
                break
            assert time.monotonic() < deadline, ready
            time.sleep(0.1)
        assert ready["semantic"]["last_error"] == "indexer exited with -9"
        deadline = time.monotonic() + DEADLINE_S
        while _indexer_child(server.proc.pid) == first:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        time.sleep(1.0)  # the new child's first status lines
        again = httpx.get(f"{server.url}/ready", timeout=5.0).json()["semantic"]
        assert again["errors"] >= 1 and again["last_error"] == "indexer exited with -9"
        code, _ = server.terminate(timeout=60.0)
        assert code == 0
    finally:
        server.kill()
