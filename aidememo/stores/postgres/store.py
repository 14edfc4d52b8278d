"""`PostgresStore`: the canonical store on PostgreSQL over any DB-API 2 driver.

The driver is injected as a connection factory (psycopg 3 at the origin, pg8000 at the edge);
nothing here imports one. Both take `%s` placeholders, and every statement is the same text
for both (DESIGN section 2).

Transactions (anchor 2.3, SPEC.md STORE-*):
- A write is `BEGIN ISOLATION LEVEL READ COMMITTED`; a read (`read(fn)`) is
  `BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY`, so a snapshot, a change page and its head
  come from one consistent view.
- The timeouts are set per transaction (`set_config(..., true)`, i.e. `SET LOCAL`), never per
  session, because a transaction-mode pool (PgBouncer, Hyperdrive) hands the session to other
  clients between transactions. They are sent before the transaction's first statement; a
  command folds them into `aidememo_begin_command`, where `lock_timeout` already bounds the
  wait for the project row.
- A command is four round trips: `BEGIN`, `aidememo_begin_command` (timeouts, project row lock,
  membership, receipt, current resource), `aidememo_commit_mutation` (head CAS and every row),
  `COMMIT`; typed operations add their own reads in between.
- A generic put or delete (`execute_raw`, `CAP_RAW_FAST_PATH`) is one round trip: one
  `aidememo_execute_raw` statement on the autocommit connection, i.e. its own transaction,
  which runs the checks and the write server-side and returns the receipt or the refusal.
  pg8000 is the exception: it sends a statement with parameters as Parse+Sync,
  Describe+Sync, Bind+Execute+Sync, and outside a transaction a transaction-mode pool may
  hand each Sync's part to another server connection ("unnamed prepared statement does not
  exist"). So on any connection but psycopg's (`framed`, decided from the connection's module
  unless given) the same statement is sent between `BEGIN` and `COMMIT`, which pin the server
  connection; both are parameterless, which pg8000 sends as one simple query each. psycopg
  sends Parse, Bind, Describe, Execute and one Sync together: one round trip, pool-safe.
  Inside a transaction already open on the thread it declines (the generic pipeline joins
  that transaction). A failure after which the connection no longer answers (it died while
  idle in the pool, or mid-statement) is retried once on a fresh connection: the command id
  makes that safe, since a command the first attempt committed is then a replay.
- Any driver exception becomes `storage_failure` (HTTP 503 + Retry-After) with the original in
  `__cause__`, and is logged; the transaction is rolled back, and a connection that cannot
  even roll back is discarded. A `BEGIN` that fails (a connection that died while idle in the
  pool) is retried once on a fresh connection: nothing had run yet.
- Nested calls on one thread join the open transaction (a write inside a read is refused).
"""

from __future__ import annotations

import inspect
import logging
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from aidememo.domain.errors import AidememoError, ErrorCode, fail
from aidememo.domain.model import (
    Actor,
    ActorKind,
    AuditRow,
    ChangeRecord,
    CommandStart,
    HandoffIndexRow,
    MailboxQuery,
    Membership,
    MemberStatus,
    Mutation,
    Project,
    RawOutcome,
    RawWrite,
    Receipt,
    ResourceRef,
    Role,
    Scope,
    SearchHit,
    StoredResource,
    TokenBinding,
)
from aidememo.ports import CAP_RAW_FAST_PATH, CAP_REOPEN, CAP_TWO_CONNECTIONS, ReadTx, WriteTx
from aidememo.stores.postgres import schema
from aidememo.stores.postgres import sql as q
from aidememo.stores.postgres.archive import ArchiveReads, ArchiveWrites
from aidememo.stores.postgres.pool import ConnectionPool, close_quietly, one_line

T = TypeVar("T")
log = logging.getLogger("aidememo.stores.postgres")


def tsquery(terms: list[str]) -> str:
    """`'t1' | 't2'`: any term matches. Terms are letters and digits only (the tokenizer's
    output), but `'` and `\\` are escaped anyway so no input can reach tsquery syntax."""
    quoted = []
    for term in terms:
        if term and len(term.encode()) <= schema.MAX_LEXEME_BYTES:
            quoted.append("'" + term.replace("\\", "\\\\").replace("'", "''") + "'")
    return " | ".join(quoted)


