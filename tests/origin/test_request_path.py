"""The origin's request path (SPEC.md HTTP-9, `origin.transport`) on a real socket: which
bodies are collected whole and which are read as they arrive, pipelining order, HEAD,
keep-alive and close, HTTP/1.0, request ids, the access line, and a SIGTERM while a POST is in
the dispatch pool.

The server is `tests.origin.probe_serve`: `origin.server.serve` in front of a dispatcher that
answers with the request it saw and whether its body came whole; a POST to `/slow` waits for a
gate file, so a write is in flight for as long as a test needs.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.origin.http_support import Conn, request
from tests.origin.test_serve_process import REPO, free_port

DEADLINE_S = 20.0


class Probe:
    """One `tests.origin.probe_serve` child process."""

    def __init__(self, tmp: Path) -> None:
        self.port = free_port()
        self.gate = tmp / f"gate-{self.port}"
        self.started = tmp / f"started-{self.port}"
        self.log = tmp / f"probe-{self.port}.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith("AIDEMEMO_")}
        env["PYTHONUNBUFFERED"] = "1"
        argv = [sys.executable, "-m", "tests.origin.probe_serve", str(self.port)]
        with open(self.log, "ab") as err:
            self.proc = subprocess.Popen(
                [*argv, str(self.gate), str(self.started)],
                cwd=REPO,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
        self.wait_for(self._answers, "the probe server to listen")

    def _answers(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"probe exited: {self.log.read_text()}")
        try:
            with Conn(self.port, timeout=2) as conn:
                conn.send(request("GET", "/ready"))
                return conn.read().status_line == b"HTTP/1.1 200 OK"
        except OSError:
            return False

    def wait_for(self, condition: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            if condition():
                return
            time.sleep(0.02)
        raise AssertionError(f"timed out waiting for {what}: {self.log.read_text()}")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


@pytest.fixture
def probes(tmp_path: Path) -> Iterator[list[Probe]]:
    started: list[Probe] = []
    yield started
    for probe in started:
        probe.kill()


def start(probes: list[Probe], tmp_path: Path) -> Probe:
    probe = Probe(tmp_path)
    probes.append(probe)
    return probe


def test_http9_a_body_with_a_length_comes_whole_a_chunked_one_arrives_while_read(
    tmp_path: Path, probes: list[Probe]
) -> None:
    probe = start(probes, tmp_path)
    with Conn(probe.port) as conn:
        for method, body in (("GET", b""), ("POST", b'{"a": 1}'), ("DELETE", b""), ("PUT", b"x")):
            conn.send(request(method, "/things/1?x=%20y", body))
            seen = conn.read().json()
            assert seen["path_taken"] == "whole", (method, seen)
            assert (seen["method"], seen["path"], seen["query"]) == (method, "/things/1", "x=%20y")
            assert seen["body_bytes"] == len(body)
        chunked = request("POST", "/chunked", headers={"transfer-encoding": "chunked"})
        conn.send(chunked + b"5\r\nhello\r\n3\r\n, w\r\n0\r\n\r\n")
        seen = conn.read().json()
        assert (seen["path_taken"], seen["body_bytes"]) == ("arriving", 8)


def test_http9_serve_takes_its_startup_objects_out_of_the_collectors_reach(
    tmp_path: Path, probes: list[Probe]
) -> None:
    probe = start(probes, tmp_path)
    with Conn(probe.port) as conn:
        conn.send(request("GET", "/things/1"))
        frozen = conn.read().json()["gc_frozen"]
    assert frozen > 10_000  # the modules, the app and the server, frozen once they started


def test_http9_a_body_in_pieces_comes_whole_and_a_100_continue_one_arrives_while_read(
    tmp_path: Path, probes: list[Probe]
) -> None:
    probe = start(probes, tmp_path)
    body = b'{"content": "' + b"x" * 5000 + b'"}'
    whole = request("POST", "/pieces", body)
    with Conn(probe.port) as conn:
        conn.send(whole[:-2000])
        time.sleep(0.2)  # the server reads the first piece on its own
        conn.send(whole[-2000:])
        seen = conn.read().json()
        assert (seen["path_taken"], seen["body_bytes"]) == ("whole", len(body))
        conn.send(request("GET", "/after"))
        assert conn.read().json()["path_taken"] == "whole"
    head = request("POST", "/expects", headers={"expect": "100-continue", "content-length": "2"})
    with Conn(probe.port) as conn:
        conn.send(head)
        assert conn.read().status_line == b"HTTP/1.1 100 Continue"
        conn.send(b"{}")
        seen = conn.read().json()
        assert (seen["path_taken"], seen["body_bytes"]) == ("arriving", 2)


def test_http9_pipelined_requests_are_answered_in_order_behind_a_post(
    tmp_path: Path, probes: list[Probe]
) -> None:
    probe = start(probes, tmp_path)
    with Conn(probe.port) as conn:
        conn.send(b"".join(request("GET", f"/seq/{n}") for n in range(5)))
        answers = [conn.read().json() for _ in range(5)]
        assert [a["path"] for a in answers] == [f"/seq/{n}" for n in range(5)]
        assert {a["path_taken"] for a in answers} == {"whole"}
        pipelined = [request("POST", "/slow", b'{"n": 0}')]
        pipelined += [request("GET", f"/after/{n}") for n in range(3)]
        pipelined.append(request("HEAD", "/after/head"))
        conn.send(b"".join(pipelined))
        probe.wait_for(probe.started.exists, "the POST to reach dispatch")
        probe.gate.touch()
        first = conn.read().json()
        assert (first["path"], first["path_taken"]) == ("/slow", "whole")
        rest = [conn.read().json() for _ in range(3)]
        assert [a["path"] for a in rest] == [f"/after/{n}" for n in range(3)]
        assert {a["path_taken"] for a in rest} == {"whole"}  # queued behind the POST
        head = conn.read(head_only=True)
        assert head.status_line == b"HTTP/1.1 200 OK" and int(head.header("content-length") or 0)
        conn.send(request("GET", "/later"))
        later = conn.read().json()
        assert (later["path"], later["path_taken"]) == ("/later", "whole")


def test_http9_head_keep_alive_close_and_old_http(tmp_path: Path, probes: list[Probe]) -> None:
    probe = start(probes, tmp_path)
    with Conn(probe.port) as conn:
        conn.send(request("HEAD", "/h"))
        head = conn.read(head_only=True)
        conn.send(request("GET", "/h"))
        get = conn.read()
        # HEAD: the GET's head, without its body (the next answer starts right after it)
        assert head.header("content-length") is not None and head.header("connection") is None
        assert get.json()["method"] == "GET" and get.header("connection") is None
        conn.send(request("GET", "/bye", headers={"connection": "close"}))
        bye = conn.read()
        assert bye.header("connection") == "close" and bye.json()["path_taken"] == "whole"
        assert conn.closed()
    with Conn(probe.port) as conn:
        conn.send(request("GET", "/old", version="1.0"))
        old = conn.read()
        assert old.status_line == b"HTTP/1.1 200 OK" and old.header("connection") == "close"
        assert old.json()["path_taken"] == "whole"
        assert conn.closed()
    with Conn(probe.port) as conn:  # HTTP/1.0 with keep-alive asked for: uvicorn closes too
        conn.send(request("GET", "/old", version="1.0", headers={"connection": "keep-alive"}))
        assert conn.read().header("connection") == "close"
        assert conn.closed()


def test_http9_request_ids_and_the_access_line(tmp_path: Path, probes: list[Probe]) -> None:
    probe = start(probes, tmp_path)
    with Conn(probe.port) as conn:
        conn.send(request("GET", "/logged?secret=q1", headers={"x-request-id": "req-direct-1"}))
        echoed = conn.read()
        conn.send(request("GET", "/logged", headers={"x-request-id": "not a valid id!"}))
        fresh = conn.read()
    assert echoed.header("x-request-id") == "req-direct-1"
    assert echoed.json()["request_id"] == "req-direct-1"
    new_id = fresh.header("x-request-id")
    assert new_id is not None and new_id != "not a valid id!" and len(new_id) == 16
    assert fresh.json()["request_id"] == new_id
    lines = (
        "request_id=req-direct-1 method=GET path=/logged status=200 duration_ms=",
        f"request_id={new_id} method=GET path=/logged status=200 duration_ms=",
    )
    # The writer thread writes what gathered in its window: the two lines may come apart.
    probe.wait_for(lambda: all(line in probe.log.read_text() for line in lines), "both lines")
    assert "secret" not in probe.log.read_text()


@pytest.mark.parametrize("chunked", [False, True], ids=["whole", "arriving"])
def test_http9_sigterm_answers_a_post_in_flight(
    tmp_path: Path, probes: list[Probe], chunked: bool
) -> None:
    probe = start(probes, tmp_path)
    with Conn(probe.port) as conn:
        if chunked:
            head = request("POST", "/slow", headers={"transfer-encoding": "chunked"})
            conn.send(head + b'10\r\n{"in": "flight"}\r\n0\r\n\r\n')
        else:
            conn.send(request("POST", "/slow", b'{"in": "flight"}'))
        probe.wait_for(probe.started.exists, "the POST to reach dispatch")
        probe.proc.send_signal(signal.SIGTERM)
        probe.wait_for(lambda: "Shutting down" in probe.log.read_text(), "the shutdown")
        time.sleep(0.3)  # the server would have exited by now without the request
        assert probe.proc.poll() is None, "exited with a request in flight"
        probe.gate.touch()
        answer = conn.read()
        assert answer.status_line == b"HTTP/1.1 200 OK"
        assert answer.json()["path_taken"] == ("arriving" if chunked else "whole")
        assert answer.header("connection") == "close"
        assert conn.closed()
    assert probe.proc.wait(timeout=DEADLINE_S) == 0
