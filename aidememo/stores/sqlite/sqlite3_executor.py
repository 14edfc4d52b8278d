"""`SqlExecutor` over the stdlib `sqlite3` module: the embedded and single-node origin profiles.

This is the only module of the core that imports `sqlite3`: Pyodide ships without it, and the
core must import there (the edge uses `DoSqlExecutor` instead).

Settings and why:
- `isolation_level=None` with explicit `BEGIN IMMEDIATE` / `COMMIT` / `ROLLBACK`: the module's
  implicit transactions would otherwise start late (after the first read) and let two writers
  read the same head; `BEGIN IMMEDIATE` takes the write lock before the first statement.
- Reads (file databases) run on their own connections, a small pool with `query_only` on,
  each `read(fn)` inside a deferred `BEGIN` that pins one WAL snapshot: authentication and
  GETs never queue behind a commit's fsync, and never see uncommitted writes. A private
  `:memory:` database cannot be shared between connections, so it reads on the one it has.
- WAL, so readers never block the writer; `synchronous=FULL` by default, so a commit that
  returned survives power loss (configurable for benchmarks and throwaway stores).
- `wal_autocheckpoint` 4000 pages (16 MiB of 4 KiB pages) instead of SQLite's 1000: one
  command writes a dozen pages (resource, change, audit row and receipt, their indexes, the
  project row), so at 1000 every ~85th commit paid a checkpoint (two fsyncs, ~2.5 ms); at
  4000 one in ~350 does (~4.5 ms, since pages rewritten between checkpoints are copied
  once), which halves the checkpoint I/O per command. The WAL file keeps its largest size
  (no `journal_size_limit`), so later cycles reuse it instead of growing the file again.
- `temp_store = MEMORY`: a statement that writes several rows (a fact's search postings and
  document frequencies) keeps a statement journal of the pages it changes, so it can be undone
  alone; past 64 KiB SQLite spills that journal to a temporary file, created and removed by
  every such statement. In memory a fact's index write costs about a third of the CPU
  (`docs/bench-notes.md`).
- `busy_timeout` 5000 ms: another process holding the write lock is waited for, then reported
  as `storage_failure` (HTTP 503 with Retry-After), never as a raw exception.
- Group commit (file databases): concurrent `transaction(fn)` calls are coalesced. The first
  caller runs alone on its own thread (`BEGIN IMMEDIATE`, `fn`, `COMMIT`); callers arriving
  while it runs queue up, and when it is done the oldest of them leads the next batch: one
  `BEGIN IMMEDIATE`, each callback in its own `SAVEPOINT` (a callback that raises is rolled
  back to its savepoint alone and its caller gets the exception), then one `COMMIT` (one fsync)
  for up to `MAX_BATCH` callbacks. No caller gets an answer before that `COMMIT` returned; if
  it fails, every caller of the batch gets `storage_failure` and nothing of the batch remains.
  A queued callback runs on the leader's thread in a copy of its caller's `contextvars`.
- Files are created 0600 and their directory 0700 whatever the umask: tokens are stored only
  as digests, but bodies are the team's memory.
"""

from __future__ import annotations

import contextvars
import os
import sqlite3
import threading
from collections import deque
from collections.abc import Callable, Sequence
from time import perf_counter
from typing import Any, TypeVar

from aidememo import metrics
from aidememo.domain.errors import STORE_READ_ONLY, AidememoError, ErrorCode, fail
from aidememo.domain.limits import STORAGE_FULL_FLOOR_BYTES
from aidememo.ports import CAP_REOPEN, CAP_SECOND_PROCESS, CAP_TWO_CONNECTIONS
from aidememo.stores.sqlite.executor import Row, SqlValue

T = TypeVar("T")

MEMORY = ":memory:"
BUSY_TIMEOUT_MS = 5000
SYNCHRONOUS_MODES = frozenset({"OFF", "NORMAL", "FULL", "EXTRA"})
FILE_MODE = 0o600
DIR_MODE = 0o700
MAX_BATCH = 64
"""Most callbacks one group commit carries; bounds how long a batch holds the write lock."""
MAX_IDLE_READERS = 8
WAL_AUTOCHECKPOINT_PAGES = 4000
"""WAL pages after which a commit checkpoints (SQLite's default is 1000); see the module doc."""
"""Reader connections kept open between reads; more are opened under load, then closed."""