def _driver_failure(what: str, exc: BaseException) -> AidememoError:
    log.warning("postgres %s failed: %s: %s", what, type(exc).__name__, exc)
    return fail(ErrorCode.STORAGE_FAILURE, f"postgres {what} failed: {one_line(exc)}")


class _Session:
    """One lent connection inside one transaction; every statement goes through `run`."""

    __slots__ = ("conn", "cur", "timeouts", "timeouts_pending")

    def __init__(self, conn: Any, timeouts: tuple[str, str]) -> None:
        self.conn = conn
        self.cur: Any = None
        self.timeouts = timeouts
        self.timeouts_pending = True

    def run(self, sql: str, params: tuple[Any, ...] | list[Any] = ()) -> list[Any]:
        """Execute one statement and return every row (none for a command)."""
        if self.timeouts_pending:
            self.timeouts_pending = False
            self.run(q.SET_TIMEOUTS, self.timeouts)
        try:
            cur = self.cur
            if cur is None:
                cur = self.cur = self.conn.cursor()
            cur.execute(sql, params)
            if cur.description is None:
                return []
            rows: list[Any] = cur.fetchall()
            return rows
        except AidememoError:
            raise
        except Exception as exc:
            raise _driver_failure("statement", exc) from exc

    def control(self, sql: str) -> None:
        """BEGIN, COMMIT or ROLLBACK: no timeouts needed first, no rows back."""
        try:
            cur = self.cur
            if cur is None:
                cur = self.cur = self.conn.cursor()
            cur.execute(sql)
        except Exception as exc:
            raise _driver_failure(sql.split(maxsplit=1)[0].lower(), exc) from exc


