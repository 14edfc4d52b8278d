"""The origin's one HTTP entry (SPEC.md HTTP-9): what the transport hands the core and how it
answers, over a real socket (`tests.origin.thread_server`), for a body that came with its
head and for one that is still arriving alike."""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from aidememo.domain.errors import AidememoError
from aidememo.domain.limits import MAX_REQUEST_BODY_BYTES
from aidememo.http.app import HttpApp
from aidememo.http.types import Request, Response
from aidememo.stores.in_memory import InMemoryStore
from origin.accesslog import ACCESS_LOGGER
from tests.origin.http_support import Answer, request
from tests.origin.thread_server import LOOP_THREAD, ThreadServer


class Recorder:
    """A dispatcher that remembers what it saw and the thread it ran on, reads the body as
    the core would (unless `read` is False; its bytes, or the error code reading it raised)
    and answers 200 `{}`."""

    def __init__(self, fail: bool = False, read: bool = True) -> None:
        self.requests: list[Request] = []
        self.bodies: list[bytes | str] = []
        self.threads: list[str] = []
        self.fail = fail
        self.read = read

    def dispatch(self, request: Request) -> Response:
        self.requests.append(request)
        self.threads.append(threading.current_thread().name)
        if self.read:
            try:
                self.bodies.append(request.body.read())
            except AidememoError as error:
                self.bodies.append(error.code.value)
        if self.fail:
            raise RuntimeError("boom")
        return Response(200, [("content-type", "application/json")], b"{}")


def ask(dispatcher: object, *raw: bytes, pause_s: float = 0.0) -> Answer:
    """Send `raw` in pieces (`pause_s` apart, so a body arrives after its head) and read
    the answer."""
    with ThreadServer(dispatcher) as server, server.conn() as conn:
        for piece in raw:
            conn.send(piece)
            time.sleep(pause_s)
        return conn.read()


def chunked_head(method: str, path: str, headers: dict[str, str] | None = None) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "host: x", "transfer-encoding: chunked"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%b\r\n" % (len(data), data)


def test_http9_headers_lower_cased_and_duplicates_joined() -> None:
    rec = Recorder()
    raw = b"GET /x HTTP/1.1\r\nhost: x\r\nX-Thing: a\r\nx-thing: b\r\nContent-Type: a/b\r\n\r\n"
    ask(rec, raw)
    seen = rec.requests[0].headers
    assert seen["x-thing"] == "a, b" and seen["content-type"] == "a/b"


def test_http9_raw_query_string_and_path_passed() -> None:
    rec = Recorder()
    ask(rec, request("GET", "/v1/a?q=%20x&limit=2"))
    assert rec.requests[0].path == "/v1/a"
    assert rec.requests[0].query == "q=%20x&limit=2"


def test_http9_body_arriving_after_its_head_is_read_in_chunks() -> None:
    rec = Recorder()
    ask(rec, chunked_head("POST", "/x"), chunk(b'{"a":'), chunk(b"1}") + b"0\r\n\r\n", pause_s=0.05)
    assert rec.bodies == [b'{"a":1}']


def test_http9_content_length_over_limit_is_answered_unread_and_closes() -> None:
    rec = Recorder(read=False)
    head = f"POST /x HTTP/1.1\r\nhost: x\r\ncontent-length: {MAX_REQUEST_BODY_BYTES + 1}\r\n\r\n"
    answer = ask(rec, head.encode())  # no body sent at all: the answer does not wait for it
    assert rec.requests[0].body.length == MAX_REQUEST_BODY_BYTES + 1
    assert answer.status_line.endswith(b"200 OK")  # the recorder answers; the real app 413
    assert answer.header("connection") == "close"  # the body was never read


def test_http9_streamed_body_stops_reading_past_the_limit() -> None:
    rec = Recorder()
    piece = chunk(b"x" * (256 * 1024))
    # 5 x 256 KiB passes 1 MiB: the answer comes without the rest (nor the last chunk)
    answer = ask(rec, chunked_head("POST", "/x"), *([piece] * 5), pause_s=0.02)
    assert rec.bodies == ["payload_too_large"]
    assert answer.header("connection") == "close"


