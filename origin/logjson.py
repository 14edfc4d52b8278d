"""`aidememo serve --log-format json`: one JSON object per log line (SPEC.md DEPLOY-4).

Every line has `ts` (RFC 3339, UTC, milliseconds), `level`, `logger` and `pid`. An access line
(`aidememo.access`, from `origin.transport` and `origin.live`, whose messages are `key=value` pairs)
has each pair as a field of its own, numbers as numbers and the JSON-quoted values of
`origin.asgi_common.log_safe` decoded back to their text, so `request_id`, `method`, `path`,
`status` and `duration_ms` can be queried without parsing the message. Every other line has
its text in `message` (and `exc` when it carries a traceback). What the text format leaves
out (client addresses, query strings, header values: HTTP-6) the JSON format leaves out too:
it formats the same records, after the same filter.
"""

from __future__ import annotations

import json
import logging
import re
import time
from typing import Any

ACCESS_LOGGERS = frozenset({"aidememo.access"})
_PAIR = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)')
_NUMBER = re.compile(r"-?\d+(\.\d+)?")


def _value(text: str) -> Any:
    if text.startswith('"'):
        try:
            return json.loads(text)
        except ValueError:
            return text
    if _NUMBER.fullmatch(text):
        return float(text) if "." in text else int(text)
    return text


def access_fields(message: str) -> dict[str, Any]:
    """The `key=value` pairs of an access line's message, values decoded."""
    return {key: _value(raw) for key, raw in _PAIR.findall(message)}


class JsonFormatter(logging.Formatter):
    """Formats a record as one JSON object on one line."""

    def format(self, record: logging.LogRecord) -> str:
        created = record.created
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created))
        line: dict[str, Any] = {
            "ts": f"{stamp}.{int(created * 1000) % 1000:03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "pid": record.process,
        }
        message = record.getMessage()
        if record.name in ACCESS_LOGGERS:
            fields = access_fields(message)
            line.update({k: v for k, v in fields.items() if k not in line})
            if not fields:
                line["message"] = message
        else:
            line["message"] = message
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, separators=(",", ":"))