class PgReadTx(ArchiveReads):
    """`ReadTx` over one session; rows become value objects here and nowhere else."""

    __slots__ = ("_s",)

    def __init__(self, session: _Session) -> None:
        self._s = session

    def get_project(self, scope: Scope) -> Project | None:
        """The project row, or None."""
        rows = self._s.run(q.GET_PROJECT, (scope.tenant_id, scope.project_id))
        if not rows:
            return None
        epoch, head = rows[0]
        return Project(scope.tenant_id, scope.project_id, epoch, head)

    def get_resource(self, scope: Scope, ref: ResourceRef) -> StoredResource | None:
        """The resource's current revision and body (None body = tombstone), or None."""
        rows = self._s.run(q.GET_RESOURCE, (scope.tenant_id, scope.project_id, ref.kind, ref.id))
        if not rows:
            return None
        revision, body = rows[0]
        return StoredResource(ref, revision, _bytes(body))

    def get_receipt(self, scope: Scope, command_id: str) -> Receipt | None:
        """The stored receipt of `command_id`, or None."""
        rows = self._s.run(q.GET_RECEIPT, (scope.tenant_id, scope.project_id, command_id))
        if not rows:
            return None
        fp, actor, seq, kind, rid, revision, at = rows[0]
        return Receipt(
            command_id, fp, scope.tenant_id, scope.project_id, actor, seq,
            ResourceRef(kind, rid), revision, at,
        )  # fmt: skip

    def list_changes(
        self, scope: Scope, after_seq: int, limit: int, bodies: bool = True
    ) -> list[ChangeRecord]:
        """Changes with `seq > after_seq`, ascending, at most `limit`, bodies included
        (without `bodies`, only participant-scoped records keep theirs)."""
        statement = q.LIST_CHANGES if bodies else q.LIST_CHANGE_HEADS
        rows = self._s.run(statement, (scope.tenant_id, scope.project_id, after_seq, limit))
        return [
            ChangeRecord(
                seq, epoch, ResourceRef(kind, rid), q.OPS[op], rev, actor, at, _bytes(body)
            )
            for seq, epoch, kind, rid, op, rev, actor, at, body in rows
        ]

    def list_resources(self, scope: Scope, limit: int) -> list[StoredResource]:
        """Current resources (tombstones included) ordered by (kind, id), at most `limit`."""
        rows = self._s.run(q.LIST_RESOURCES, (scope.tenant_id, scope.project_id, limit))
        return [
            StoredResource(ResourceRef(kind, rid), rev, _bytes(body))
            for kind, rid, rev, body in rows
        ]

    def list_audit(self, scope: Scope) -> list[AuditRow]:
        """Every audit row of the project, ascending by sequence."""
        rows = self._s.run(q.LIST_AUDIT, (scope.tenant_id, scope.project_id))
        return [
            AuditRow(seq, cid, operation, ResourceRef(kind, rid), actor, at)
            for seq, cid, operation, kind, rid, actor, at in rows
        ]

    def get_actor(self, tenant_id: str, actor_id: str) -> Actor | None:
        """The actor, or None."""
        rows = self._s.run(q.GET_ACTOR, (tenant_id, actor_id))
        return Actor(tenant_id, actor_id, ActorKind(rows[0][0])) if rows else None

    def get_membership(self, scope: Scope, actor_id: str) -> Membership | None:
        """The actor's membership in the project, or None."""
        rows = self._s.run(q.GET_MEMBERSHIP, (scope.tenant_id, scope.project_id, actor_id))
        if not rows:
            return None
        role, status = rows[0]
        return Membership(
            scope.tenant_id, scope.project_id, actor_id, Role(role), MemberStatus(status)
        )

    def get_token(self, token_sha256: bytes) -> TokenBinding | None:
        """The binding of a token digest, or None."""
        rows = self._s.run(q.GET_TOKEN, (bytes(token_sha256),))
        if not rows:
            return None
        tenant, actor, active, created = rows[0]
        return TokenBinding(bytes(token_sha256), tenant, actor, bool(active), created)

    def tenant_exists(self, tenant_id: str) -> bool:
        """True when the tenant row exists."""
        return bool(self._s.run(q.TENANT_EXISTS, (tenant_id,)))

    def authenticate_token(self, token_sha256: bytes) -> TokenBinding | None:
        """The active binding of a digest whose tenant and actor exist: one round trip."""
        digest = bytes(token_sha256)
        rows = self._s.run(q.AUTHENTICATE_TOKEN, (digest,))
        if not rows:
            return None
        tenant, actor, created = rows[0]
        return TokenBinding(digest, tenant, actor, True, created)

    def get_access(self, scope: Scope, actor_id: str) -> tuple[Project | None, Membership | None]:
        """The project and the actor's membership: one round trip."""
        t, p = scope.tenant_id, scope.project_id
        rows = self._s.run(q.GET_ACCESS, (actor_id, t, p))
        if not rows:
            return None, None
        epoch, head, role, status = rows[0]
        project = Project(t, p, epoch, head)
        if role is None:
            return project, None
        return project, Membership(t, p, actor_id, Role(role), MemberStatus(status))

    def mailbox(self, scope: Scope, query: MailboxQuery) -> list[tuple[int, HandoffIndexRow]]:
        """A page of the inbox (`to_actor`) or outbox (`from_actor`), newest first."""
        params: list[str | int] = [scope.tenant_id, scope.project_id, query.actor_id]
        if query.source_id is not None:
            params.append(query.source_id)
        if query.before_seq is not None:
            params.append(query.before_seq)
        params.append(query.limit)
        key = (
            query.box == "inbox",
            query.source_id is not None,
            query.include_completed,
            query.before_seq is not None,
        )
        rows = self._s.run(q.MAILBOX[key], params)
        return [(row[6], HandoffIndexRow(*row)) for row in rows]

    def search(
        self, scope: Scope, terms: list[str], source_id: str | None, limit: int
    ) -> list[SearchHit]:
        """Facts matching any term by BM25 (FTS5's formula), higher is better, then fact id."""
        match = tsquery(terms)
        if not match or limit <= 0:
            return []
        t, p = scope.tenant_id, scope.project_id
        rows = self._s.run(
            q.SEARCH, (" ".join(terms), match, t, p, t, p, source_id, source_id, limit)
        )
        return [SearchHit(fact_id, float(score)) for fact_id, score in rows]

    # -- schema ---------------------------------------------------------------------------

    def schema_version(self) -> int:
        """The recorded schema version (0 for a database this code never touched)."""
        if not self._s.run(schema.TABLE_EXISTS)[0][0]:
            return 0
        rows = self._s.run(schema.SELECT_VERSION, (schema.COMPONENT,))
        return int(rows[0][0]) if rows else 0


