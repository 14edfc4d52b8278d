"""The request path's cheap logging (origin.logsink) and the adapter's own dispatch pool."""

from __future__ import annotations

import io
import logging
import threading
import time
from typing import Any

import pytest

from aidememo.http.types import Request, Response
from origin.asgi import create_asgi_app
from origin.logsink import (
    AccessRecord,
    BackgroundStreamHandler,
    CachedTimeFormatter,
    access_record,
    record_template,
)
from origin.server import LOG_FORMAT
from tests.origin.http_support import request
from tests.origin.thread_server import LOOP_THREAD, ThreadServer

FMT = "request_id=%s method=%s path=%s status=%d duration_ms=%.2f"


def handler_on(
    stream: io.StringIO, **kwargs: Any
) -> tuple[logging.Logger, BackgroundStreamHandler]:
    handler = BackgroundStreamHandler(stream, **kwargs)
    handler.setFormatter(CachedTimeFormatter(LOG_FORMAT))
    logger = logging.getLogger(f"test.logsink.{id(handler)}")
    logger.handlers, logger.propagate = [handler], False
    logger.setLevel(logging.INFO)
    return logger, handler


def test_http6_cached_time_formatter_writes_what_the_plain_formatter_writes() -> None:
    plain, cached = logging.Formatter(LOG_FORMAT), CachedTimeFormatter(LOG_FORMAT)
    record = logging.LogRecord("aidememo.access", logging.INFO, __file__, 1, "m %s", ("x",), None)
    base = time.time()
    for step in range(0, 5000, 7):  # within one second, across seconds, each millisecond
        now = base + step / 1000
        record.created, record.msecs = now, int((now - int(now)) * 1000) + 0.0
        assert cached.format(record) == plain.format(record)


def test_http6_access_record_formats_like_an_ordinary_record() -> None:
    logger = logging.getLogger("aidememo.access")
    template = record_template(logger, FMT, "handle_http")
    args = ("rid-1", "GET", "/v1/p", 200, 1.5)
    made = access_record(template, args)
    plain = logger.makeRecord(logger.name, logging.INFO, __file__, 1, FMT, args, None)
    assert isinstance(made, AccessRecord) and isinstance(made, logging.LogRecord)
    assert made.getMessage() == plain.getMessage()
    assert (made.name, made.levelname, made.levelno) == ("aidememo.access", "INFO", logging.INFO)
    assert abs(made.created - plain.created) < 5 and made.thread == threading.get_ident()
    formatter = logging.Formatter(LOG_FORMAT)
    assert formatter.format(made).split(" ", 2)[2] == formatter.format(plain).split(" ", 2)[2]
    assert set(plain.__dict__) <= set(made.__dict__)

    seen: list[AccessRecord] = []
    other = threading.Thread(target=lambda: seen.append(access_record(template, args)))
    other.start()
    other.join()
    assert seen[0].thread == other.ident and seen[0].threadName == other.name


def test_http6_every_line_is_written_in_order_once_flushed() -> None:
    stream = io.StringIO()
    logger, handler = handler_on(stream)

    def burst(tag: int) -> None:
        for i in range(500):
            logger.info("line %d %d", tag, i)

    threads = [threading.Thread(target=burst, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    handler.flush()
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2000
    for tag in range(4):
        mine = [int(line.rsplit(" ", 1)[1]) for line in lines if f" line {tag} " in line]
        assert mine == list(range(500))
    assert all(" INFO test.logsink." in line for line in lines)
    handler.close()


def test_http6_lines_are_written_without_a_flush_within_the_window() -> None:
    stream = io.StringIO()
    logger, handler = handler_on(stream, window_s=0.01)
    logger.info("soon")
    deadline = time.monotonic() + 5
    while "soon" not in stream.getvalue() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert "soon" in stream.getvalue()
    handler.close()


def test_http6_too_many_pending_lines_are_written_by_the_emitting_thread() -> None:
    stream = io.StringIO()
    logger, handler = handler_on(stream, max_pending=5, window_s=30)
    for i in range(6):
        logger.info("n=%d", i)
    assert stream.getvalue().count("n=") == 6  # no flush: emit itself wrote them
    handler.close()


def test_http6_arguments_are_merged_at_emit_and_close_writes_the_rest() -> None:
    stream = io.StringIO()
    logger, handler = handler_on(stream, window_s=30)
    items = ["before"]
    logger.info("items %s", items)
    items.append("after")  # changed once logged: the line shows it as it was
    handler.close()
    assert "items ['before']" in stream.getvalue()
    logger.info("after close")  # written at once, not lost
    assert "after close" in stream.getvalue()


class Where:
    """A dispatcher that records the thread each request ran on."""

    def __init__(self) -> None:
        self.threads: list[str] = []

    def dispatch(self, request: Request) -> Response:
        self.threads.append(threading.current_thread().name)
        return Response(200, [("content-type", "application/json")], b"{}")


def test_http14_offloaded_requests_run_in_the_apps_own_pool_until_shutdown() -> None:
    where = Where()
    before = {t.name for t in threading.enumerate()}
    with ThreadServer(where, threads=3) as server, server.conn() as conn:
        for method in ("POST", "POST", "POST", "POST", "POST", "GET"):
            conn.send(request(method, "/x", b"{}" if method == "POST" else b""))
            assert conn.read().status_line.endswith(b"200 OK")
    posts, gets = where.threads[:5], where.threads[5:]
    assert all(name.startswith("aidememo-dispatch") for name in posts)
    assert gets == [LOOP_THREAD]  # the GET, on the loop
    left = {t.name for t in threading.enumerate()} - before
    assert not any(name.startswith("aidememo-dispatch") for name in left)


def test_http14_a_pool_without_threads_is_refused() -> None:
    with pytest.raises(ValueError):
        create_asgi_app(Where(), threads=0)
