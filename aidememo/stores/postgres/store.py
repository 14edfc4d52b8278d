"""`PostgresStore`: the canonical store on PostgreSQL over any DB-API 2 driver.

The driver is injected as a connection factory (psycopg 3 at the origin, pg8000 at the edge);
nothing here imports one. Both take `%s` placeholders, and every statement is the same text
for both.

Transactions (SPEC.md STORE-*):
- A write is `BEGIN ISOLATION LEVEL READ COMMITTED`; a read (`read(fn)`) is
  `BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY`, so a snapshot, a change page and its head
  come from one consistent view. On psycopg that `BEGIN` goes with the view's first statement,
  and a view of one single-statement read (`execute_alone`: a search, a resource with its
  access, a token's binding) is one simple query with the timeouts and no transaction of its
  own (`tx.Session`, SPEC.md STORE-10).
- The timeouts are set per transaction (`SET LOCAL`), never per session, because a
  transaction-mode pool (PgBouncer, Hyperdrive) hands the session to other clients between
  transactions. On psycopg they travel in the `BEGIN`'s own simple query; on other drivers
  they are sent before the transaction's first statement, and a command folds them into
  `aidememo_begin_command`, where `lock_timeout` already bounds the wait for the project row.
- A typed command is four round trips: `BEGIN`, `aidememo_begin_command` (timeouts, project
  row lock, membership, receipt, current resource), `aidememo_commit_mutation` (head CAS and
  every row), `COMMIT`; typed operations add their own reads in between.
- A generic put or delete (`execute_raw`, the guarded write of `Store.execute_raw`) is one
  round trip: one `aidememo_execute_raw` statement on the autocommit connection, i.e. its own
  transaction, which reads the rows, runs the command checks on them, writes only when they
  admit the command and answers their verdict.
  pg8000 is the exception: it sends a statement with parameters as Parse+Sync,
  Describe+Sync, Bind+Execute+Sync, and outside a transaction a transaction-mode pool may
  hand each Sync's part to another server connection ("unnamed prepared statement does not
  exist"). So on any connection but psycopg's (`framed`, decided from the connection's module
  unless given) the same statement is sent between `BEGIN` and `COMMIT`, which pin the server
  connection; both are parameterless, which pg8000 sends as one simple query each. psycopg
  sends Parse, Bind, Describe, Execute and one Sync together: one round trip, pool-safe.
  Inside a transaction already open on the thread the statement joins it. A failure after
  which the connection no longer answers (it died while idle in the pool, or mid-statement)
  is retried once on a fresh connection: the command id makes that safe, since a command the
  first attempt committed is then a replay (reported as `retried`).
- Any driver exception becomes `storage_failure` (HTTP 503 + Retry-After) with the original in
  `__cause__`, and is logged; the transaction is rolled back, and a connection that cannot
  even roll back is discarded. A `BEGIN` that fails (a connection that died while idle in the
  pool) is retried once on a fresh connection: nothing had run yet.
- Nested calls on one thread join the open transaction (a write inside a read is refused).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from time import perf_counter
from typing import Any, TypeVar

from aidememo import metrics
from aidememo.domain.admission import WRITER_ROLES
from aidememo.domain.errors import AidememoError, ErrorCode, fail
from aidememo.domain.model import RawOutcome, RawWrite, Receipt, Verdict
from aidememo.ports import CAP_REOPEN, CAP_TWO_CONNECTIONS, ReadTx, WriteTx
from aidememo.stores.guard import not_awaitable
from aidememo.stores.postgres import schema
from aidememo.stores.postgres import sql as q
from aidememo.stores.postgres.pool import ConnectionPool, answers, close_quietly
from aidememo.stores.postgres.tx import (
    PgReadTx,
    PgWriteTx,
    Session,
    driver_failure,
    refuse_newer,
)

T = TypeVar("T")
log = logging.getLogger("aidememo.stores.postgres")

_WRITERS = " ".join(WRITER_ROLES)  # `aidememo_execute_raw`'s `p_writers`


class PostgresStore:
    """The canonical store on PostgreSQL; implements `aidememo.ports.Store`."""

    capabilities: frozenset[str] = frozenset({CAP_REOPEN, CAP_TWO_CONNECTIONS})

    def __init__(
        self,
        connect: Callable[[], Any],
        *,
        pool_size: int = 8,
        acquire_timeout_s: float = 1.0,
        statement_timeout_ms: int = 10_000,
        lock_timeout_ms: int = 5_000,
        mode: str = "postgres",
        framed: bool | None = None,
    ) -> None:
        """No connection is made here; the first transaction makes one. `framed` sends a
        lone statement between BEGIN and COMMIT (None: on every connection but psycopg's, see
        the module docstring)."""
        self.mode = mode
        self.framed = framed
        self.pool = ConnectionPool(connect, size=pool_size, acquire_timeout_s=acquire_timeout_s)
        self.statement_timeout_ms = int(statement_timeout_ms)
        self.lock_timeout_ms = int(lock_timeout_ms)
        self._timeouts = (str(self.statement_timeout_ms), str(self.lock_timeout_ms))
        self._set_local = q.SET_LOCAL_TIMEOUTS.format(*self._timeouts)
        self._lazy_begin = q.BEGIN_READ + self._set_local  # a lazy read view's (STORE-10)
        self._local = threading.local()

    @classmethod
    def open(
        cls, connect: Callable[[], Any], *, migrate: bool = False, **options: Any
    ) -> PostgresStore:
        """A store whose schema is this code's: migrated first when `migrate` is true (origin,
        `aidememo admin migrate`), otherwise only checked (the edge never migrates)."""
        store = cls(connect, **options)
        try:
            if migrate:
                store.migrate()
            else:
                store.check_schema()
        except BaseException:
            store.close()
            raise
        return store

    # -- Store ----------------------------------------------------------------------------

    def transaction(self, fn: Callable[[WriteTx], T]) -> T:
        """Run `fn` in one READ COMMITTED transaction; commit if it returns, else roll back."""
        return self._run(True, fn)

    def read(self, fn: Callable[[ReadTx], T]) -> T:
        """Run `fn` in one REPEATABLE READ READ ONLY transaction."""
        return self._run(False, fn)

    def schema_version(self) -> int:
        """The version recorded in `aidememo_schema` (0 before the first migration)."""
        return self._run(False, _read_version)

    def after_commit(self, fn: Callable[[], None]) -> None:
        """`Store.after_commit`: a transaction here is durable when it returns, so now."""
        fn()

    def close(self) -> None:
        """Close the pool's connections; the store is unusable afterwards."""
        self.pool.close()

    @property
    def connections(self) -> int:
        """The most transactions it runs at once: its pool's size (the origin runs its
        requests that need only the store on as many threads, the store pool of `origin.lanes`)."""
        return self.pool.size

    def execute_raw(self, write: RawWrite) -> RawOutcome:
        """`Store.execute_raw` in one statement (`aidememo_execute_raw`): alone on the
        autocommit connection, or inside the transaction already open on this thread."""
        call = write.call
        sc, ref = call.scope, call.resource
        params: tuple[Any, ...] = (
            *self._timeouts, sc.tenant_id, sc.project_id, call.actor_id, call.command_id,
            write.fingerprint, ref.kind, ref.id, _WRITERS, write.secret is not None,
            write.expected_revision, write.operation, write.op.value, write.body, write.now_ms,
        )  # fmt: skip
        sql = q.EXECUTE_RAW
        if call.token_sha256 is not None:
            sql = q.EXECUTE_RAW_TOKEN
            params = (call.token_sha256, sc.tenant_id, call.actor_id, *params)
        retried = False
        if getattr(self._local, "tx", None) is not None:
            row = self._run(True, lambda tx: tx.execute_raw_row(sql, params))
        else:
            started = perf_counter()  # one statement is its own commit (aidememo.metrics)
            row, retried = self._one_statement(sql, params)
            metrics.commit(perf_counter() - started)
        verdict, seq, revision, at, current = row
        if verdict is None:  # the binding no longer holds: nothing ran (AUTH-7)
            raise fail(ErrorCode.AUTHENTICATION_FAILED, "unknown or revoked token")
        receipt = None
        if seq is not None:  # admitted (the new commit's) or a replay (the stored one's)
            receipt = Receipt(
                call.command_id, write.fingerprint, sc.tenant_id, sc.project_id, call.actor_id,
                seq, ref, revision, at,
            )  # fmt: skip
        return RawOutcome(Verdict(verdict), receipt, current, retried)

    def _one_statement(self, sql: str, params: tuple[Any, ...]) -> tuple[Any, bool]:
        """One statement as one transaction (autocommit, or framed) and its one row, and
        whether it was retried: a failure after which the connection does not answer is
        retried once on a fresh connection (`execute_raw`'s command id makes that safe)."""
        conn = self.pool.acquire()
        broken = False
        try:
            framed = self._is_framed(conn)
            try:
                return _one_row(conn, sql, params, framed), False
            except AidememoError:
                if answers(conn, framed):
                    raise
            broken = True  # until the fresh connection answers
            close_quietly(conn)
            conn = self.pool.fresh()
            broken = False
            try:
                return _one_row(conn, sql, params, framed), True
            except AidememoError:
                broken = not answers(conn, framed)
                raise
        finally:
            self.pool.release(conn, broken=broken)

    def _is_framed(self, conn: Any) -> bool:
        if self.framed is not None:
            return self.framed
        return type(conn).__module__.partition(".")[0] != "psycopg"

    # -- schema ---------------------------------------------------------------------------

    def migrate(self) -> int:
        """Bring the database to `SCHEMA_VERSION` (one transaction, advisory lock); idempotent,
        and an up-to-date database is only read. A newer database is refused."""
        current = self.schema_version()
        refuse_newer(current)
        if current == schema.SCHEMA_VERSION:
            return current
        version = self._run(True, _migrate)
        log.info("postgres schema migrated from %d to %d", current, version)
        return version

    def check_schema(self) -> int:
        """The schema version, if it is exactly this code's; `storage_failure` otherwise."""
        current = self.schema_version()
        refuse_newer(current)
        if current < schema.SCHEMA_VERSION:
            raise fail(
                ErrorCode.STORAGE_FAILURE,
                f"database schema {current} is older than this code's {schema.SCHEMA_VERSION}; "
                "run `aidememo admin migrate --database URL` first",
            )
        return current

    # -- internals ------------------------------------------------------------------------

    def _run(self, write: bool, fn: Callable[[Any], T]) -> T:
        local = self._local
        current: PgReadTx | None = getattr(local, "tx", None)
        if current is not None:
            if write and not isinstance(current, PgWriteTx):
                raise fail(ErrorCode.STORAGE_FAILURE, "write transaction inside a read view")
            return not_awaitable(fn(current))
        conn = self.pool.acquire()
        if not write and not self._is_framed(conn):
            # a lazy view (STORE-10): its BEGIN goes with its first statement
            session = Session(conn, self._timeouts, self._lazy_begin, self.pool.fresh)
        else:
            try:
                session = self._begin(conn, q.BEGIN_WRITE if write else q.BEGIN_READ)
            except BaseException:
                self.pool.release(conn, broken=True)  # closed already; this frees the slot
                raise
        broken = False
        tx = PgWriteTx(session) if write else PgReadTx(session)
        local.tx = tx
        try:
            result = not_awaitable(fn(tx))
            if write:
                started = perf_counter()
                session.control(q.COMMIT)
                metrics.commit(perf_counter() - started)
            elif session.began:
                session.control(q.COMMIT)
        except BaseException:
            if session.broken:
                broken = True
            elif session.began:
                broken = not _rollback(session)
            elif session.alone and not session.answered:  # its implicit transaction ended
                broken = not answers(session.conn, False)
            raise
        finally:
            local.tx = None
            _close_cursor(session)
            self.pool.release(session.conn, broken=broken)
        return result

    def _begin(self, conn: Any, begin: str) -> Session:
        """Send BEGIN; a connection that died while idle is replaced once, since nothing ran
        yet. On failure every connection tried is closed."""
        try:
            return self._open(conn, begin)
        except BaseException as exc:
            close_quietly(conn)
            if not isinstance(exc, AidememoError):
                raise
        conn = self.pool.fresh()
        try:
            return self._open(conn, begin)
        except BaseException:
            close_quietly(conn)
            raise

    def _open(self, conn: Any, begin: str) -> Session:
        """A session whose BEGIN was sent. psycopg sends a statement without parameters as
        one simple query, which may hold several statements: the timeouts travel with the
        BEGIN, in the same round trip. A framed connection's driver (pg8000 at the edge) uses
        the extended protocol for every statement, so its timeouts go before the first one."""
        session = Session(conn, self._timeouts)
        try:
            if not self._is_framed(conn):
                session.control(begin + self._set_local)
                session.timeouts_pending = False
            else:
                session.control(begin)
        except BaseException:
            _close_cursor(session)
            raise
        return session


