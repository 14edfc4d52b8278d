"""Cheap logging for the request path: a background stream handler and a fast access record.

`logging.Logger.info` with a `StreamHandler` costs tens of microseconds per call on the event
loop (caller lookup, record construction, formatting, one `write` and `flush` per line); at a
few thousand requests per second that is a large share of one core, spent on the access log
alone. What this module changes, without changing a single written line:

- `BackgroundStreamHandler`: `emit` only appends the record to a deque (no lock; the writer
  is woken only when it is idle). A writer thread formats
  whatever has piled up and writes it with one `write` and one `flush`, so formatting and I/O
  leave the event loop, and under load one syscall carries many lines. It loses nothing:
  `flush()` (also run by `logging.shutdown` at exit and by `origin.server.serve` after the
  server stopped) waits until every line emitted before it is written; when more than
  `max_pending` lines wait, `emit` writes them itself (back-pressure, as a blocking stream
  gave before). A record that is not an `AccessRecord` has its message merged at `emit`, like
  `logging.handlers.QueueHandler` does, so arguments changed later cannot change its line.
- `CachedTimeFormatter`: a `logging.Formatter` whose default `asctime` is built once per
  second (`time.strftime` is most of a record's formatting cost), byte for byte the same text.
- `AccessRecord`: a `LogRecord` made by copying a template record's attributes instead of
  running `LogRecord.__init__` (path splitting, thread and process lookups) and the caller
  lookup of `Logger._log`; handlers and formatters see an ordinary record. Its arguments are
  plain str, int and float, so formatting it later on the writer thread is safe.
- `ClientDetailFilter`: keeps the server's own records from writing a client address, a query
  string or a header value (SPEC.md HTTP-6); `origin.server` puts it on the stderr handler.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import threading
import time
import weakref
from collections import deque
from typing import Any, TextIO, TypeAlias

DEFAULT_MAX_PENDING = 20_000
"""Lines that may wait for the writer thread before `emit` writes them itself."""
DEFAULT_WINDOW_S = 0.02
"""How long the writer thread, woken by a first line, lets more lines gather before writing."""


class CachedTimeFormatter(logging.Formatter):
    """`logging.Formatter` with the default `asctime` computed once per second."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._second: tuple[int, str] = (-1, "")  # replaced whole: safe on any thread

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        if datefmt is not None or not self.default_msec_format:
            return super().formatTime(record, datefmt)
        return self.time_text(record.created, record.msecs)

    def second_text(self, created: float) -> str:
        """The default time format's text of the second of `created`."""
        second = int(created)
        cached = self._second
        if cached[0] == second:
            return cached[1]
        text = time.strftime(self.default_time_format, self.converter(created))
        self._second = (second, text)
        return text

    def time_text(self, created: float, msecs: float) -> str:
        """The default `asctime` of a record made at `created` (its `msecs` given); only
        with a `default_msec_format` (`formatTime` checks)."""
        msec_format = self.default_msec_format
        assert msec_format is not None
        return msec_format % (self.second_text(created), msecs)


_ADDRESS_TEMPLATES = ('%s - "WebSocket ', "%s:%d - ")
# The websockets library's INFO lines, logged through uvicorn's logger once per WebSocket: the
# access line (`origin.live`, `origin.transport`) already says each of them.
_WEBSOCKET_LINES = frozenset(
    {"connection open", "connection rejected (%d %s)", "connection closed"}
)


SHARED_FIELDS = frozenset(
    {
        "name",
        "levelname",
        "levelno",
        "pathname",
        "filename",
        "module",
        "funcName",
        "lineno",
        "process",
        "processName",
    }
)
"""Record attributes that are the same on every access record of one `AccessLog`."""

_FIELD = re.compile(r"%\((\w+)\)")
_TIME = "\x00asctime\x00"
_MESSAGE = "\x00message\x00"