def test_http9_body_of_exactly_the_limit_is_accepted() -> None:
    rec = Recorder()
    body = b"x" * MAX_REQUEST_BODY_BYTES
    ask(rec, request("POST", "/x", body))
    assert rec.bodies == [body]


def test_http1_real_app_answers_413_for_a_declared_too_large_body_unread() -> None:
    head = (
        f"POST /v1/projects/p/sessions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
        f"content-length: {MAX_REQUEST_BODY_BYTES + 1}\r\n\r\n"
    )
    answer = ask(HttpApp(InMemoryStore()), head.encode())
    assert answer.status_line.endswith(b"413 Request Entity Too Large")
    assert answer.json()["error"]["code"] == "payload_too_large"
    assert answer.header("connection") == "close"


def test_http1_unauthenticated_streamed_body_is_refused_after_its_first_chunk() -> None:
    head = chunked_head("POST", "/v1/projects/p/sessions", {"content-type": "application/json"})
    answer = ask(HttpApp(InMemoryStore()), head, chunk(b"x" * 64 * 1024), pause_s=0.05)
    assert answer.status_line.split(b" ")[1] == b"401"  # stage one ran on the first chunk only
    assert answer.json()["error"]["code"] == "authentication_failed"
    assert answer.header("connection") == "close"


def test_http9_real_app_health_has_its_length() -> None:
    answer = ask(HttpApp(InMemoryStore()), request("GET", "/health"))
    assert answer.json()["status"] == "ok"
    assert int(answer.header("content-length") or -1) == len(answer.body)


def test_id1_request_id_generated_and_echoed() -> None:
    rec = Recorder()
    answer = ask(rec, request("GET", "/x"))
    rid = rec.requests[0].request_id
    assert len(rid) == 16 and int(rid, 16) >= 0
    assert answer.header("x-request-id") == rid


def test_id1_valid_incoming_request_id_is_kept() -> None:
    rec = Recorder()
    answer = ask(rec, request("GET", "/x", headers={"x-request-id": "trace-1.a"}))
    assert rec.requests[0].request_id == "trace-1.a"
    assert answer.header("x-request-id") == "trace-1.a"


@pytest.mark.parametrize("bad", ["has space", "x" * 129, "a\tb", "caf\u00e9"])
def test_id1_invalid_incoming_request_id_is_replaced(bad: str) -> None:
    rec = Recorder()
    raw = b"GET /x HTTP/1.1\r\nhost: x\r\nx-request-id: " + bad.encode("latin-1") + b"\r\n\r\n"
    ask(rec, raw)
    rid = rec.requests[0].request_id
    assert rid != bad and len(rid) == 16


def test_http9_disconnect_before_the_body_dispatches_nothing() -> None:
    rec = Recorder()
    with ThreadServer(rec) as server:
        with server.conn() as conn:
            conn.send(b"POST /x HTTP/1.1\r\nhost: x\r\ncontent-length: 10\r\n\r\n")
            time.sleep(0.05)
        time.sleep(0.1)
    assert rec.requests == []


def test_http2_dispatch_raising_becomes_retryable_503_without_internals(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.ERROR):
        answer = ask(Recorder(fail=True), request("GET", "/x"))
    assert answer.status_line.split(b" ")[1] == b"503"
    assert b"boom" not in answer.body
    assert answer.header("retry-after") == "1"


def test_http14_reads_on_the_loop_writes_in_the_pool_without_a_store_lane() -> None:
    rec = Recorder()
    with ThreadServer(rec) as server, server.conn() as conn:
        for raw in (
            request("GET", "/health"),
            request("GET", "/x"),  # no such route
            request("POST", "/x", b"{}"),
            request("POST", "/v1/projects/p/facts", b"{}"),
        ):
            conn.send(raw)
            conn.read()
    assert rec.threads[:2] == [LOOP_THREAD, LOOP_THREAD]
    assert all(name.startswith("aidememo-dispatch") for name in rec.threads[2:])


