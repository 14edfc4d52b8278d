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
  attributes every access record of this logger shares (`SHARED_FIELDS`: name, level,
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
import re
import sys
import time
import weakref
from typing import Any

from origin.asgi_common import log_safe
from origin.logsink import (
    BackgroundStreamHandler,
    CachedTimeFormatter,
    ClientDetailFilter,
    access_record,
    msecs_of,
    record_template,
)

INFO = logging.INFO

ACCESS_LOGGER = "aidememo.access"
ACCESS_FORMAT = "request_id=%s method=%s path=%s status=%d duration_ms=%.2f"

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

_MADE: weakref.WeakSet[AccessLog] = weakref.WeakSet()
"""Every `AccessLog`, for `forked`."""

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


class AccessLog:
    """Access lines of one logger and template: `request(...)` writes an HTTP request's line
    (`write(args)` any line of the template's arguments). `ACCESS` is the origin's one writer:
    the ASGI and the direct path and the transport's own refusals all log through it; the live
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