class LineFormat:
    """The text a `CachedTimeFormatter` writes for the access records of one template, with
    the time and the message left open: `text(args, created)` fills them in."""

    __slots__ = ("formatter", "line", "msec_format", "msg", "pieces", "template")

    def __init__(self, formatter: CachedTimeFormatter, template: dict[str, Any]) -> None:
        self.formatter = formatter
        self.template = template  # a line's record, when one is needed (`logsink._record_of`)
        self.msg: str = template["msg"]
        values = dict(template)
        values["asctime"], values["message"] = _TIME, _MESSAGE
        rendered: str = formatter._fmt % values  # type: ignore[operator]
        self.pieces = [piece for piece in re.split(f"({_TIME}|{_MESSAGE})", rendered) if piece]
        # The usual shape, the time once and then the message once: the whole line is one
        # %-format of (the second's text, msecs, *args), the formatter's millisecond format
        # and the message's own conversions spliced in.
        self.msec_format = formatter.default_msec_format
        self.line: str | None = None
        markers = [piece for piece in self.pieces if piece in (_TIME, _MESSAGE)]
        msec = self.msec_format or "%("
        if markers == [_TIME, _MESSAGE] and "%(" not in self.msg and "%(" not in msec:
            self.line = "".join(
                msec if p == _TIME else self.msg if p == _MESSAGE else p.replace("%", "%%")
                for p in self.pieces
            )

    @classmethod
    def of(cls, formatter: logging.Formatter | None, template: dict[str, Any]) -> LineFormat | None:
        """The line format of `formatter` for `template`, or None when the formatter's text
        of a record could depend on more than its time and message."""
        if type(formatter) is not CachedTimeFormatter:
            return None
        fmt = formatter._fmt
        if (
            fmt is None
            or type(formatter._style) is not logging.PercentStyle
            or formatter.datefmt is not None
            or not formatter.default_msec_format
            or _TIME in fmt
            or _MESSAGE in fmt
        ):
            return None
        fields = _FIELD.findall(fmt)
        plain = fmt.count("%(asctime)s") + fmt.count("%(message)s")
        if not set(fields) <= SHARED_FIELDS | {"asctime", "message"}:
            return None
        if plain != fields.count("asctime") + fields.count("message"):
            return None  # a padded or otherwise converted time or message
        if template.get("exc_info") is not None or template.get("stack_info") is not None:
            return None
        try:
            return cls(formatter, template)
        except (KeyError, TypeError, ValueError):
            return None

    def text(self, args: tuple[Any, ...], created: float) -> str:
        """The line of a record with `args` made at `created`, as the formatter writes it."""
        formatter = self.formatter
        line = self.line
        if line is not None and formatter.default_msec_format is self.msec_format:
            text: str = line % (formatter.second_text(created), msecs_of(created), *args)
            return text
        asctime = formatter.time_text(created, msecs_of(created))
        message = self.msg % args
        return "".join(
            asctime if piece == _TIME else message if piece == _MESSAGE else piece
            for piece in self.pieces
        )


class ClientDetailFilter(logging.Filter):
    """Drops the server's records that could carry a client address, a query string or a
    header value: everything below INFO from `uvicorn*` and `websockets*` (uvicorn's TRACE
    lines start with the client address; the websockets library's DEBUG lines print request
    heads), every `uvicorn.access` record, uvicorn's WebSocket handshake lines
    (`'%s - "WebSocket %s" ...'`: client address, path and query string) and the websockets
    library's per-connection INFO lines, so that a refused upgrade is its one access line.
    Other records pass."""

    def filter(self, record: logging.LogRecord) -> bool:
        name = record.name
        if not name.startswith(("uvicorn", "websockets")):
            return True
        if record.levelno < logging.INFO or name == "uvicorn.access":
            return False
        msg = record.msg
        if not isinstance(msg, str):
            return True
        return not (msg.startswith(_ADDRESS_TEMPLATES) or msg in _WEBSOCKET_LINES)


class AccessRecord(logging.LogRecord):
    """A `LogRecord` built from a template by `access_record`; see the module doc."""


_new_record = object.__new__
get_ident = threading.get_ident
_start_time: float = getattr(logging, "_startTime", time.time())


def record_template(logger: logging.Logger, msg: str, func: str, depth: int = 1) -> dict[str, Any]:
    """The attributes every access record of `logger` shares: an ordinary record's, made once
    (so a newer Python's extra attributes are there too), located at the caller's line
    (`depth` frames up)."""
    frame = sys._getframe(depth)
    record = logger.makeRecord(
        logger.name,
        logging.INFO,
        frame.f_code.co_filename,
        frame.f_lineno,
        msg,
        (),
        None,
        func,
    )
    return dict(record.__dict__)


def msecs_of(created: float) -> float:
    """A record's `msecs` for its `created` time, as `logging.LogRecord` computes it."""
    return int((created - int(created)) * 1000) + 0.0


def access_record(
    template: dict[str, Any], args: tuple[Any, ...], created: float | None = None
) -> AccessRecord:
    """A record of `template` with `args`, stamped `created` (default now), on the current
    thread."""
    record: AccessRecord = _new_record(AccessRecord)
    attrs = record.__dict__
    attrs.update(template)
    now = time.time() if created is None else created
    attrs["args"] = args
    attrs["created"] = now
    attrs["msecs"] = msecs_of(now)
    attrs["relativeCreated"] = (now - _start_time) * 1000
    if get_ident() != template["thread"]:  # the template's thread (the event loop) or another
        current = threading.current_thread()
        attrs["thread"] = current.ident
        attrs["threadName"] = current.name
    return record


Pending: TypeAlias = logging.LogRecord | tuple["LineFormat", tuple[Any, ...], float]
"""What a background handler holds for its writer: a record, or an access line's format,
arguments and time (`BackgroundStreamHandler.emit_line`)."""


