"""HTTP-8 without PostgreSQL: `--workers` above 1 is refused on SQLite before anything is
opened or bound, and the supervisor of `origin.workers` stops every worker on SIGTERM."""

from __future__ import annotations

import os
import signal
import socket
import time
from pathlib import Path

import pytest

from aidememo.cli.main import main
from origin.workers import bind, run_workers


def test_http8_workers_on_sqlite_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIDEMEMO_HOME", str(tmp_path / "home"))
    database = tmp_path / "one.sqlite"
    code = main(["serve", "--database", str(database), "--workers", "2"])
    assert code == 2
    assert "--workers above 1 needs PostgreSQL" in capsys.readouterr().err
    assert not database.exists()  # refused before the store was opened


def test_http8_the_supervisor_stops_every_worker_and_reports_a_crash(tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()

    def worker(sock: socket.socket) -> int:
        stop = False

        def on_term(_sig: int, _frame: object) -> None:
            nonlocal stop
            stop = True

        signal.signal(signal.SIGTERM, on_term)
        (marks / str(os.getpid())).write_text("up")
        while not stop:
            time.sleep(0.01)
        (marks / str(os.getpid())).write_text("stopped")
        return 0

    sock = bind("127.0.0.1", 0)
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:  # the supervisor, in a child so the test process keeps its signal handlers
        code = 1
        try:
            code = run_workers(2, sock, worker)
        finally:
            os._exit(code)
    sock.close()
    deadline = time.monotonic() + 30
    while len(list(marks.iterdir())) < 2:
        assert time.monotonic() < deadline, "the workers did not start"
        time.sleep(0.02)
    os.kill(pid, signal.SIGTERM)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert sorted(m.read_text() for m in marks.iterdir()) == ["stopped", "stopped"]
    assert os.getpid() == parent

    def crashing(_sock: socket.socket) -> int:
        return 3

    again = bind("127.0.0.1", 0)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = run_workers(2, again, crashing)
        finally:
            os._exit(code)
    again.close()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 3