class PgWriteTx(ArchiveWrites, PgReadTx):
    """`WriteTx`: the reads plus the writes of one command or one provisioning step."""

    __slots__ = ()

    def begin_command(
        self, scope: Scope, actor_id: str, command_id: str, ref: ResourceRef
    ) -> CommandStart:
        """One round trip: timeouts, project row lock, membership, receipt, resource."""
        s = self._s
        params: tuple[Any, ...]
        if s.timeouts_pending:
            s.timeouts_pending = False
            params = s.timeouts
        else:  # an earlier statement set them; NULL leaves them as they are
            params = (None, None)
        t, p = scope.tenant_id, scope.project_id
        row = s.run(q.BEGIN_COMMAND, (*params, t, p, actor_id, command_id, ref.kind, ref.id))[0]
        (
            epoch, head, role, status,
            r_fp, r_actor, r_seq, r_kind, r_rid, r_rev, r_at,
            found, revision, body,
        ) = row  # fmt: skip
        if epoch is None:
            return CommandStart(None, None, None, None)
        project = Project(t, p, epoch, head)
        membership = (
            None if role is None else Membership(t, p, actor_id, Role(role), MemberStatus(status))
        )
        receipt = (
            None
            if r_fp is None
            else Receipt(
                command_id, r_fp, t, p, r_actor, r_seq, ResourceRef(r_kind, r_rid), r_rev, r_at
            )
        )
        current = StoredResource(ref, revision, _bytes(body)) if found else None
        return CommandStart(project, membership, receipt, current)

    def commit_mutation(self, mutation: Mutation) -> None:
        """Head CAS and every row of the command in one round trip (CMD-6); the function
        raises when the head was not `seq - 1`, which surfaces as `storage_failure`."""
        r = mutation.receipt
        h = mutation.handoff
        doc = mutation.search
        self._s.run(
            q.COMMIT_MUTATION,
            (
                r.tenant_id, r.project_id, r.project_seq, mutation.project_epoch,
                r.command_id, r.fingerprint, r.actor_id, r.resource.kind, r.resource.id,
                r.revision, r.committed_at_ms, mutation.operation, mutation.op.value,
                mutation.body,
                *(
                    (None,) * 7
                    if h is None
                    else (
                        h.handoff_id, h.from_actor, h.to_actor, h.source_id, h.status,
                        h.revision, h.updated_seq,
                    )
                ),
                *((None,) * 3 if doc is None else (doc.fact_id, doc.source_id, doc.terms)),
            ),
        )  # fmt: skip

    def insert_tenant(self, tenant_id: str, created_at_ms: int) -> None:
        """Create a tenant row (an existing one is kept, with the new time)."""
        self._s.run(q.INSERT_TENANT, (tenant_id, created_at_ms))

    def insert_project(self, project: Project, created_at_ms: int) -> None:
        """Create a project row with its epoch and head."""
        p = project
        self._s.run(
            q.INSERT_PROJECT,
            (p.tenant_id, p.project_id, p.project_epoch, p.head_seq, created_at_ms),
        )

    def insert_actor(self, actor: Actor, created_at_ms: int) -> None:
        """Create an actor row."""
        self._s.run(
            q.INSERT_ACTOR, (actor.tenant_id, actor.actor_id, actor.kind.value, created_at_ms)
        )

    def put_membership(self, membership: Membership, updated_at_ms: int) -> None:
        """Create or replace a membership."""
        m = membership
        self._s.run(
            q.PUT_MEMBERSHIP,
            (m.tenant_id, m.project_id, m.actor_id, m.role.value, m.status.value, updated_at_ms),
        )

    def insert_token(self, binding: TokenBinding) -> None:
        """Bind a token digest (exactly 32 bytes, enforced by the schema) to an actor."""
        b = binding
        self._s.run(
            q.INSERT_TOKEN,
            (bytes(b.token_sha256), b.tenant_id, b.actor_id, bool(b.active), b.created_at_ms),
        )

    def set_token_active(self, token_sha256: bytes, active: bool) -> None:
        """Activate or revoke a token binding; an unknown digest is a no-op."""
        self._s.run(q.SET_TOKEN_ACTIVE, (bool(active), bytes(token_sha256)))

    # -- schema ---------------------------------------------------------------------------

    def migrate(self) -> int:
        """Apply every pending migration under the advisory lock; return the new version."""
        s = self._s
        s.run(schema.LOCK)
        s.run(schema.CREATE_VERSION_TABLE)
        current = self.schema_version()  # another process may have migrated meanwhile
        refuse_newer(current)
        for version, statements in schema.MIGRATIONS:
            if version > current:
                for statement in statements:
                    s.run(statement)
                s.run(schema.UPSERT_VERSION, (schema.COMPONENT, version))
                current = version
        return current