def _read_version(tx: PgReadTx) -> int:
    return tx.schema_version()


def _migrate(tx: PgWriteTx) -> int:
    return tx.migrate()


def _one_row(conn: Any, sql: str, params: tuple[Any, ...], framed: bool) -> Any:
    """Execute one statement that returns exactly one row, on its own cursor; `framed`
    sends it between BEGIN and COMMIT."""
    cur: Any = None
    try:
        cur = conn.cursor()
        if framed:
            cur.execute(q.BEGIN_WRITE)
        cur.execute(sql, params)
        rows = cur.fetchall()
        if framed:
            cur.execute(q.COMMIT)
    except Exception as exc:
        raise driver_failure("statement", exc) from exc
    finally:
        if cur is not None:
            try:
                cur.close()
            except Exception as exc:
                log.debug("closing a postgres cursor failed: %r", exc)
    if len(rows) != 1:
        raise fail(ErrorCode.STORAGE_FAILURE, f"expected one row, got {len(rows)}")
    return rows[0]


def _rollback(session: Session) -> bool:
    """Roll back; False when the connection cannot even do that (it is then discarded)."""
    try:
        session.control(q.ROLLBACK)
    except AidememoError:
        return False
    return True


def _close_cursor(session: Session) -> None:
    cur = session.cur
    session.cur = None
    if cur is not None:
        try:
            cur.close()
        except Exception as exc:
            log.debug("closing a postgres cursor failed: %r", exc)
