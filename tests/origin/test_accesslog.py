"""The access line's cheap path (origin.accesslog): the formatter's own text, byte for byte,
and the ordinary record path whenever the logging configuration is not the server's."""

from __future__ import annotations

import io
import json
import logging
import logging.config
import os
import time
from collections.abc import Iterator

import pytest

from origin.accesslog import ACCESS_FORMAT, AccessLog
from origin.logjson import JsonFormatter
from origin.logsink import (
    BackgroundStreamHandler,
    CachedTimeFormatter,
    ClientDetailFilter,
    LineFormat,
    access_record,
    record_template,
)
from origin.server import LOG_FORMAT, WORKER_LOG_FORMAT, logging_config

ARGS = [
    ("0123456789abcdef", "GET", "/v1/projects/p/resources/fact/f-1", 200, 0.004),
    ("req-1", "POST", '"/v1/x y"', 503, 1234.5678),
    ("r", "-", "-", 431, 0.0),
]


@pytest.fixture
def access_logger() -> Iterator[tuple[logging.Logger, BackgroundStreamHandler, io.StringIO]]:
    """A logger set up as the server sets up `aidememo.access`: no handler of its own, its
    records propagating to a parent with one background handler and the client filter."""
    parent = logging.getLogger("test.accesslog")
    logger = logging.getLogger("test.accesslog.access")
    stream = io.StringIO()
    handler = BackgroundStreamHandler(stream, window_s=30)
    handler.setFormatter(CachedTimeFormatter(LOG_FORMAT))
    handler.addFilter(ClientDetailFilter())
    parent.handlers, parent.propagate, parent.level = [handler], False, logging.INFO
    logger.handlers, logger.propagate, logger.level = [], True, logging.NOTSET
    yield logger, handler, stream
    handler.close()
    parent.handlers = []


def only(logger: logging.Logger, handler: logging.Handler) -> None:
    """Make `handler` the one handler of the logger's parent again: pytest's log capture adds
    its own handlers for the test's call phase, after the fixture ran."""
    assert logger.parent is not None
    logger.parent.handlers = [handler]


@pytest.mark.parametrize("fmt", [LOG_FORMAT, WORKER_LOG_FORMAT], ids=["text", "workers"])
def test_http6_a_fast_access_line_is_the_formatters_own_text(fmt: str) -> None:
    logger = logging.getLogger("aidememo.access")
    formatter = CachedTimeFormatter(fmt)
    template = record_template(logger, ACCESS_FORMAT, "handle_http")
    line_format = LineFormat.of(formatter, template)
    assert line_format is not None
    base = time.time()
    for step in range(0, 3000, 7):  # within one second, across seconds, each millisecond
        created = base + step / 1000
        for args in ARGS:
            record = access_record(template, args)
            record.created = created
            record.msecs = int((created - int(created)) * 1000) + 0.0
            assert line_format.text(args, created) == formatter.format(record)


def test_http6_formats_that_need_the_record_take_the_record_path() -> None:
    template = record_template(logging.getLogger("aidememo.access"), ACCESS_FORMAT, "f")
    for formatter in (
        logging.Formatter(LOG_FORMAT),  # not the cached-time formatter
        JsonFormatter(),
        CachedTimeFormatter("%(asctime)s %(threadName)s %(message)s"),  # varies per record
        CachedTimeFormatter("%(asctime)s %(message)-80s"),  # a padded message
        CachedTimeFormatter(LOG_FORMAT, datefmt="%H:%M:%S"),
        CachedTimeFormatter("{asctime} {message}", style="{"),
    ):
        assert LineFormat.of(formatter, template) is None, formatter


def test_http6_the_servers_configuration_takes_the_fast_path(
    access_logger: tuple[logging.Logger, BackgroundStreamHandler, io.StringIO],
) -> None:
    logger, handler, stream = access_logger
    only(logger, handler)
    access = AccessLog(logger, ACCESS_FORMAT, "handle_http")
    assert access.enabled()
    access.write(ARGS[0])
    assert type(handler._pending[0]) is tuple  # no record was made
    handler.flush()
    written = stream.getvalue().splitlines()
    assert len(written) == 1
    assert written[0].endswith(
        " INFO test.accesslog.access request_id=0123456789abcdef method=GET"
        " path=/v1/projects/p/resources/fact/f-1 status=200 duration_ms=0.00"
    )