def test_http14_the_route_is_resolved_once_per_request(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Whatever lane a request takes (the loop, the pool, the committer on SQLite), and
    however its body came, its route is resolved once: by the scheduler, for the pipeline."""
    import aidememo.http.pipeline
    import origin.lanes
    from aidememo.http.routes import resolve
    from aidememo.stores.sqlite import SqliteStore

    calls: list[str] = []

    def counted(method: str, path: str) -> Any:
        calls.append(path)
        return resolve(method, path)

    monkeypatch.setattr(origin.lanes, "resolve", counted)
    monkeypatch.setattr(aidememo.http.pipeline, "resolve", counted)
    store = SqliteStore.open_file(tmp_path / "r.db")
    sent = [
        request("GET", "/health"),  # the loop
        request("GET", "/x"),  # no such route
        request("POST", "/v1/projects/p/facts", b"{}"),  # the committer: refused at admission
        request("GET", "/v1/projects/p/sessions"),  # a member read on the loop
        chunked_head("POST", "/v1/projects/p/sessions") + chunk(b"{}") + b"0\r\n\r\n",
    ]
    try:
        with ThreadServer(HttpApp(store)) as server, server.conn() as conn:
            for raw in sent:
                conn.send(raw)
                conn.read()
    finally:
        store.close()
    assert len(calls) == len(sent), calls


def test_http14_a_body_still_arriving_is_read_in_the_pool() -> None:
    rec = Recorder()
    pieces = (chunked_head("GET", "/health"), chunk(b"{"), chunk(b"}") + b"0\r\n\r\n")
    ask(rec, *pieces, pause_s=0.05)
    assert rec.threads[0].startswith("aidememo-dispatch") and rec.bodies == [b"{}"]


def test_http6_access_log_has_request_id_never_token_or_query(
    caplog: pytest.LogCaptureFixture,
) -> None:
    token = "f" * 64
    headers = {"authorization": f"Bearer {token}", "x-request-id": "rid-42"}
    with caplog.at_level(logging.INFO, logger=ACCESS_LOGGER):
        ask(Recorder(), request("GET", "/v1/p?q=secret", headers=headers))
    lines = [r.getMessage() for r in caplog.records if r.name == ACCESS_LOGGER]
    assert len(lines) == 1
    line = lines[0]
    assert "request_id=rid-42" in line and "method=GET" in line and "path=/v1/p" in line
    assert "status=200" in line and "duration_ms=" in line
    assert token not in line and "secret" not in line and "Bearer" not in line


def test_http6_access_log_quotes_odd_paths(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger=ACCESS_LOGGER):
        ask(Recorder(), request("GET", "/a%20b%0Aforged=1"))
    line = next(r.getMessage() for r in caplog.records if r.name == ACCESS_LOGGER)
    assert "\n" not in line and 'path="/a b\\nforged=1"' in line


def test_srch7_a_search_is_answered_off_the_event_loop_however_its_body_came() -> None:
    """Other reads of a local store run on the loop; a search never does (SRCH-7), whole or
    still arriving, so `/health` is not queued behind one: it runs on the pool lane's
    search thread."""
    rec = Recorder()
    search = "/v1/projects/p1/search"
    with ThreadServer(rec) as server, server.conn() as conn:
        conn.send(request("GET", search))
        conn.read()
        conn.send(request("GET", "/health"))
        conn.read()
    assert rec.threads[0].startswith("aidememo-search") and rec.threads[1] == LOOP_THREAD


def test_http9_a_stream_is_sent_chunked_without_a_length_and_whole_with_one() -> None:
    class Streams(Recorder):
        def dispatch(self, request: Request) -> Response:
            headers = [("content-type", "application/octet-stream")]
            if request.path == "/sized":
                headers.append(("content-length", "6"))
            return Response(200, headers, b"", stream=iter([b"abc", b"", b"def"]))

    with ThreadServer(Streams()) as server, server.conn() as conn:
        conn.send(request("GET", "/chunked"))
        answer = conn.read()
        assert answer.header("transfer-encoding") == "chunked" and answer.body == b"abcdef"
        conn.send(request("GET", "/sized"))
        answer = conn.read()
        assert answer.header("content-length") == "6" and answer.body == b"abcdef"
        conn.send(request("HEAD", "/sized"))
        answer = conn.read(head_only=True)
        assert answer.header("content-length") == "6"
        conn.send(request("GET", "/health"))  # the connection goes on after each
        assert conn.read().status_line.endswith(b"200 OK")


def test_http9_answer_json_is_the_dispatchers() -> None:
    answer = ask(Recorder(), request("GET", "/x"))
    assert json.loads(answer.body) == {}
