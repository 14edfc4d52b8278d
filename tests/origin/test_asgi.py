"""The ASGI adapter, driven by hand-written ASGI messages (no server, no sockets)."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterable
from typing import Any

import pytest

from aidememo.domain.errors import AidememoError
from aidememo.domain.limits import MAX_REQUEST_BODY_BYTES
from aidememo.http.app import HttpApp
from aidememo.http.types import Request, Response
from aidememo.stores.memory import MemoryStore
from origin.accesslog import ACCESS_LOGGER
from origin.asgi import create_asgi_app


class Recorder:
    """A dispatcher that remembers what it saw, reads the body as the core would (unless
    `read` is False; its bytes, or the error code reading it raised) and answers 200 `{}`."""

    def __init__(
        self, response: Response | None = None, fail: bool = False, read: bool = True
    ) -> None:
        self.requests: list[Request] = []
        self.bodies: list[bytes | str] = []
        self.response = response or Response(200, [("content-type", "application/json")], b"{}")
        self.fail = fail
        self.read = read

    def dispatch(self, request: Request) -> Response:
        self.requests.append(request)
        if self.read:
            try:
                self.bodies.append(request.body.read())
            except AidememoError as error:
                self.bodies.append(error.code.value)
        if self.fail:
            raise RuntimeError("boom")
        return self.response


def http_scope(
    method: str = "GET",
    path: str = "/x",
    query: bytes = b"",
    headers: Iterable[tuple[bytes, bytes]] = (),
) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "path": path,
        "raw_path": path.encode(),
        "query_string": query,
        "headers": list(headers),
    }


def call(
    app: Any, scope: dict[str, Any], messages: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], int]:
    """Run one ASGI call; returns what was sent and how many messages were received."""
    sent: list[dict[str, Any]] = []
    pending = list(messages)
    received = 0

    async def receive() -> dict[str, Any]:
        nonlocal received
        received += 1
        if pending:
            return pending.pop(0)
        await asyncio.sleep(3600)  # like a server: nothing more until the client speaks
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(asyncio.wait_for(app(scope, receive, send), 5))
    return sent, received


def response_headers(sent: list[dict[str, Any]]) -> dict[str, str]:
    start = sent[0]
    assert start["type"] == "http.response.start"
    return {k.decode(): v.decode() for k, v in start["headers"]}


def test_headers_lower_cased_and_duplicates_joined() -> None:
    rec = Recorder()
    headers = [(b"X-Thing", b"a"), (b"x-thing", b"b"), (b"Content-Type", b"application/json")]
    call(create_asgi_app(rec), http_scope(headers=headers), [])
    seen = rec.requests[0].headers
    assert seen["x-thing"] == "a, b"
    assert seen["content-type"] == "application/json"


def test_raw_query_string_and_path_passed() -> None:
    rec = Recorder()
    call(create_asgi_app(rec), http_scope(path="/v1/a", query=b"q=%20x&limit=2"), [])
    assert rec.requests[0].path == "/v1/a"
    assert rec.requests[0].query == "q=%20x&limit=2"


def test_body_read_in_chunks() -> None:
    rec = Recorder()
    messages = [
        {"type": "http.request", "body": b'{"a":', "more_body": True},
        {"type": "http.request", "body": b"1}", "more_body": False},
    ]
    call(create_asgi_app(rec), http_scope("POST"), messages)
    assert rec.bodies == [b'{"a":1}']


def test_content_length_over_limit_is_not_read() -> None:
    rec = Recorder(read=False)
    length = str(MAX_REQUEST_BODY_BYTES + 1).encode()
    sent, received = call(
        create_asgi_app(rec), http_scope("POST", headers=[(b"content-length", length)]), []
    )
    assert received == 0
    assert rec.requests[0].body.length == MAX_REQUEST_BODY_BYTES + 1
    assert sent[0]["status"] == 200  # the recorder answers; the real app says 413
    assert response_headers(sent)["connection"] == "close"  # the body was never read


def test_streamed_body_stops_reading_past_the_limit() -> None:
    rec = Recorder()
    chunk = b"x" * (256 * 1024)
    messages = [{"type": "http.request", "body": chunk, "more_body": True} for _ in range(20)]
    _, received = call(create_asgi_app(rec), http_scope("POST"), messages)
    assert rec.bodies == ["payload_too_large"]
    assert received == 5  # 5 x 256 KiB passes 1 MiB; the other 15 chunks are never read


def test_body_of_exactly_the_limit_is_accepted() -> None:
    rec = Recorder()
    body = b"x" * MAX_REQUEST_BODY_BYTES
    call(
        create_asgi_app(rec),
        http_scope("POST"),
        [{"type": "http.request", "body": body, "more_body": False}],
    )
    assert rec.bodies == [body]


def test_real_app_answers_413_for_too_large_body() -> None:
    app = create_asgi_app(HttpApp(MemoryStore()))
    length = str(MAX_REQUEST_BODY_BYTES + 1).encode()
    headers = [(b"content-length", length), (b"content-type", b"application/json")]
    sent, received = call(app, http_scope("POST", "/v1/projects/p/sessions", headers=headers), [])
    assert sent[0]["status"] == 413 and received == 0
    assert json.loads(sent[1]["body"])["error"]["code"] == "payload_too_large"
    assert response_headers(sent)["connection"] == "close"


def test_http1_unauthenticated_streamed_body_is_refused_after_its_first_chunk() -> None:
    app = create_asgi_app(HttpApp(MemoryStore()))
    chunk = b"x" * (64 * 1024)
    messages = [{"type": "http.request", "body": chunk, "more_body": True} for _ in range(40)]
    headers = [(b"transfer-encoding", b"chunked"), (b"content-type", b"application/json")]
    sent, received = call(
        app, http_scope("POST", "/v1/projects/p/sessions", headers=headers), messages
    )
    assert sent[0]["status"] == 401 and received == 1  # stage one ran on the first chunk only
    assert json.loads(sent[1]["body"])["error"]["code"] == "authentication_failed"
    assert response_headers(sent)["connection"] == "close"


def test_real_app_health() -> None:
    sent, _ = call(create_asgi_app(HttpApp(MemoryStore())), http_scope("GET", "/health"), [])
    assert sent[0]["status"] == 200
    assert json.loads(sent[1]["body"])["status"] == "ok"
    headers = response_headers(sent)
    assert int(headers["content-length"]) == len(sent[1]["body"])


def test_request_id_generated_and_echoed() -> None:
    rec = Recorder()
    sent, _ = call(create_asgi_app(rec), http_scope(), [])
    rid = rec.requests[0].request_id
    assert len(rid) == 16 and int(rid, 16) >= 0
    assert response_headers(sent)["x-request-id"] == rid


def test_valid_incoming_request_id_is_kept() -> None:
    rec = Recorder()
    sent, _ = call(create_asgi_app(rec), http_scope(headers=[(b"x-request-id", b"trace-1.a")]), [])
    assert rec.requests[0].request_id == "trace-1.a"
    assert response_headers(sent)["x-request-id"] == "trace-1.a"


@pytest.mark.parametrize("bad", [b"has space", b"x" * 129, b"", b"a\tb", b"caf\xc3\xa9"])
def test_invalid_incoming_request_id_is_replaced(bad: bytes) -> None:
    rec = Recorder()
    call(create_asgi_app(rec), http_scope(headers=[(b"x-request-id", bad)]), [])
    rid = rec.requests[0].request_id
    assert rid != bad.decode("latin-1") and len(rid) == 16


def test_disconnect_before_body_sends_nothing() -> None:
    rec = Recorder()
    sent, _ = call(create_asgi_app(rec), http_scope("POST"), [{"type": "http.disconnect"}])
    assert sent == [] and rec.requests == []


def test_dispatch_raising_becomes_retryable_503_without_internals(
    caplog: pytest.LogCaptureFixture,
) -> None:
    rec = Recorder(fail=True)
    with caplog.at_level(logging.ERROR):
        sent, _ = call(create_asgi_app(rec), http_scope(), [])
    assert sent[0]["status"] == 503
    assert "boom" not in sent[1]["body"].decode()
    assert response_headers(sent)["retry-after"] == "1"


def test_http14_reads_on_the_loop_writes_in_the_pool_without_a_store_lane() -> None:
    import threading

    threads: list[str] = []

    class Where(Recorder):
        def dispatch(self, request: Request) -> Response:
            threads.append(threading.current_thread().name)
            return super().dispatch(request)

    main = threading.main_thread().name
    empty = [{"type": "http.request", "body": b"", "more_body": False}]
    call(create_asgi_app(Where()), http_scope("GET", "/health"), [])
    call(create_asgi_app(Where()), http_scope("GET"), [])  # no such route
    call(create_asgi_app(Where()), http_scope("POST"), empty)
    call(create_asgi_app(Where()), http_scope("POST", "/v1/projects/p/facts"), empty)
    assert threads[:2] == [main, main]
    assert threads[2] != main and threads[3] != main


def test_access_log_has_request_id_never_token_or_query(caplog: pytest.LogCaptureFixture) -> None:
    token = "f" * 64
    rec = Recorder()
    headers = [(b"authorization", f"Bearer {token}".encode()), (b"x-request-id", b"rid-42")]
    with caplog.at_level(logging.INFO, logger=ACCESS_LOGGER):
        call(create_asgi_app(rec), http_scope("GET", "/v1/p", b"q=secret", headers), [])
    lines = [r.getMessage() for r in caplog.records if r.name == ACCESS_LOGGER]
    assert len(lines) == 1
    line = lines[0]
    assert "request_id=rid-42" in line and "method=GET" in line and "path=/v1/p" in line
    assert "status=200" in line and "duration_ms=" in line
    assert token not in line and "secret" not in line and "Bearer" not in line


def test_access_log_quotes_odd_paths(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger=ACCESS_LOGGER):
        call(create_asgi_app(Recorder()), http_scope(path="/a b\nforged=1"), [])
    line = next(r.getMessage() for r in caplog.records if r.name == ACCESS_LOGGER)
    assert "\n" not in line and 'path="/a b\\nforged=1"' in line


def test_lifespan_startup_and_shutdown_run_hooks() -> None:
    calls: list[str] = []
    app = create_asgi_app(
        Recorder(), on_startup=lambda: calls.append("up"), on_shutdown=lambda: calls.append("down")
    )
    sent, _ = call(
        app,
        {"type": "lifespan", "asgi": {"version": "3.0"}},
        [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}],
    )
    assert [m["type"] for m in sent] == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert calls == ["up", "down"]


def test_lifespan_startup_failure_is_reported(caplog: pytest.LogCaptureFixture) -> None:
    def explode() -> None:
        raise RuntimeError("no store")

    with caplog.at_level(logging.CRITICAL):
        sent, _ = call(
            create_asgi_app(Recorder(), on_startup=explode),
            {"type": "lifespan", "asgi": {"version": "3.0"}},
            [{"type": "lifespan.startup"}],
        )
    assert sent == [{"type": "lifespan.startup.failed", "message": "no store"}]


def test_websocket_is_refused() -> None:
    sent, _ = call(
        create_asgi_app(Recorder()),
        {"type": "websocket", "path": "/ws", "headers": []},
        [{"type": "websocket.connect"}],
    )
    assert sent == [{"type": "websocket.close", "code": 1008}]


def test_srch7_a_search_is_answered_off_the_event_loop_on_both_entries() -> None:
    """Other reads of a local store run on the loop; a search never does (SRCH-7), on the ASGI
    path and on the direct path alike, so `/health` is not queued behind one: it runs on the
    pool lane's search thread."""
    import threading

    from aidememo.http.routes import resolve
    from origin.lanes import Lane, StoreTraits, lane

    threads: list[str] = []

    class Where(Recorder):
        def dispatch(self, request: Request) -> Response:
            threads.append(threading.current_thread().name)
            return super().dispatch(request)

    main = threading.main_thread().name
    search = "/v1/projects/p1/search"
    call(create_asgi_app(Where()), http_scope("GET", search), [])
    call(create_asgi_app(Where()), http_scope("GET", "/health"), [])
    assert threads[0].startswith("aidememo-search") and threads[1] == main
    local = StoreTraits()
    assert lane("GET", resolve("GET", search).route, True, local) is Lane.POOL
    assert lane("GET", resolve("GET", "/health").route, True, local) is Lane.LOOP
    pooled = StoreTraits(connections=4)
    assert lane("GET", resolve("GET", search).route, True, pooled) is Lane.STORE


def test_srch7_the_direct_path_answers_a_search_from_the_search_thread() -> None:
    import asyncio
    import threading

    from origin.direct import DirectCycle, DirectEntry

    threads: list[str] = []

    class Where(Recorder):
        def dispatch(self, request: Request) -> Response:
            threads.append(threading.current_thread().name)
            return super().dispatch(request)

    entry = create_asgi_app(Where()).direct  # type: ignore[attr-defined]
    assert isinstance(entry, DirectEntry)

    async def answer(path: str) -> int:
        done: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        cycle = DirectCycle("GET", path, b"", {}, True)
        request = entry.request(cycle)
        where = entry.place(request)
        respond = lambda _c, _rid, r: done.set_result(r.status)  # noqa: E731
        entry.run(asyncio.get_running_loop(), cycle, request, where, respond)
        return await asyncio.wait_for(done, 10)

    async def both() -> list[int]:
        return [await answer("/v1/projects/p1/search"), await answer("/health")]

    assert asyncio.run(both()) == [200, 200]
    assert threads[0].startswith("aidememo-search")
    assert threads[1] == threading.main_thread().name
