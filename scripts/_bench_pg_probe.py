"""The probe of `scripts/bench_pg.py`'s profile: a psycopg connection that times every statement.

`probe_connector(url, sink)` makes connections with the origin factory's settings plus, for
that session only, `track_functions` and `track_wal_io_timing`; each statement's wall time
(send, server, receive) is added to `sink` under its kind (`execute_raw`, `begin`,
`begin_command`, `commit_mutation`, `commit`, `insert`, else `other`).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

PROBE_OPTIONS = "-c track_functions=pl -c track_wal_io_timing=on"

_FUNCTION = re.compile(r"\baidememo_(execute_raw|begin_command|commit_mutation)\(")
_PREFIXES = (("BEGIN", "begin"), ("COMMIT", "commit"), ("INSERT INTO bench_raw", "insert"))


def statement_kind(sql: str) -> str:
    """The server-side function a statement calls, else its leading keyword's kind."""
    called = _FUNCTION.search(sql)
    if called is not None:
        return called.group(1)
    return next((kind for prefix, kind in _PREFIXES if sql.startswith(prefix)), "other")


class _TimedCursor:
    """A cursor that adds each statement's wall time (send, server, receive) to `sink`."""

    def __init__(self, cur: Any, sink: dict[str, int]) -> None:
        self._cur = cur
        self._sink = sink

    def execute(self, sql: str, params: Any = None) -> Any:
        t0 = time.perf_counter_ns()
        try:
            return self._cur.execute(sql, params)
        finally:
            kind = statement_kind(sql)
            self._sink[kind] = self._sink.get(kind, 0) + time.perf_counter_ns() - t0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cur, name)

    def __enter__(self) -> _TimedCursor:
        return self

    def __exit__(self, *exc: Any) -> None:
        self._cur.close()


class _TimedConnection:
    def __init__(self, conn: Any, sink: dict[str, int]) -> None:
        object.__setattr__(self, "_conn", conn)
        object.__setattr__(self, "_sink", sink)

    def cursor(self) -> _TimedCursor:
        return _TimedCursor(self._conn.cursor(), self._sink)

    def commit(self) -> None:
        t0 = time.perf_counter_ns()
        try:
            self._conn.commit()
        finally:
            self._sink["commit"] = self._sink.get("commit", 0) + time.perf_counter_ns() - t0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._conn, name, value)


def probe_connector(url: str, sink: dict[str, int]) -> Callable[[], Any]:
    import psycopg

    def connect() -> Any:
        # The origin factory's settings, plus per-session statistics only the probe pays for.
        conn = psycopg.connect(
            url, autocommit=False, prepare_threshold=None, connect_timeout=5,
            options=PROBE_OPTIONS,
        )  # fmt: skip
        return _TimedConnection(conn, sink)

    return connect