# SQLite's primary result codes (`sqlite3.Error.sqlite_errorcode & 0xff`).
_SQLITE_READONLY = 8
_SQLITE_IOERR = 10
_SQLITE_FULL = 13

_BEGIN_WRITE = "BEGIN IMMEDIATE"
_BEGIN_READ = "BEGIN"
_COMMIT = "COMMIT"
_ROLLBACK = "ROLLBACK"
_SAVEPOINT = "SAVEPOINT aidememo_batch"
_RELEASE = "RELEASE aidememo_batch"
_ROLLBACK_TO = "ROLLBACK TO aidememo_batch"

# What the open transaction is, so nested calls can join it (or be refused).
_NONE, _READ, _WRITE = 0, 1, 2


def storage_failure(what: str, exc: BaseException, path: str | None = None) -> AidememoError:
    """Map an engine error to its code; the message stays server-side (ERR-2, ERR-4).

    `SQLITE_FULL` ("database or disk is full": SQLite reports a write that hit ENOSPC so) is
    `storage_full`, and so is an I/O error (an fsync or write that failed with ENOSPC, which
    SQLite reports as `SQLITE_IOERR_*` without the errno) while the database's file system
    has less than `STORAGE_FULL_FLOOR_BYTES` free. `SQLITE_READONLY*` is `storage_failure` with the
    store state `read_only`; anything else `storage_failure` (state `unavailable`).
    """
    if isinstance(exc, AidememoError) and exc.store_state is not None:
        return exc  # classified where it happened
    detail = f"sqlite {what} failed: {type(exc).__name__}: {exc}"
    primary = getattr(exc, "sqlite_errorcode", 0) & 0xFF
    if primary == _SQLITE_FULL or (
        primary == _SQLITE_IOERR and path is not None and _short_of_space(path)
    ):
        return fail(ErrorCode.STORAGE_FULL, detail)
    if primary == _SQLITE_READONLY:
        return fail(ErrorCode.STORAGE_FAILURE, detail, STORE_READ_ONLY)
    return fail(ErrorCode.STORAGE_FAILURE, detail)


def free_bytes(path: str) -> int | None:
    """Bytes an unprivileged writer may still use on the file system holding `path`."""
    try:
        stat = os.statvfs(os.path.dirname(os.path.abspath(path)))
    except OSError:
        return None
    return stat.f_bavail * stat.f_frsize


def _short_of_space(path: str) -> bool:
    free = free_bytes(path)
    return free is not None and free < STORAGE_FULL_FLOOR_BYTES


# Where a read view is: BEGIN sent (or a write transaction), BEGIN not sent yet, or done with
# its one standalone statement (`execute_alone`), after which it may run no other.
_BEGUN, _LAZY, _SPENT = 0, 1, 2


class _Local(threading.local):
    """What the current thread is inside: nothing, a read view or the write transaction."""

    conn: sqlite3.Connection | None = None
    state: int = _NONE
    view: int = _BEGUN


class _Pending:
    """One queued `transaction(fn)` call, answered by whichever thread commits its batch."""

    __slots__ = ("context", "done", "error", "fn", "lead", "value")

    def __init__(self, fn: Callable[[], Any], context: contextvars.Context | None) -> None:
        self.fn = fn
        self.context = context  # the caller's context; None when the caller runs it itself
        self.done = threading.Event()
        self.lead = False  # woken to lead the next batch rather than with an answer
        self.value: Any = None
        self.error: BaseException | None = None

    def run(self) -> Any:
        return self.fn() if self.context is None else self.context.run(self.fn)

    def outcome(self) -> Any:
        error = self.error
        if error is not None:
            self.error = None  # no reference cycle through the traceback
            raise error
        return self.value


