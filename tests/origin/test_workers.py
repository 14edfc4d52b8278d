"""HTTP-8 without PostgreSQL: `--workers` above 1 is refused on SQLite before anything is
opened or bound, the workers share the origin's PostgreSQL connections out between them, and
the supervisor of `origin.workers` stops every worker on SIGTERM."""

from __future__ import annotations

import inspect
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aidememo.cli.main import main
from aidememo.stores.postgres import PostgresStore
from origin.serve_command import ORIGIN_CONNECTIONS, worker_pool_size

REPO = Path(__file__).resolve().parents[2]


def test_http8_workers_on_sqlite_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIDEMEMO_HOME", str(tmp_path / "home"))
    database = tmp_path / "one.sqlite"
    code = main(["serve", "--database", str(database), "--workers", "2"])
    assert code == 2
    assert "--workers above 1 needs PostgreSQL" in capsys.readouterr().err
    assert not database.exists()  # refused before the store was opened


def test_http8_workers_share_the_origin_connections_out() -> None:
    default = inspect.signature(PostgresStore).parameters["pool_size"].default
    assert default == ORIGIN_CONNECTIONS  # one worker keeps the store's default pool
    assert worker_pool_size(1) is None
    assert [worker_pool_size(n) for n in (2, 3, 4, 8, 64)] == [4, 3, 2, 2, 2]
    for n in range(2, 9):
        pool = worker_pool_size(n)
        assert pool is not None
        assert pool * n >= ORIGIN_CONNECTIONS  # never fewer sessions than one worker's
        assert pool == 2 or (pool - 1) * n < ORIGIN_CONNECTIONS  # and no more than needed


SUPERVISOR = """
import os, signal, sys, time
from pathlib import Path
from origin.workers import bind, run_workers

marks = Path(sys.argv[1])

def worker(sock, index):
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    (marks / str(os.getpid())).write_text(f"up {index}")
    while not stop:
        time.sleep(0.01)
    (marks / str(os.getpid())).write_text("stopped")
    return 0

def crashing(sock, index):
    return 3

sys.exit(run_workers(2, bind("127.0.0.1", 0), crashing if sys.argv[2] == "crash" else worker))
"""


def _supervisor(marks: Path, mode: str) -> subprocess.Popen[bytes]:
    """`run_workers` in a process of its own (forking the test process is not safe)."""
    return subprocess.Popen([sys.executable, "-c", SUPERVISOR, str(marks), mode], cwd=REPO)


def test_http8_the_supervisor_stops_every_worker_and_reports_a_crash(tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    supervisor = _supervisor(marks, "serve")
    try:
        deadline = time.monotonic() + 30
        while sorted(m.read_text() for m in marks.iterdir()) != ["up 0", "up 1"]:
            assert time.monotonic() < deadline, "the workers did not start, each with its index"
            assert supervisor.poll() is None, "the supervisor exited early"
            time.sleep(0.02)
        supervisor.send_signal(signal.SIGTERM)
        assert supervisor.wait(timeout=30) == 0
        assert sorted(m.read_text() for m in marks.iterdir()) == ["stopped", "stopped"]
    finally:
        if supervisor.poll() is None:
            supervisor.kill()
            supervisor.wait()
    crashed = _supervisor(tmp_path, "crash")
    assert crashed.wait(timeout=30) == 3