def _record_of(item: Pending) -> logging.LogRecord:
    """The record of a pending item, made for an access line (for `handleError`)."""
    if isinstance(item, logging.LogRecord):
        return item
    line_format, args, created = item
    return access_record(line_format.template, args, created)


class BackgroundStreamHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """A `StreamHandler` whose records are formatted and written by a writer thread."""

    def __init__(
        self,
        stream: TextIO | None = None,
        max_pending: int = DEFAULT_MAX_PENDING,
        window_s: float = DEFAULT_WINDOW_S,
    ) -> None:
        super().__init__(stream)
        self.max_pending = max_pending
        self.window_s = window_s
        self._pending: deque[Pending] = deque()  # appended and taken without a lock
        self._cond = threading.Condition(threading.Lock())  # wakes an idle writer
        self._writing = threading.Lock()  # one batch at a time, taken and written in order
        self._writer: threading.Thread | None = None
        self._idle = False  # the writer is about to wait, or waits, for records
        self._closing = False
        self._stop = threading.Event()  # cuts the window short at close
        ref = weakref.ref(self)
        os.register_at_fork(after_in_child=lambda: _after_fork(ref))

    def emit(self, record: logging.LogRecord) -> None:
        if type(record) is not AccessRecord and record.args:
            try:
                record.msg, record.args = record.getMessage(), None
            except Exception:
                self.handleError(record)
                return
        self._enqueue(record)

    def emit_line(self, line_format: LineFormat, args: tuple[Any, ...], created: float) -> None:
        """Queue an access line without a record (`origin.accesslog`): the writer thread
        writes `line_format.text(args, created)`. The caller has checked that this handler
        takes the line as it is (level, filters, formatter)."""
        self._enqueue((line_format, args, created))

    def _enqueue(self, item: Pending) -> None:
        """Append `item` (a deque's `append` is atomic: no lock on the request path) and
        wake the writer only when it is idle. The writer sets `_idle` before it looks at the
        queue a last time and waits, under `_cond`: an item appended after that look finds
        `_idle` set and notifies under the same lock, so no wake-up is lost."""
        pending = self._pending
        pending.append(item)
        if self._idle:
            with self._cond:
                if self._idle:
                    self._idle = False
                    self._cond.notify()
        if self._writer is None and not self._closing:
            self._start_writer()
        if len(pending) > self.max_pending or self._closing:
            self._write_pending()

    def _start_writer(self) -> None:
        with self._cond:
            if self._writer is not None or self._closing:
                return
            self._writer = threading.Thread(
                target=self._run, name="aidememo-log-writer", daemon=True
            )
        self._writer.start()

    def flush(self) -> None:
        """Return once every record emitted before the call is written: what the writer has
        not taken yet is written by this thread, after the batch the writer is writing."""
        self._write_pending()
        super().flush()

    def close(self) -> None:
        with self._cond:
            self._closing = True
            writer = self._writer
            self._cond.notify_all()
        self._stop.set()
        self.flush()
        if writer is not None and writer is not threading.current_thread():
            writer.join(timeout=5)
        super().close()

    def _run(self) -> None:
        cond, pending = self._cond, self._pending
        while True:
            with cond:
                self._idle = True
                while not pending and not self._closing:
                    cond.wait()
                self._idle = False
                if not pending:
                    return  # closing and nothing left
                closing = self._closing
            if not closing:  # let lines pile up: one wake-up and one write per window
                self._stop.wait(self.window_s)
            self._write_pending()

    def _write_pending(self) -> None:
        """Take every pending record and write them with one write and one flush."""
        with self._writing:
            pending = self._pending
            batch = [pending.popleft() for _ in range(len(pending))]
            if batch:
                self._write(batch)

    def _write(self, batch: list[Pending]) -> None:
        lines: list[str] = []
        for item in batch:
            try:
                if type(item) is tuple:
                    lines.append(item[0].text(item[1], item[2]))
                else:
                    lines.append(self.format(item))  # type: ignore[arg-type]
            except Exception:
                self.handleError(_record_of(item))
        if not lines:
            return
        lines.append("")
        try:
            self.stream.write(self.terminator.join(lines))
            self.stream.flush()
        except Exception:
            self.handleError(_record_of(batch[0]))

    def _reset_after_fork(self) -> None:
        """In a forked child the writer thread is gone: start a new one on the next record.
        What the parent had pending is the parent's to write, not the child's."""
        self._cond = threading.Condition(threading.Lock())
        self._writing = threading.Lock()
        self._stop = threading.Event()
        self._writer = None
        self._idle = False
        self._pending = deque()


def _after_fork(ref: weakref.ref[BackgroundStreamHandler]) -> None:
    handler = ref()
    if handler is not None:
        handler._reset_after_fork()