class Sqlite3Executor:
    """One `sqlite3` write connection with group commit, and a pool of reader connections."""

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
        self._lock = threading.Lock()  # the write connection: one batch or statement at a time
        self._local = _Local()
        self._queue_lock = threading.Lock()
        self._queue: deque[_Pending] = deque()
        self._leading = False  # a thread is running a transaction or batch (file databases)
        self._busy_timeout_ms = int(busy_timeout_ms)
        self._idle: list[sqlite3.Connection] = []  # idle reader connections, most recent last
        self._readers: set[sqlite3.Connection] = set()  # every open reader, for close()
        self._readers_lock = threading.Lock()
        self._closed = False
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
            self.execute(f"PRAGMA wal_autocheckpoint = {WAL_AUTOCHECKPOINT_PAGES}")
        self.execute(f"PRAGMA synchronous = {synchronous}")
        self.execute("PRAGMA temp_store = MEMORY")
        self.execute(f"PRAGMA busy_timeout = {busy_timeout_ms}")
        self.execute("PRAGMA foreign_keys = ON")
        if not self.in_memory:
            # A read creates the -wal and -shm files now, so they can be locked down at once.
            self.execute("SELECT count(*) FROM sqlite_schema")
            _restrict_sidecars(self.path)

    # -- SqlExecutor ----------------------------------------------------------------------

    def execute(self, sql: str, params: Sequence[SqlValue] = ()) -> list[Row]:
        """Run one statement and return all its rows as tuples."""
        local = self._local
        conn = local.conn
        try:
            if conn is not None:  # inside this thread's transaction or read view
                if local.view:
                    _begin_view(local, conn)
                return conn.execute(sql, params).fetchall()
            with self._lock:
                return self._conn.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise storage_failure("statement", exc, self.path) from exc

    def execute_count(self, sql: str, params: Sequence[SqlValue] = ()) -> int:
        """Run one INSERT, UPDATE or DELETE and return the rows it changed (`rowcount`)."""
        local = self._local
        conn = local.conn
        try:
            if conn is not None:
                if local.view:
                    _begin_view(local, conn)
                return conn.execute(sql, params).rowcount
            with self._lock:
                return self._conn.execute(sql, params).rowcount
        except sqlite3.Error as exc:
            raise storage_failure("statement", exc, self.path) from exc

    def execute_alone(self, sql: str, params: Sequence[SqlValue] = ()) -> list[Row]:
        """Like `execute`; as the first statement of a read view, it runs without `BEGIN`.

        One statement is atomic on its own in SQLite, so a view made of it alone needs no
        `BEGIN`/`COMMIT` round trip. The view may then run no other statement (that would
        read another snapshot): a later one fails with `storage_failure`.
        """
        local = self._local
        conn = local.conn
        if conn is None or local.view != _LAZY:
            return self.execute(sql, params)
        local.view = _SPENT
        try:
            return conn.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise storage_failure("statement", exc, self.path) from exc

    def execute_script(self, statements: Sequence[str]) -> None:
        """Run statements one by one; `executescript` would commit the open transaction."""
        for statement in statements:
            self.execute(statement)

    def transaction(self, fn: Callable[[], T]) -> T:
        """Run `fn` in a write transaction, alone or in a group commit; see the module doc."""
        state = self._local.state
        if state == _WRITE:
            return fn()
        if state == _READ:
            raise fail(ErrorCode.STORAGE_FAILURE, "write transaction inside a read view")
        if self.in_memory:
            with self._lock:  # no fsync to share: a private database keeps the simple path
                return self._alone(fn)
        with self._queue_lock:
            leading = self._leading
            if not leading:
                self._leading = True
        if not leading:  # uncontended: the direct path on the caller's own thread
            try:
                with self._lock:
                    return self._alone(fn)
            finally:
                self._hand_off()
        waiting = _Pending(fn, contextvars.copy_context())
        with self._queue_lock:
            if self._leading:
                self._queue.append(waiting)
            else:  # the leader finished meanwhile: lead a batch of one (or more)
                self._leading = True
                waiting.lead = True
                waiting.done.set()
        waiting.done.wait()
        if not waiting.lead:
            return waiting.outcome()  # type: ignore[no-any-return]
        waiting.context = None  # its own callback runs on its own thread
        batch = [waiting]
        with self._queue_lock:
            while self._queue and len(batch) < MAX_BATCH:
                batch.append(self._queue.popleft())
        if len(batch) == 1:  # nobody else queued: no savepoint needed
            try:
                with self._lock:
                    return self._alone(fn)
            finally:
                self._hand_off()
        try:
            with self._lock:
                self._batch(batch)
        except BaseException as exc:  # an interrupt, or a fault of this machinery
            for pending in batch:  # the batch was rolled back: every caller retries
                pending.value, pending.error = None, storage_failure("batch", exc)
            waiting.error = exc  # raised on the leading thread, where it happened
        finally:
            self._hand_off()
            for pending in batch:
                if pending is not waiting:
                    pending.done.set()
        return waiting.outcome()  # type: ignore[no-any-return]

    def read(self, fn: Callable[[], T]) -> T:
        """A deferred `BEGIN` pins one WAL snapshot for every statement `fn` runs."""
        local = self._local
        if local.state != _NONE:
            return fn()  # joins the open read view or write transaction
        if self.in_memory:
            with self._lock:
                return self._view(self._conn, fn)
        try:
            conn = self._idle.pop()  # atomic under the GIL, like the append below
        except IndexError:
            conn = self._open_reader()
        try:
            return self._view(conn, fn)
        finally:
            if len(self._idle) < MAX_IDLE_READERS and not self._closed and _idle_ok(conn):
                self._idle.append(conn)
            else:
                self._close_reader(conn)

    def free_bytes(self) -> int | None:
        """Free bytes on the database's file system (READY-1); None for `:memory:`."""
        return None if self.in_memory else free_bytes(self.path)

    def close(self) -> None:
        """Close every connection (idempotent)."""
        with self._lock:
            self._closed = True
            self._conn.close()
        with self._readers_lock:
            readers, self._readers = self._readers, set()
            self._idle = []
        for conn in readers:
            conn.close()

    # -- internals ------------------------------------------------------------------------

    def _view(self, conn: sqlite3.Connection, fn: Callable[[], T]) -> T:
        """Run `fn` in a read view; its deferred `BEGIN` is sent with its first statement."""
        local = self._local
        local.conn, local.state, local.view = conn, _READ, _LAZY
        try:
            try:
                result = fn()
                if local.view == _BEGUN:
                    _run(conn, _COMMIT)
            except BaseException:
                _rollback(conn)
                raise
        finally:
            local.conn, local.state, local.view = None, _NONE, _BEGUN
        return result

    def _open_reader(self) -> sqlite3.Connection:
        if self._closed:
            raise fail(ErrorCode.STORAGE_FAILURE, "sqlite executor is closed")
        try:
            conn = sqlite3.connect(
                self.path,
                timeout=self._busy_timeout_ms / 1000,
                isolation_level=None,
                check_same_thread=False,  # pooled: a reader serves one thread at a time
                cached_statements=256,
            )
        except sqlite3.Error as exc:
            raise storage_failure("open", exc) from exc
        try:
            conn.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms}")
            conn.execute("PRAGMA query_only = ON")  # a read view can never write
        except sqlite3.Error as exc:
            conn.close()
            raise storage_failure("open", exc) from exc
        with self._readers_lock:
            self._readers.add(conn)
        return conn

    def _close_reader(self, conn: sqlite3.Connection) -> None:
        with self._readers_lock:
            self._readers.discard(conn)
        conn.close()

    # -- internals ------------------------------------------------------------------------

    def _hand_off(self) -> None:
        """Wake the oldest queued caller to lead the next batch, or stop leading."""
        with self._queue_lock:
            if self._queue:
                head = self._queue.popleft()
                head.lead = True
                head.done.set()
            else:
                self._leading = False

    def _alone(self, fn: Callable[[], T]) -> T:
        """`BEGIN IMMEDIATE`, `fn`, `COMMIT`; `ROLLBACK` and re-raise if anything fails."""
        conn, local = self._conn, self._local
        _run(conn, _BEGIN_WRITE)
        local.conn, local.state = conn, _WRITE
        try:
            result = fn()
            self._commit(conn)
        except BaseException:
            _rollback(conn)
            raise
        finally:
            local.conn, local.state = None, _NONE
        metrics.group_commit(1)
        return result

    def _batch(self, batch: list[_Pending]) -> None:
        """One transaction for `batch`, a savepoint per callback; answers set, not delivered.

        When anything but a callback fails, every caller of the batch gets `storage_failure`:
        a callback that raised may have decided against an earlier callback's writes, and
        those are gone.
        """
        conn, local = self._conn, self._local
        try:
            _run(conn, _BEGIN_WRITE)
        except AidememoError as error:
            _answer_all(batch, error)
            return
        local.conn, local.state = conn, _WRITE
        try:
            for index, pending in enumerate(batch):
                try:
                    _run(conn, _SAVEPOINT)
                except AidememoError as error:
                    _rollback(conn)
                    _answer_all(batch, error)
                    return
                try:
                    pending.value = pending.run()
                except Exception as exc:
                    if _undo_savepoint(conn):
                        pending.error = exc  # rolled back alone; the batch goes on
                        continue
                    # The engine rolled the whole transaction back (I/O error, disk full): the
                    # callbacks so far lost their writes, the rest never ran and get a new one.
                    _answer_all(batch[: index + 1], storage_failure("batch", exc))
                    local.conn, local.state = None, _NONE
                    if index + 1 < len(batch):
                        self._batch(batch[index + 1 :])
                    return
                except BaseException:  # an interrupt: nothing of this batch commits
                    _rollback(conn)
                    raise
                try:
                    _run(conn, _RELEASE)
                except AidememoError as error:
                    _rollback(conn)
                    _answer_all(batch, error)
                    return
            try:
                self._commit(conn)
            except AidememoError as error:
                _rollback(conn)  # nothing of the batch is durable: every caller retries
                _answer_all(batch, error)
            else:
                metrics.group_commit(len(batch))
        finally:
            local.conn, local.state = None, _NONE

    def _commit(self, conn: sqlite3.Connection) -> None:
        """`COMMIT` (one fsync with `synchronous=FULL`), its wait reported to
        `aidememo.metrics`; a seam for fault-injection tests."""
        started = perf_counter()
        try:
            conn.execute(_COMMIT)
        except sqlite3.Error as exc:
            raise storage_failure("commit", exc, self.path) from exc
        metrics.commit(perf_counter() - started)


