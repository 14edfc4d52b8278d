"""The origin's `aidememo.access` lines (SPEC.md HTTP-6), all written by `ACCESS`, cheaply.

Every request is one access line. Made as a `logging` record, that line costs the request
path a record (even one copied from a template, `origin.logsink.access_record`),
`Logger.handle` with its filter checks and handler lock, and on the writer thread
`Formatter.format`, a large share of what the HTTP layer costs a request
(docs/bench-notes.md). `AccessLog` writes the same line for less where
the logging configuration allows it:

- the logger is enabled for INFO, has no filter of its own, and all its records reach exactly
  one handler, an `origin.logsink.BackgroundStreamHandler` (the server's stderr handler,
  `origin.server.logging_config`) at INFO or below, whose filters are `ClientDetailFilter`s
  only (they pass every `aidememo.*` record);
- that handler's formatter is an `origin.logsink.CachedTimeFormatter` with the default time
  format and a %-style format naming, besides `%(asctime)s` and `%(message)s`, only
  attributes every access record of this logger shares (`logsink.SHARED_FIELDS`: name, level,
  process, the template's code location).

Then the request path only appends the line's arguments and time to the handler's pending
lines (`BackgroundStreamHandler.emit_line`), and the writer thread writes the line as the
format rendered once for this logger (`LineFormat`) with the time text and the message spliced
in: the formatter's own text, byte for byte (tests/origin/test_accesslog.py compares them).
Any other configuration (a test's capturing handler, the JSON formatter of `origin.logjson`,
a filter, a second handler) takes the ordinary record path. Both conditions are checked on
every line, so a change of the logging configuration takes effect with the next line.
"""

from __future__ import annotations

import logging
import os
import sys
import time
import weakref
from typing import Any

from origin.asgi_common import log_safe
from origin.logsink import (
    BackgroundStreamHandler,
    ClientDetailFilter,
    LineFormat,
    access_record,
    record_template,
)

INFO = logging.INFO

ACCESS_LOGGER = "aidememo.access"
ACCESS_FORMAT = "request_id=%s method=%s path=%s status=%d duration_ms=%.2f"

_MADE: weakref.WeakSet[AccessLog] = weakref.WeakSet()
"""Every `AccessLog`, for `forked`."""


class AccessLog:
    """Access lines of one logger and template: `request(...)` writes an HTTP request's line
    (`write(args)` any line of the template's arguments). `ACCESS` is the origin's one writer:
    every answer and refusal of the transport logs through it; the live
    feed's WebSocket lines go through one of their own template (`origin.live`)."""

    __slots__ = ("__weakref__", "_format", "_logger", "_template")

    def __init__(self, logger: logging.Logger, msg: str, func: str) -> None:
        self._logger = logger
        self._template = record_template(logger, msg, func, depth=2)
        self._format: tuple[logging.Formatter | None, LineFormat | None] = (None, None)
        _MADE.add(self)

    def forked(self) -> None:
        """In a forked child: the lines name this process (the template was made before)."""
        self._template["process"] = os.getpid()
        mp = sys.modules.get("multiprocessing")  # as `logging.LogRecord` names it
        if mp is not None:
            self._template["processName"] = mp.current_process().name
        self._format = (None, None)

    def request(self, rid: str, method: str, path: str, status: int, seconds: float) -> None:
        """The line of one HTTP request (its path never with the query string)."""
        if self._logger.isEnabledFor(INFO):
            self.write((rid, log_safe(method), log_safe(path), status, seconds * 1000.0))

    def enabled(self) -> bool:
        """True when the logger writes INFO lines."""
        return self._logger.isEnabledFor(INFO)

    def write(self, args: tuple[Any, ...]) -> None:
        """One line with `args`, stamped now, from the current thread."""
        handler = self._sole_handler()
        if handler is not None:
            line_format = self._line_format(handler.formatter)
            if line_format is not None:
                handler.emit_line(line_format, args, time.time())
                return
        self._logger.handle(access_record(self._template, args))

    def _sole_handler(self) -> BackgroundStreamHandler | None:
        """The one handler every record of the logger reaches, if it is a background stream
        handler whose filters pass the logger's records; else None."""
        logger: logging.Logger | None = self._logger
        if self._logger.filters or self._logger.name.startswith(("uvicorn", "websockets")):
            return None
        found: logging.Handler | None = None
        while logger is not None:
            for handler in logger.handlers:
                if found is not None:
                    return None
                found = handler
            if not logger.propagate:
                break
            logger = logger.parent
        if type(found) is not BackgroundStreamHandler or found.level > INFO:
            return None
        for each in found.filters:
            if type(each) is not ClientDetailFilter:
                return None
        return found

    def _line_format(self, formatter: logging.Formatter | None) -> LineFormat | None:
        cached_for, line_format = self._format
        if cached_for is not formatter or formatter is None:
            line_format = LineFormat.of(formatter, self._template)
            self._format = (formatter, line_format)
        return line_format


ACCESS = AccessLog(logging.getLogger(ACCESS_LOGGER), ACCESS_FORMAT, "request")
"""The origin's access lines (SPEC.md HTTP-6): every HTTP request's, whichever path answered."""


def _forked() -> None:
    for each in list(_MADE):
        each.forked()


os.register_at_fork(after_in_child=_forked)  # `serve --workers` forks after they were made