def test_http6_another_handler_a_filter_or_formatter_gets_records(
    access_logger: tuple[logging.Logger, BackgroundStreamHandler, io.StringIO],
) -> None:
    logger, handler, stream = access_logger
    only(logger, handler)
    access = AccessLog(logger, ACCESS_FORMAT, "handle_http")
    seen: list[logging.LogRecord] = []

    class Capture(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record)

    capture = Capture()
    logger.addHandler(capture)  # e.g. a test capturing the lines: both handlers get them
    access.write(ARGS[0])
    logger.removeHandler(capture)
    assert len(seen) == 1 and seen[0].getMessage().startswith("request_id=0123456789abcdef")
    assert isinstance(handler._pending[0], logging.LogRecord)

    logger.addFilter(lambda record: False)  # the logger's own filter decides
    access.write(ARGS[1])
    logger.filters.clear()
    handler.setFormatter(JsonFormatter())  # a changed formatter takes effect at once
    access.write(ARGS[2])
    handler.flush()
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2 and "req-1" not in stream.getvalue()
    assert json.loads(lines[1])["message"].startswith("request_id=r method=- path=- status=431")


def test_http6_a_quiet_logger_writes_nothing(
    access_logger: tuple[logging.Logger, BackgroundStreamHandler, io.StringIO],
) -> None:
    logger, handler, stream = access_logger
    only(logger, handler)
    access = AccessLog(logger, ACCESS_FORMAT, "handle_http")
    logger.setLevel(logging.WARNING)
    assert not access.enabled()
    handler.setLevel(logging.WARNING)
    logger.setLevel(logging.NOTSET)
    access.write(ARGS[0])  # the handler's level: the record path, which drops the line
    handler.flush()
    assert stream.getvalue() == ""


def test_http6_the_server_logging_config_is_fast_path_eligible() -> None:
    """`origin.server.logging_config` (text) is what the fast path was made for; json is not."""
    saved = {
        name: (lg.handlers[:], lg.level, lg.propagate)
        for name in ("aidememo", "uvicorn", "uvicorn.access")
        for lg in [logging.getLogger(name)]
    }
    try:
        logging.config.dictConfig(logging_config("INFO"))
        access = AccessLog(logging.getLogger("aidememo.access"), ACCESS_FORMAT, "handle_http")
        handler = access._sole_handler()
        assert handler is not None and access._line_format(handler.formatter) is not None
        logging.config.dictConfig(logging_config("INFO", log_format="json"))
        handler = access._sole_handler()
        assert handler is not None and access._line_format(handler.formatter) is None
    finally:
        for name, (handlers, level, propagate) in saved.items():
            lg = logging.getLogger(name)
            for each in lg.handlers:
                if each not in handlers:
                    each.close()
            lg.handlers, lg.level, lg.propagate = handlers, level, propagate


def test_http6_a_fast_line_that_cannot_be_written_is_reported_as_its_record(
    access_logger: tuple[logging.Logger, BackgroundStreamHandler, io.StringIO],
) -> None:
    logger, handler, stream = access_logger
    only(logger, handler)
    access = AccessLog(logger, ACCESS_FORMAT, "handle_http")
    reported: list[logging.LogRecord] = []
    handler.handleError = reported.append  # type: ignore[method-assign,assignment]
    access.write(("rid-bad", "GET", "/x", "not a status", 1.0))  # %d of a str fails
    access.write(ARGS[0])
    handler.flush()
    assert len(reported) == 1
    bad = reported[0]
    assert bad.name == "test.accesslog.access" and bad.args == (
        "rid-bad",
        "GET",
        "/x",
        "not a status",
        1.0,
    )
    assert stream.getvalue().count("\n") == 1 and "request_id=0123456789abcdef" in stream.getvalue()


def test_http6_a_forked_worker_names_its_own_process() -> None:
    """`serve --workers` forks after `ACCESS` was made: each worker's lines carry its pid."""
    from origin.accesslog import ACCESS

    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child reports the pid its access records carry
        os.write(write, str(ACCESS._template["process"]).encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    assert int(os.read(read, 64)) == pid
    os.close(read)
