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
  project row), so the larger window makes a checkpoint (two fsyncs) rarer and copies a page
  rewritten meanwhile once. The WAL file keeps its largest size (no `journal_size_limit`), so
  later cycles reuse it instead of growing the file again.
- `temp_store = MEMORY`: a statement that writes several rows (an import's or a migration's
  index rows) keeps a statement journal of the pages it changes, so it can be undone alone;
  past 64 KiB SQLite spills that journal to a temporary file, created and removed by every such
  statement, which memory avoids.
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
- Write batches (`batch(calls)`, `CAP_WRITE_BATCH`): one thread runs several calls in one
  `BEGIN IMMEDIATE` ... `COMMIT`, taking its turn among the writers above. A call's
  `transaction(fn)` is a `SAVEPOINT` of its own (a callback that raises is rolled back alone,
  and the call goes on to answer its caller), its reads join the open transaction, and its
  `after_commit` actions (the ledger's commit hooks) run once the `COMMIT` returned. If the
  `COMMIT` fails, every call of the batch is voided with the error; if the engine rolls the
  whole transaction back under a call (I/O error, disk full), the calls so far are voided
  and the rest run in a new transaction. Calls write only through `transaction`.
- Files are created 0600 and their directory 0700 whatever the umask: tokens are stored only
  as digests, but bodies are the team's memory.
"""

from __future__ import annotations

import contextvars
import logging
import os
import sqlite3
import threading
from collections import deque
from collections.abc import Callable, Sequence
from time import perf_counter
from typing import Any, TypeVar, cast

from aidememo import metrics
from aidememo.domain.errors import AidememoError, ErrorCode, fail
from aidememo.ports import CAP_REOPEN, CAP_SECOND_PROCESS, CAP_TWO_CONNECTIONS, CAP_WRITE_BATCH
from aidememo.stores.sqlite.executor import Outcome, Row, SqlValue
from aidememo.stores.sqlite.sqlite3_files import (
    free_bytes,
    prepare_file,
    restrict_sidecars,
    storage_failure,
)

__all__ = ["MAX_BATCH", "MEMORY", "Sqlite3Executor", "free_bytes", "storage_failure"]

T = TypeVar("T")

log = logging.getLogger("aidememo.sqlite")

MEMORY = ":memory:"
BUSY_TIMEOUT_MS = 5000
SYNCHRONOUS_MODES = frozenset({"OFF", "NORMAL", "FULL", "EXTRA"})
MAX_BATCH = 64
"""Most callbacks one group commit carries; bounds how long a batch holds the write lock."""
MAX_IDLE_READERS = 8
WAL_AUTOCHECKPOINT_PAGES = 4000
"""WAL pages after which a commit checkpoints (SQLite's default is 1000); see the module doc."""
"""Reader connections kept open between reads; more are opened under load, then closed."""

_BEGIN_WRITE = "BEGIN IMMEDIATE"
_BEGIN_READ = "BEGIN"
_COMMIT = "COMMIT"
_ROLLBACK = "ROLLBACK"
_SAVEPOINT = "SAVEPOINT aidememo_batch"
_RELEASE = "RELEASE aidememo_batch"
_ROLLBACK_TO = "ROLLBACK TO aidememo_batch"

# What the open transaction is, so nested calls can join it (or be refused): a write batch's
# calls run in `_BATCH`, each of their `transaction(fn)` in `_WRITE` inside its savepoint.
_NONE, _READ, _WRITE, _BATCH = 0, 1, 2, 3


# Where a read view is: BEGIN sent (or a write transaction), BEGIN not sent yet, or done with
# its one standalone statement (`execute_alone`), after which it may run no other.
_BEGUN, _LAZY, _SPENT = 0, 1, 2


class _Local(threading.local):
    """What the current thread is inside: nothing, a read view or the write transaction."""

    conn: sqlite3.Connection | None = None
    state: int = _NONE
    view: int = _BEGUN
    after: list[Callable[[], None]] | None = None  # a write batch's after-commit actions
    broken: AidememoError | None = None  # the engine rolled the write batch back

    def voided(self) -> bool:
        """True once the open write batch's transaction is gone (`broken`)."""
        return self.broken is not None


class _Call:
    """One callback of a write batch and its outcome: a `batch` call, run on the caller's own
    thread, needs nothing more."""

    __slots__ = ("context", "error", "fn", "value")

    def __init__(self, fn: Callable[[], Any] | None, context: contextvars.Context | None) -> None:
        self.fn = fn
        self.context = context  # the caller's context; None when the caller runs it itself
        self.value: Any = None
        self.error: BaseException | None = None

    def run(self) -> Any:
        assert self.fn is not None
        return self.fn() if self.context is None else self.context.run(self.fn)

    def outcome(self) -> Any:
        error = self.error
        if error is not None:
            self.error = None  # no reference cycle through the traceback
            raise error
        return self.value


class _Pending(_Call):
    """One queued `transaction(fn)` call, answered by whichever thread commits its batch."""

    __slots__ = ("done", "lead")

    def __init__(self, fn: Callable[[], Any] | None, context: contextvars.Context | None) -> None:
        super().__init__(fn, context)  # fn None: a write batch waiting for its turn to lead
        self.done = threading.Event()
        self.lead = False  # woken to lead the next batch rather than with an answer


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
            frozenset({CAP_WRITE_BATCH})
            if self.in_memory
            else frozenset({CAP_REOPEN, CAP_TWO_CONNECTIONS, CAP_SECOND_PROCESS, CAP_WRITE_BATCH})
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
                prepare_file(self.path)
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
            restrict_sidecars(self.path)

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
        if state == _BATCH:
            return self._savepoint(fn)
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
        with self._queue_lock:  # up to a write batch waiting its turn
            while self._queue and len(batch) < MAX_BATCH and self._queue[0].fn is not None:
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

    def batch(self, calls: Sequence[Callable[[], T]]) -> list[Outcome[T]]:
        """Run `calls` in order on this thread in one write transaction (see the module doc);
        per call `(value, None)`, or `(None, error)`: the exception it raised, or the
        `AidememoError` that voided it (its transaction did not commit). Returns only after
        the `COMMIT`."""
        if self._local.state != _NONE:
            raise fail(ErrorCode.STORAGE_FAILURE, "a write batch inside a transaction")
        batch = [_Call(call, None) for call in calls]
        after: list[Callable[[], None]] = []
        if self.in_memory:
            with self._lock:
                self._run_batch(batch, after)
        else:
            self._take_turn()
            try:
                with self._lock:
                    self._run_batch(batch, after)
            finally:
                self._hand_off()
        _run_actions(after)
        return [(pending.value, cast(Exception | None, pending.error)) for pending in batch]

    def after_commit(self, fn: Callable[[], None]) -> None:
        """Run `fn` once the write this thread just made is durable: now, or, inside a write
        batch or an open transaction, after its `COMMIT` (never, if it does not commit)."""
        after = self._local.after
        if after is None:
            fn()
        else:
            after.append(fn)

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

    def _take_turn(self) -> None:
        """Lead the writers (the write lock is next ours), waiting behind a running one."""
        with self._queue_lock:
            if not self._leading:
                self._leading = True
                return
            waiting = _Pending(None, None)
            self._queue.append(waiting)
        waiting.done.wait()  # `_hand_off` wakes it to lead; a leader never batches it

    def _run_batch(
        self,
        batch: Sequence[_Call],
        after: list[Callable[[], None]],
        savepoints: bool = False,
    ) -> None:
        """Run `batch` in one transaction, or one more after each the engine rolled back,
        setting each call's answer; `savepoints`: each call in a savepoint of its own (the
        group commit), else a call's `transaction(fn)` is one. The after-commit actions of
        what committed are added to `after`."""
        conn, local = self._conn, self._local
        start, count = 0, len(batch)
        while start < count:
            try:
                _run(conn, _BEGIN_WRITE)
            except AidememoError as error:
                _void(batch[start:], error)
                return
            local.conn, local.state, local.after, local.broken = conn, _BATCH, [], None
            end = start
            try:
                while end < count:
                    pending = batch[end]
                    end += 1
                    try:
                        pending.value = (
                            self._savepoint(pending.run) if savepoints else pending.run()
                        )
                    except Exception as exc:
                        pending.error = exc
                    if local.voided():
                        break
                actions, broken = local.after, local.broken
            except BaseException:  # an interrupt: nothing of this batch commits
                _rollback(conn)
                raise
            finally:
                local.conn, local.state, local.after, local.broken = None, _NONE, None, None
            if broken is None:
                try:
                    self._commit(conn)
                except AidememoError as error:
                    broken = error
                else:
                    metrics.group_commit(end - start)
                    after += actions or ()
            if broken is not None:
                _rollback(conn)  # nothing of this transaction remains: its calls are voided
                _void(batch[start:end], broken)
            start = end

    def _savepoint(self, fn: Callable[[], T]) -> T:
        """A write batch's call's `transaction(fn)`: `fn` in a savepoint of its own."""
        conn, local = self._conn, self._local
        if local.broken is not None:
            raise local.broken
        try:
            _run(conn, _SAVEPOINT)
        except AidememoError as error:
            local.broken = error
            raise
        local.state = _WRITE
        try:
            result = fn()
        except Exception as exc:
            if not _undo_savepoint(conn):  # the engine rolled the whole transaction back
                local.broken = storage_failure("batch", exc, self.path)
                raise local.broken from exc
            raise
        finally:
            local.state = _BATCH
        try:
            _run(conn, _RELEASE)
        except AidememoError as error:
            local.broken = error
            raise
        return result

    def _alone(self, fn: Callable[[], T]) -> T:
        """`BEGIN IMMEDIATE`, `fn`, `COMMIT`; `ROLLBACK` and re-raise if anything fails."""
        conn, local = self._conn, self._local
        _run(conn, _BEGIN_WRITE)
        local.conn, local.state, local.after = conn, _WRITE, []
        try:
            result = fn()
            self._commit(conn)
            after = local.after
        except BaseException:
            _rollback(conn)
            raise
        finally:
            local.conn, local.state, local.after = None, _NONE, None
        metrics.group_commit(1)
        _run_actions(after)
        return result

    def _batch(self, batch: list[_Pending]) -> None:
        """The group commit of `batch`: a write batch of one savepoint per callback (see the
        module doc); answers set, not delivered."""
        after: list[Callable[[], None]] = []
        self._run_batch(batch, after, savepoints=True)
        _run_actions(after)

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


def _run_actions(actions: list[Callable[[], None]] | None) -> None:
    """Run the after-commit actions of a commit that returned."""
    for action in actions or ():
        try:
            action()
        except Exception:  # an action never undoes the commit
            log.exception("after-commit action failed")


def _void(batch: Sequence[_Call], error: AidememoError) -> None:
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