class PostgresStore:
    """The canonical store on PostgreSQL; implements `aidememo.ports.Store`."""

    capabilities: frozenset[str] = frozenset({CAP_REOPEN, CAP_TWO_CONNECTIONS, CAP_RAW_FAST_PATH})

    def __init__(
        self,
        connect: Callable[[], Any],
        *,
        pool_size: int = 8,
        acquire_timeout_s: float = 1.0,
        statement_timeout_ms: int = 10_000,
        lock_timeout_ms: int = 5_000,
        mode: str = "postgres",
        raw_fast_path: bool = True,
        framed: bool | None = None,
    ) -> None:
        """No connection is made here; the first transaction makes one. `raw_fast_path=False`
        leaves out `CAP_RAW_FAST_PATH`, so generic commands take the generic pipeline.
        `framed` sends the fast path's statement between BEGIN and COMMIT (None: on every
        connection but psycopg's, see the module docstring)."""
        self.mode = mode
        self.framed = framed
        if not raw_fast_path:
            self.capabilities = self.capabilities - {CAP_RAW_FAST_PATH}
        self.pool = ConnectionPool(connect, size=pool_size, acquire_timeout_s=acquire_timeout_s)
        self.statement_timeout_ms = int(statement_timeout_ms)
        self.lock_timeout_ms = int(lock_timeout_ms)
        self._timeouts = (str(self.statement_timeout_ms), str(self.lock_timeout_ms))
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

    def close(self) -> None:
        """Close the pool's connections; the store is unusable afterwards."""
        self.pool.close()

    # -- RawFastPath ----------------------------------------------------------------------

    def execute_raw(self, write: RawWrite) -> RawOutcome | None:
        """A generic put or delete in one round trip (`aidememo_execute_raw`); None inside a
        transaction already open on this thread."""
        if getattr(self._local, "tx", None) is not None:
            return None
        sc, ref = write.scope, write.resource
        params = (
            *self._timeouts, sc.tenant_id, sc.project_id, write.actor_id, write.command_id,
            write.fingerprint, ref.kind, ref.id, write.expected_revision, write.operation,
            write.op.value, write.body, write.now_ms,
        )  # fmt: skip
        row, retried = self._one_statement(q.EXECUTE_RAW, params)
        (
            outcome, seq, revision, at, error,
            epoch, head, role, status, r_fp, r_actor, r_kind, r_rid, found, res_revision,
        ) = row  # fmt: skip
        t, p = sc.tenant_id, sc.project_id
        if outcome != "refused":
            receipt = Receipt(
                write.command_id, write.fingerprint, t, p, write.actor_id, seq, ref, revision, at
            )
            # After a lost first attempt a replay may be that attempt's commit: say committed
            # (a spurious on_commit wake-up is harmless, a missed one delays live subscribers).
            return RawOutcome("committed" if retried else outcome, receipt)
        project = None if epoch is None else Project(t, p, epoch, head)
        membership = (
            None
            if role is None
            else Membership(t, p, write.actor_id, Role(role), MemberStatus(status))
        )
        stored = (
            None
            if r_fp is None
            else Receipt(
                write.command_id, r_fp, t, p, r_actor, seq, ResourceRef(r_kind, r_rid),
                revision, at,
            )
        )  # fmt: skip
        current = StoredResource(ref, res_revision, None) if found else None
        return RawOutcome(outcome, None, error, CommandStart(project, membership, stored, current))

    def _one_statement(self, sql: str, params: tuple[Any, ...]) -> tuple[Any, bool]:
        """One statement as one transaction (autocommit, or framed) and its one row, and
        whether it was retried: a failure after which the connection does not answer is
        retried once on a fresh connection (callers make that safe: see `execute_raw`)."""
        conn = self.pool.acquire()
        broken = False
        try:
            framed = self._is_framed(conn)
            try:
                return _one_row(conn, sql, params, framed), False
            except AidememoError:
                if _alive(conn, framed):
                    raise
            broken = True  # until the fresh connection answers
            close_quietly(conn)
            conn = self.pool.fresh()
            broken = False
            try:
                return _one_row(conn, sql, params, framed), True
            except AidememoError:
                broken = not _alive(conn, framed)
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
            return _not_awaitable(fn(current))
        conn = self.pool.acquire()
        try:
            session = self._begin(conn, q.BEGIN_WRITE if write else q.BEGIN_READ)
        except BaseException:
            self.pool.release(conn, broken=True)  # closed already; this frees the slot
            raise
        conn = session.conn
        broken = False
        tx = PgWriteTx(session) if write else PgReadTx(session)
        local.tx = tx
        try:
            result = _not_awaitable(fn(tx))
            session.control(q.COMMIT)
        except BaseException:
            broken = not _rollback(session)
            raise
        finally:
            local.tx = None
            _close_cursor(session)
            self.pool.release(conn, broken=broken)
        return result

    def _begin(self, conn: Any, begin: str) -> _Session:
        """Send BEGIN; a connection that died while idle is replaced once, since nothing ran
        yet. On failure every connection tried is closed."""
        session = _Session(conn, self._timeouts)
        try:
            session.control(begin)
            return session
        except BaseException as exc:
            _close_cursor(session)
            close_quietly(conn)
            if not isinstance(exc, AidememoError):
                raise
        session = _Session(self.pool.fresh(), self._timeouts)
        try:
            session.control(begin)
        except BaseException:
            _close_cursor(session)
            close_quietly(session.conn)
            raise
        return session


