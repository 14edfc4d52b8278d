"""The transaction views of the PostgreSQL store: `ReadTx` and `WriteTx` over one session.

One `Session` is one connection inside one transaction; the shared row mapping
(`aidememo.stores.sql_common.rows`) turns its rows into the domain's value objects, and
`PgReadTx`/`PgWriteTx` add what is PostgreSQL's own: search, a command's begin and commit
through the server-side functions, and the schema. `store.py` owns connections, transactions
and retries.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from aidememo.domain import ranking
from aidememo.domain.errors import STORE_READ_ONLY, AidememoError, ErrorCode, fail
from aidememo.domain.model import (
    CommandCall,
    CommandStart,
    Mutation,
    Scope,
    SearchHit,
    SearchPage,
)
from aidememo.ports import ReadTx, WriteTx
from aidememo.stores.postgres import schema
from aidememo.stores.postgres import sql as q
from aidememo.stores.postgres.archive import ArchiveReads, ArchiveWrites
from aidememo.stores.postgres.literals import inline
from aidememo.stores.postgres.pool import answers, close_quietly, one_line
from aidememo.stores.sql_common.artifact_rows import ArtifactRows
from aidememo.stores.sql_common.rows import SqlReadRows, SqlWriteRows, command_start
from aidememo.stores.sql_common.semantic_rows import SemanticRows

log = logging.getLogger("aidememo.stores.postgres")
T = TypeVar("T")


# SQLSTATEs with their own meaning for readiness (READY-1) and the error code (ERR-4).
_DISK_FULL = "53100"  # "could not extend file ...: No space left on device"
_READ_ONLY_TRANSACTION = "25006"  # a hot standby, or default_transaction_read_only


def sqlstate(exc: BaseException) -> str | None:
    """The SQLSTATE of a driver error: psycopg's `sqlstate`, pg8000's `C` field."""
    state = getattr(exc, "sqlstate", None)
    if isinstance(state, str):
        return state
    fields = exc.args[0] if exc.args else None
    if isinstance(fields, dict):
        code = fields.get("C")
        return code if isinstance(code, str) else None
    return None


def driver_failure(what: str, exc: BaseException) -> AidememoError:
    """A driver error as `storage_failure` (ERR-2), or `storage_full` when the server says its
    disk is full (SQLSTATE 53100, a data file that could not grow; a full WAL disk instead
    stops the server, which clients see as `storage_failure`)."""
    log.warning("postgres %s failed: %s: %s", what, type(exc).__name__, exc)
    detail = f"postgres {what} failed: {one_line(exc)}"
    state = sqlstate(exc)
    if state == _DISK_FULL:
        return fail(ErrorCode.STORAGE_FULL, detail)
    if state == _READ_ONLY_TRANSACTION:
        return fail(ErrorCode.STORAGE_FAILURE, detail, STORE_READ_ONLY)
    return fail(ErrorCode.STORAGE_FAILURE, detail)


class Session:
    """One lent connection inside one transaction; every statement goes through `execute`
    (the `RowExecutor` of the shared row mapping).

    A read view on psycopg starts lazily (`begin` holds its `BEGIN` with the timeouts, not
    sent yet; STORE-10): its first `execute` sends it first, and a first statement through
    `execute_alone` runs with the timeouts but no transaction of its own, in one round trip.
    When that first round trip fails on a connection that no longer answers (it died while
    idle in the pool), nothing had run yet: it is sent once more on a connection from
    `reconnect`, which replaces `conn`. `began` says whether a `COMMIT` or `ROLLBACK` is due,
    `broken` that `conn` is closed or unusable, `answered` that it answered after a failed lone
    statement."""

    __slots__ = (
        "alone", "answered", "began", "begin", "broken", "conn", "cur", "reconnect",
        "timeouts", "timeouts_pending",
    )  # fmt: skip

    def __init__(
        self,
        conn: Any,
        timeouts: tuple[str, str],
        begin: str | None = None,
        reconnect: Callable[[], Any] | None = None,
    ) -> None:
        self.conn = conn
        self.cur: Any = None
        self.timeouts = timeouts
        self.timeouts_pending = True
        self.begin = begin  # a lazy view's BEGIN with its timeouts, until sent
        self.began = begin is None  # otherwise the store sent the BEGIN itself
        self.alone = False  # a lone statement ran: the view may run no other
        self.broken = False
        self.answered = False  # conn answered a probe after the lone statement failed
        self.reconnect = reconnect

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """Execute one statement and return every row (none for a command)."""
        if self.begin is not None:
            begin, self.begin = self.begin, None
            try:
                self._first(lambda: self.control(begin), probe=False)  # fails only that way
            except BaseException:
                self.broken = True
                raise
            self.began = True
            self.timeouts_pending = False
        elif self.alone:
            raise fail(ErrorCode.STORAGE_FAILURE, "a read view of one statement ran another")
        if self.timeouts_pending:
            self.timeouts_pending = False
            self.execute(q.SET_TIMEOUTS, self.timeouts)
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
            raise driver_failure("statement", exc) from exc

    def execute_alone(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """Like `execute`; as the first statement of a lazy view, one simple query: the
        timeouts (`SET LOCAL`, in the query's implicit transaction) and the statement with
        its parameters written in (`literals.inline`). One statement reads one snapshot, so
        the view is as consistent as a transaction; it may then run no other statement (a
        later one fails with `storage_failure`)."""
        begin = self.begin
        if begin is None:
            return self.execute(sql, params)
        self.begin = None
        self.alone = True
        # the BEGIN's own `SET LOCAL`s (what follows its first "; "), then the statement
        text = begin.partition("; ")[2] + "; " + inline(sql, params)
        return self._first(lambda: self._simple(text), probe=True)

    def _simple(self, text: str) -> list[Any]:
        try:
            self.cur = cur = self.conn.cursor()
            cur.execute(text)
            while cur.description is None and cur.nextset():
                pass  # past the SETs' results to the statement's
            rows: list[Any] = cur.fetchall()
            return rows
        except Exception as exc:
            raise driver_failure("statement", exc) from exc

    def _first(self, send: Callable[[], T], *, probe: bool) -> T:
        """The view's first round trip, sent once more on a fresh connection when it failed
        because `conn` no longer answers (`probe`: ask it; otherwise any failure says so)."""
        try:
            return send()
        except AidememoError:
            if self.reconnect is None:
                raise
            if probe and answers(self.conn, False):
                self.answered = True
                raise
        reconnect, self.reconnect = self.reconnect, None
        self.broken = True
        close_quietly(self.conn)
        self.cur = None
        self.conn = reconnect()
        self.broken = False
        return send()

    def control(self, sql: str) -> None:
        """BEGIN, COMMIT or ROLLBACK: no timeouts needed first, no rows back."""
        try:
            cur = self.cur
            if cur is None:
                cur = self.cur = self.conn.cursor()
            cur.execute(sql)
        except Exception as exc:
            raise driver_failure(sql.split(maxsplit=1)[0].lower(), exc) from exc


class PgReadTx(SemanticRows, ArtifactRows[Session], ArchiveReads[Session], SqlReadRows[Session]):
    """`ReadTx` over one session: the shared row mapping plus search and the schema."""

    __slots__ = ()
    _d = q.DIALECT
    _resources_at = (q.RESOURCES_AT, q.RESOURCES_AT_AFTER)
    _session_facts = q.SESSION_FACTS

    # -- schema ---------------------------------------------------------------------------

    def schema_version(self) -> int:
        """The recorded schema version (0 for a database this code never touched)."""
        if not self._x.execute(schema.TABLE_EXISTS)[0][0]:
            return 0
        rows = self._x.execute(schema.SELECT_VERSION, (schema.COMPONENT,))
        return int(rows[0][0]) if rows else 0

    # -- search ---------------------------------------------------------------------------

    def search(
        self, scope: Scope, terms: list[str], source_id: str | None, limit: int
    ) -> SearchPage:
        """Facts matching any term, best first, then by fact id (SRCH-3..6): one call of
        `aidememo_search`, which runs `aidememo.domain.ranking`'s plan server-side and reads
        the hits' facts in the same statement."""
        if not terms or limit <= 0:
            return SearchPage([], True)
        params = (
            scope.tenant_id, scope.project_id, " ".join(terms), source_id, limit,
            ranking.window_for(len(terms)), *ranking.SQL_CONSTANTS,
        )  # fmt: skip
        fact_ids, units, exhaustive, bodies = self._x.execute_alone(q.SEARCH, params)[0]
        unit = ranking.SCORE_UNIT
        hits = [SearchHit(f, int(n) * unit) for f, n in zip(fact_ids, units, strict=True)]
        blob = self._d.blob
        return SearchPage(hits, bool(exhaustive), [blob(b) for b in bodies])


class PgWriteTx(ArchiveWrites[Session], SqlWriteRows[Session], PgReadTx):
    """`WriteTx`: the reads plus the writes of one command or one provisioning step."""

    __slots__ = ()

    def begin_command(self, call: CommandCall) -> CommandStart:
        """One round trip: timeouts, project row lock, membership, receipt, resource, and
        with `call.token_sha256` the binding's check of AUTH-7."""
        s = self._x
        params: tuple[Any, ...]
        if s.timeouts_pending:
            s.timeouts_pending = False
            params = s.timeouts
        else:  # an earlier statement set them; NULL leaves them as they are
            params = (None, None)
        t, p = call.scope.tenant_id, call.scope.project_id
        actor_id, ref, token = call.actor_id, call.resource, call.token_sha256
        args = (*params, t, p, actor_id, call.command_id, ref.kind, ref.id)
        if token is None:
            row = s.execute(q.BEGIN_COMMAND, args)[0]
        else:
            row = s.execute(q.BEGIN_COMMAND_TOKEN, (bytes(token), t, actor_id, *args))[0]
            if row[-1] is None:
                raise fail(ErrorCode.AUTHENTICATION_FAILED, "unknown or revoked token")
        if row[0] is None:  # no project: the command is refused on that alone
            return CommandStart(None, None, None, None)
        found, revision, body = row[11], row[12], row[13]
        return command_start(call, row, revision if found else None, q.blob(body))

    def execute_raw_row(self, sql: str, params: Sequence[Any]) -> Any:
        """The one row of `aidememo_execute_raw` run in this transaction (`PostgresStore.
        execute_raw` inside a transaction already open on the thread); the function sets the
        transaction's timeouts itself."""
        s = self._x
        s.timeouts_pending = False
        return s.execute(sql, params)[0]

    def commit_mutation(self, mutation: Mutation) -> None:
        """Head CAS and every row of the command in one round trip (CMD-6); the function
        raises when the head was not `seq - 1`, which surfaces as `storage_failure`."""
        r = mutation.receipt
        h = mutation.handoff
        doc = mutation.search
        self._x.execute(
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
                q.commit_payload(r.tenant_id, r.project_id, r.project_seq),
            ),
        )  # fmt: skip

    # -- schema ---------------------------------------------------------------------------

    def migrate(self) -> int:
        """Apply every pending migration under the advisory lock; return the new version."""
        s = self._x
        s.execute(schema.LOCK)
        s.execute(schema.CREATE_VERSION_TABLE)
        current = self.schema_version()  # another process may have migrated meanwhile
        refuse_newer(current)
        for version, statements in schema.MIGRATIONS:
            if version > current:
                for statement in statements:
                    s.execute(statement)
                s.execute(schema.UPSERT_VERSION, (schema.COMPONENT, version))
                current = version
        return current


def _conforms(session: Session) -> tuple[ReadTx, WriteTx]:
    """Never called: lets mypy check that the transaction classes implement the ports."""
    return PgReadTx(session), PgWriteTx(session)


def refuse_newer(version: int) -> None:
    """A database migrated by newer code is never half-understood."""
    if version > schema.SCHEMA_VERSION:
        raise fail(
            ErrorCode.STORAGE_FAILURE,
            f"database schema {version} is newer than this code's {schema.SCHEMA_VERSION}",
        )
