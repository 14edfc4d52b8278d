"""A request answers the same whether its bytes come in one read or in several (SPEC.md
HTTP-9), against a real `aidememo serve` on SQLite: the same status line, headers (but `date`
and a fresh request id) and body, one request or several pipelined; a streamed artifact
download is the same bytes as the artifact; metrics count every answer.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.origin.http_support import Answer, Conn, request
from tests.origin.test_artifact_gate import Lifecycle
from tests.origin.test_serve_process import ServeProcess, free_port

PROJECT = "/v1/projects/demo"


@pytest.fixture
def server(tmp_path: Path, home: Path, token: str) -> Iterator[ServeProcess]:
    served = ServeProcess(home, tmp_path / "serve.log")
    yield served
    served.kill()


PIECES = 3
"""Writes a request is cut into when it comes in pieces, each read on its own."""


def exchange(
    port: int,
    data: bytes,
    count: int = 1,
    heads: frozenset[int] = frozenset(),
    pieces: int = 1,
) -> list[Answer]:
    """`count` answers to the bytes `data` (several requests pipelined), sent in one write or
    cut into `pieces` writes the server reads one at a time; `heads` are the indexes of HEAD
    requests."""
    with Conn(port) as conn:
        step = -(-len(data) // pieces)
        for start in range(0, len(data), step):
            conn.send(data[start : start + step])
            if pieces > 1:
                time.sleep(0.05)  # the server reads this piece on its own
        return [conn.read(head_only=n in heads) for n in range(count)]


def test_http9_a_request_in_one_read_and_in_pieces_answer_alike(
    server: ServeProcess, token: str
) -> None:
    direct = cycle = server  # the same requests: in one write, then in pieces
    bearer = {"authorization": f"Bearer {token}"}
    json_type = {**bearer, "content-type": "application/json"}
    create = b'{"command_id": "c-s1", "payload": {"session_id": "s1", "topic": "alike"}}'
    first = exchange(direct.port, request("POST", f"{PROJECT}/sessions", create, headers=json_type))
    assert first[0].status_line == b"HTTP/1.1 200 OK", first[0].body
    cases: list[tuple[str, bytes, frozenset[int]]] = [
        ("health", request("GET", "/health"), frozenset()),
        ("head", request("HEAD", "/health"), frozenset({0})),
        (
            "resource",
            request("GET", f"{PROJECT}/resources/session/s1", headers=bearer),
            frozenset(),
        ),
        (
            "missing",
            request("GET", f"{PROJECT}/resources/session/nope", headers=bearer),
            frozenset(),
        ),
        ("no route", request("GET", "/v1/nowhere"), frozenset()),
        ("method", request("DELETE", "/health"), frozenset()),
        ("no token", request("GET", f"{PROJECT}/resources/session/s1"), frozenset()),
        ("bad query", request("GET", f"{PROJECT}/changes?bogus=1", headers=bearer), frozenset()),
        ("replay", request("POST", f"{PROJECT}/sessions", create, headers=json_type), frozenset()),
        (
            "bad json",
            request("POST", f"{PROJECT}/sessions", b"{nope", headers=json_type),
            frozenset(),
        ),
        (
            "media",
            request(
                "POST",
                f"{PROJECT}/sessions",
                b"{}",
                headers={**bearer, "content-type": "text/plain"},
            ),
            frozenset(),
        ),
        (
            "too large",
            request(
                "POST", f"{PROJECT}/sessions", headers={**json_type, "content-length": str(2 << 20)}
            ),
            frozenset(),
        ),
        ("http/1.0", request("GET", "/health", version="1.0"), frozenset()),
        ("close", request("GET", "/health", headers={"connection": "close"}), frozenset()),
        (
            "request id",
            request("GET", "/health", headers={"x-request-id": "rid-alike-1"}),
            frozenset(),
        ),
    ]
    for name, data, heads in cases:
        one, other = (
            exchange(direct.port, data, 1, heads)[0],
            exchange(cycle.port, data, 1, heads, pieces=PIECES)[0],
        )
        assert one.comparable() == other.comparable(), name
        assert one.header("date") is not None and other.header("date") is not None, name
    rid = exchange(direct.port, request("GET", "/health", headers={"x-request-id": "rid-x"}))
    assert rid[0].header("x-request-id") == "rid-x"
    pipelined = b"".join(data for _, data, heads in cases[:4]) + cases[8][1]
    ones = exchange(direct.port, pipelined, 5, frozenset({1}))
    others = exchange(cycle.port, pipelined, 5, frozenset({1}), pieces=PIECES)
    assert [a.comparable() for a in ones] == [a.comparable() for a in others]


def test_http9_a_streamed_download_is_the_artifact_however_the_request_came(
    server: ServeProcess, token: str
) -> None:
    data = os.urandom(700_000)  # more than one chunk of the body stream
    ref = Lifecycle(server.url, token, data).run()
    got = Lifecycle(server.url, token, data).download(ref)
    assert hashlib.sha256(got).digest() == hashlib.sha256(data).digest()
    body = f'{{"revision": {ref["revision"]}}}'.encode()
    headers = {"authorization": f"Bearer {token}", "content-type": "application/json"}
    target = f"{PROJECT}/artifacts/{ref['artifact_id']}/downloads"
    asked = request("POST", target, body, headers=headers)
    both = [exchange(server.port, asked, pieces=n)[0] for n in (1, PIECES)]
    assert both[0].comparable() == both[1].comparable() and both[0].body == data


def _value(text: str, pattern: str) -> float:
    return sum(float(m.group(1)) for m in re.finditer(rf"^{pattern} ([0-9.e+]+)$", text, re.M))


def test_http9_metrics1_every_answer_is_counted(tmp_path: Path, home: Path, token: str) -> None:
    port = free_port()
    server = ServeProcess(home, tmp_path / "serve.log", "--metrics-bind", f"127.0.0.1:{port}")
    try:
        pipelined = request("GET", "/health") * 3 + request("HEAD", "/health")
        exchange(server.port, pipelined, 4, frozenset({3}))
        text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
        ok = r'aidememo_http_requests_total\{method="GET",route="health",status="200"\}'
        assert _value(text, ok) >= 3  # the readiness probe of ServeProcess adds its own
        head = r'aidememo_http_requests_total\{method="HEAD",route="unmatched",status="405"\}'
        assert _value(text, head) == 1
    finally:
        server.kill()


def test_http5_http9_the_idle_timer_counts_from_the_last_answer(
    tmp_path: Path, home: Path, token: str
) -> None:
    server = ServeProcess(home, tmp_path / "serve.log", environ={"AIDEMEMO_IDLE_TIMEOUT_S": "1"})
    try:
        with Conn(server.port) as conn:
            for _ in range(6):  # 2.4 s on one connection, never 1 s without a request
                conn.send(request("GET", "/health"))
                assert conn.read().status_line == b"HTTP/1.1 200 OK"
                time.sleep(0.4)
            assert conn.closed()  # then idle: the server closes it
    finally:
        server.kill()
