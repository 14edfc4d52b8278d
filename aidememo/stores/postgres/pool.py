"""A small bounded, thread-safe pool of DB-API connections (stdlib only).

At most `size` connections exist at once, idle or lent. `acquire` waits at most
`acquire_timeout_s` for one; an exhausted pool or a failed connect is `storage_failure`
(HTTP 503 with Retry-After), never a hang. A connection that broke while lent is discarded
on release, and its slot is free for a fresh one at the next acquire.

Connections are switched to driver autocommit as they are made: the store sends `BEGIN ...`
and `COMMIT` itself, so the isolation level is part of the `BEGIN` and no driver-side implicit
transaction ever runs (psycopg 3 and pg8000 both accept the `autocommit` attribute).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from aidememo.domain.errors import AidememoError, ErrorCode, fail
from aidememo.stores.postgres import sql as q

log = logging.getLogger("aidememo.stores.postgres")


def one_line(exc: BaseException) -> str:
    """`Type: message` with the driver's multi-line detail folded into one line."""
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}"


def close_quietly(conn: Any) -> None:
    """Close a connection, ignoring whatever its driver raises (it may be dead already)."""
    try:
        conn.close()
    except Exception as exc:  # the driver's own error types are not importable here
        log.debug("closing a postgres connection failed: %r", exc)


class ConnectionPool:
    """Lends connections made by `connect`; `size` bounds idle plus lent connections."""

    def __init__(
        self, connect: Callable[[], Any], *, size: int = 8, acquire_timeout_s: float = 1.0
    ) -> None:
        if size < 1:
            raise ValueError("pool size must be at least 1")
        self._connect = connect
        self.size = size
        self.acquire_timeout_s = acquire_timeout_s
        self._slots = threading.BoundedSemaphore(size)
        self._idle: list[Any] = []
        self._lock = threading.Lock()
        self._closed = False

    def acquire(self) -> Any:
        """An idle connection or a new one; `storage_failure` if none frees up in time."""
        if self._closed:
            raise fail(ErrorCode.STORAGE_FAILURE, "the postgres store is closed")
        if not self._slots.acquire(timeout=self.acquire_timeout_s):
            raise fail(
                ErrorCode.STORAGE_FAILURE,
                f"postgres connection pool exhausted ({self.size} connections busy for "
                f"{self.acquire_timeout_s:g} s)",
            )
        with self._lock:
            conn = self._idle.pop() if self._idle else None
        if conn is not None:
            return conn
        try:
            return self._new()
        except BaseException:
            self._slots.release()
            raise

    def fresh(self) -> Any:
        """A new connection for a slot the caller already holds (its old one was discarded)."""
        return self._new()

    def release(self, conn: Any, *, broken: bool = False) -> None:
        """Give a connection back; a broken one (or any, once closed) is closed instead."""
        try:
            if broken or self._closed:
                close_quietly(conn)
            else:
                with self._lock:
                    self._idle.append(conn)
        finally:
            self._slots.release()

    def close(self) -> None:
        """Close idle connections now and lent ones when they come back."""
        self._closed = True
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            close_quietly(conn)

    def _new(self) -> Any:
        conn: Any = None
        try:
            conn = self._connect()
            conn.autocommit = True
        except AidememoError:
            raise
        except Exception as exc:
            if conn is not None:
                close_quietly(conn)
            log.warning("postgres connect failed: %s: %s", type(exc).__name__, exc)
            raise fail(
                ErrorCode.STORAGE_FAILURE, f"postgres connect failed: {one_line(exc)}"
            ) from exc
        return conn


def answers(conn: Any, framed: bool) -> bool:
    """True when the connection still answers after a failed statement: `SELECT 1` (the
    server already rolled the autocommit statement back), or `ROLLBACK` when framed."""
    cur: Any = None
    try:
        cur = conn.cursor()
        cur.execute(q.ROLLBACK if framed else q.PING)
        if not framed:
            cur.fetchall()
        cur.close()
    except Exception as exc:
        log.debug("a postgres connection stopped answering: %r", exc)
        if cur is not None:
            try:
                cur.close()
            except Exception:
                log.debug("closing a postgres cursor failed", exc_info=True)
        return False
    return True