def _conforms(session: _Session) -> tuple[ReadTx, WriteTx]:
    """Never called: lets mypy check that the transaction classes implement the ports."""
    return PgReadTx(session), PgWriteTx(session)


def _read_version(tx: PgReadTx) -> int:
    return tx.schema_version()


def _migrate(tx: PgWriteTx) -> int:
    return tx.migrate()


def refuse_newer(version: int) -> None:
    """A database migrated by newer code is never half-understood."""
    if version > schema.SCHEMA_VERSION:
        raise fail(
            ErrorCode.STORAGE_FAILURE,
            f"database schema {version} is newer than this code's {schema.SCHEMA_VERSION}",
        )


def _bytes(value: Any) -> bytes | None:
    # Both drivers return BYTEA as bytes; a memoryview (psycopg binary loaders) is copied.
    if value is None or isinstance(value, bytes):
        return value
    return bytes(value)


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
        raise _driver_failure("statement", exc) from exc
    finally:
        if cur is not None:
            try:
                cur.close()
            except Exception as exc:
                log.debug("closing a postgres cursor failed: %r", exc)
    if len(rows) != 1:
        raise fail(ErrorCode.STORAGE_FAILURE, f"expected one row, got {len(rows)}")
    return rows[0]


def _alive(conn: Any, framed: bool) -> bool:
    """True when the connection still answers after a failed `_one_row`: `SELECT 1` (the
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


def _rollback(session: _Session) -> bool:
    """Roll back; False when the connection cannot even do that (it is then discarded)."""
    try:
        session.control(q.ROLLBACK)
    except AidememoError:
        return False
    return True


def _close_cursor(session: _Session) -> None:
    cur = session.cur
    session.cur = None
    if cur is not None:
        try:
            cur.close()
        except Exception as exc:
            log.debug("closing a postgres cursor failed: %r", exc)


def _not_awaitable(result: T) -> T:
    # A coroutine would run after the transaction ended, outside its guarantees (STORE-2).
    if inspect.isawaitable(result):
        if inspect.iscoroutine(result):
            result.close()
        raise fail(ErrorCode.STORAGE_FAILURE, "a transaction callback must not be async")
    return result