def _run(conn: sqlite3.Connection, sql: str) -> None:
    try:
        conn.execute(sql)
    except sqlite3.Error as exc:
        raise storage_failure("statement", exc) from exc


def _begin_view(local: _Local, conn: sqlite3.Connection) -> None:
    """Send a lazy view's `BEGIN` before its first statement; refuse a spent view's second."""
    if local.view == _SPENT:
        raise fail(ErrorCode.STORAGE_FAILURE, "a standalone read must be its view's only one")
    conn.execute(_BEGIN_READ)  # a deferred BEGIN: the snapshot is taken by the next statement
    local.view = _BEGUN


def _answer_all(batch: list[_Pending], error: AidememoError) -> None:
    for pending in batch:
        pending.value, pending.error = None, error


def _rollback(conn: sqlite3.Connection) -> None:
    # After some errors (SQLITE_FULL, IOERR) SQLite has already rolled back by itself.
    try:
        if conn.in_transaction:
            conn.execute(_ROLLBACK)
    except sqlite3.Error:
        pass  # the original exception is the one worth reporting


def _idle_ok(conn: sqlite3.Connection) -> bool:
    """True when a reader left no transaction behind and is still open."""
    try:
        return not conn.in_transaction
    except sqlite3.Error:
        return False


def _undo_savepoint(conn: sqlite3.Connection) -> bool:
    """Roll back to and release the batch savepoint; False if the transaction is gone."""
    if not conn.in_transaction:
        return False
    try:
        conn.execute(_ROLLBACK_TO)
        conn.execute(_RELEASE)
    except sqlite3.Error:
        _rollback(conn)
        return False
    return True


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
