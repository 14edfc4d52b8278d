"""`SqlExecutor` over the stdlib `sqlite3` module: the embedded and single-node origin profiles.

This is the only module of the core that imports `sqlite3`: Pyodide ships without it, and the
core must import there (the edge uses `DoSqlExecutor` instead).

Settings and why:
- `isolation_level=None` with explicit `BEGIN IMMEDIATE` / `COMMIT` / `ROLLBACK`: the module's
  implicit transactions would otherwise start late (after the first read) and let two writers
  read the same head; `BEGIN IMMEDIATE` takes the write lock before the first statement.
- WAL, so readers never block the writer; `synchronous=FULL` by default, so a commit that
  returned survives power loss (configurable for benchmarks and throwaway stores).
- `busy_timeout` 5000 ms: another process holding the write lock is waited for, then reported
  as `storage_failure` (HTTP 503 with Retry-After), never as a raw exception.
- Files are created 0600 and their directory 0700 whatever the umask: tokens are stored only
  as digests, but bodies are the team's memory.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable, Sequence
from typing import TypeVar

from aidememo.domain.errors import AidememoError, ErrorCode, fail
from aidememo.ports import CAP_REOPEN, CAP_SECOND_PROCESS, CAP_TWO_CONNECTIONS
from aidememo.stores.sqlite.executor import Row, SqlValue

T = TypeVar("T")

MEMORY = ":memory:"
BUSY_TIMEOUT_MS = 5000
SYNCHRONOUS_MODES = frozenset({"OFF", "NORMAL", "FULL", "EXTRA"})
FILE_MODE = 0o600
DIR_MODE = 0o700

_BEGIN_WRITE = "BEGIN IMMEDIATE"
_BEGIN_READ = "BEGIN"
_COMMIT = "COMMIT"
_ROLLBACK = "ROLLBACK"

# What the open transaction is, so nested calls can join it (or be refused).
_NONE, _READ, _WRITE = 0, 1, 2


def storage_failure(what: str, exc: BaseException) -> AidememoError:
    """Map an engine error to `storage_failure`; the message stays server-side (ERR-2)."""
    return fail(ErrorCode.STORAGE_FAILURE, f"sqlite {what} failed: {type(exc).__name__}: {exc}")


class Sqlite3Executor:
    """One `sqlite3` connection, shared safely across threads behind a re-entrant lock."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        synchronous: str = "FULL",
        busy_timeout_ms: int = BUSY_TIMEOUT_MS,
    ) -> None:
        mode = synchronous.upper()
        if mode not in SYNCHRONOUS_MODES:
            raise ValueError(f"synchronous must be one of {sorted(SYNCHRONOUS_MODES)}")
        self.path = os.fspath(path)
        self.in_memory = self.path == MEMORY
        self.capabilities: frozenset[str] = (
            frozenset()
            if self.in_memory
            else frozenset({CAP_REOPEN, CAP_TWO_CONNECTIONS, CAP_SECOND_PROCESS})
        )
        self._lock = threading.RLock()
        self._state = _NONE
        self._depth = 0
        try:
            if not self.in_memory:
                _prepare_file(self.path)
            self._conn = sqlite3.connect(
                self.path,
                timeout=busy_timeout_ms / 1000,
                isolation_level=None,
                check_same_thread=False,
                cached_statements=256,
            )
        except (sqlite3.Error, OSError) as exc:
            raise storage_failure("open", exc) from exc
        try:
            self._configure(mode, int(busy_timeout_ms))
        except AidememoError:
            self._conn.close()
            raise

    def _configure(self, synchronous: str, busy_timeout_ms: int) -> None:
        if not self.in_memory:
            self.execute("PRAGMA journal_mode = WAL")
        self.execute(f"PRAGMA synchronous = {synchronous}")
        self.execute(f"PRAGMA busy_timeout = {busy_timeout_ms}")
        self.execute("PRAGMA foreign_keys = ON")
        if not self.in_memory:
            # A read creates the -wal and -shm files now, so they can be locked down at once.
            self.execute("SELECT count(*) FROM sqlite_schema")
            _restrict_sidecars(self.path)

    # -- SqlExecutor ----------------------------------------------------------------------

    def execute(self, sql: str, params: Sequence[SqlValue] = ()) -> list[Row]:
        """Run one statement and return all its rows as tuples."""
        with self._lock:
            try:
                return self._conn.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise storage_failure("statement", exc) from exc

    def execute_script(self, statements: Sequence[str]) -> None:
        """Run statements one by one; `executescript` would commit the open transaction."""
        for statement in statements:
            self.execute(statement)

    def transaction(self, fn: Callable[[], T]) -> T:
        """`BEGIN IMMEDIATE`, run `fn`, `COMMIT`; `ROLLBACK` and re-raise if anything fails."""
        with self._lock:
            if self._state == _WRITE:
                return fn()
            if self._state == _READ:
                raise fail(ErrorCode.STORAGE_FAILURE, "write transaction inside a read view")
            return self._run(_BEGIN_WRITE, _WRITE, fn)

    def read(self, fn: Callable[[], T]) -> T:
        """A deferred `BEGIN` pins one WAL snapshot for every statement `fn` runs."""
        with self._lock:
            if self._state != _NONE:
                return fn()
            return self._run(_BEGIN_READ, _READ, fn)

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with self._lock:
            self._conn.close()

    # -- internals ------------------------------------------------------------------------

    def _run(self, begin: str, state: int, fn: Callable[[], T]) -> T:
        self.execute(begin)
        self._state = state
        try:
            result = fn()
            self.execute(_COMMIT)
        except BaseException:
            self._rollback()
            raise
        finally:
            self._state = _NONE
        return result

    def _rollback(self) -> None:
        # After some errors (SQLITE_FULL, IOERR) SQLite has already rolled back by itself.
        try:
            if self._conn.in_transaction:
                self._conn.execute(_ROLLBACK)
        except sqlite3.Error:
            pass  # the original exception is the one worth reporting


def _prepare_file(path: str) -> None:
    """Create the parent directory (0700) and the database file (0600) before SQLite does."""
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        os.makedirs(parent, mode=DIR_MODE, exist_ok=True)
        os.chmod(parent, DIR_MODE)  # makedirs honours the umask; chmod does not
    fd = os.open(path, os.O_RDWR | os.O_CREAT, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
    finally:
        os.close(fd)


def _restrict_sidecars(path: str) -> None:
    """SQLite gives -wal and -shm the database file's mode; enforce it in case it differs."""
    for suffix in ("-wal", "-shm"):
        try:
            os.chmod(path + suffix, FILE_MODE)
        except FileNotFoundError:
            pass
