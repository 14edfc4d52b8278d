"""The transaction views of the PostgreSQL store: every query of `ReadTx` and `WriteTx`.

One `Session` is one connection inside one transaction; `PgReadTx`/`PgWriteTx` turn its rows
into the domain's value objects. `store.py` owns connections, transactions and retries.
"""

from __future__ import annotations

import logging
from typing import Any

from aidememo.domain.errors import STORE_READ_ONLY, AidememoError, ErrorCode, fail
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
    Receipt,
    ResourceRef,
    Role,
    Scope,
    SearchHit,
    StoredResource,
    TokenBinding,
)
from aidememo.ports import ReadTx, WriteTx
from aidememo.stores.postgres import schema
from aidememo.stores.postgres import sql as q
from aidememo.stores.postgres.archive import ArchiveReads, ArchiveWrites
from aidememo.stores.postgres.pool import one_line

log = logging.getLogger("aidememo.stores.postgres")


def tsquery(terms: list[str]) -> str:
    """`'t1' | 't2'`: any term matches. Terms are letters and digits only (the tokenizer's
    output), but `'` and `\\` are escaped anyway so no input can reach tsquery syntax."""
    quoted = []
    for term in terms:
        if term and len(term.encode()) <= schema.MAX_LEXEME_BYTES:
            quoted.append("'" + term.replace("\\", "\\\\").replace("'", "''") + "'")
    return " | ".join(quoted)


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
            raise driver_failure("statement", exc) from exc

    def control(self, sql: str) -> None:
        """BEGIN, COMMIT or ROLLBACK: no timeouts needed first, no rows back."""
        try:
            cur = self.cur
            if cur is None:
                cur = self.cur = self.conn.cursor()
            cur.execute(sql)
        except Exception as exc:
            raise driver_failure(sql.split(maxsplit=1)[0].lower(), exc) from exc


class PgReadTx(ArchiveReads):
    """`ReadTx` over one session; rows become value objects here and nowhere else."""

    __slots__ = ("_s",)

    def __init__(self, session: Session) -> None:
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

    def list_resources(
        self, scope: Scope, limit: int, after: ResourceRef | None = None
    ) -> list[StoredResource]:
        """Current resources (tombstones included) ordered by (kind, id), at most `limit`,
        after `after` when given."""
        t, p = scope.tenant_id, scope.project_id
        rows = (
            self._s.run(q.LIST_RESOURCES, (t, p, limit))
            if after is None
            else self._s.run(q.LIST_RESOURCES_AFTER, (t, p, after.kind, after.id, limit))
        )
        return [
            StoredResource(ResourceRef(kind, rid), rev, _bytes(body))
            for kind, rid, rev, body in rows
        ]

    def list_audit(
        self, scope: Scope, after_seq: int = 0, limit: int | None = None
    ) -> list[AuditRow]:
        """The audit rows after `after_seq`, ascending by sequence, at most `limit`."""
        rows = self._s.run(q.LIST_AUDIT, (scope.tenant_id, scope.project_id, after_seq, limit))
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


def _bytes(value: Any) -> bytes | None:
    # Both drivers return BYTEA as bytes; a memoryview (psycopg binary loaders) is copied.
    if value is None or isinstance(value, bytes):
        return value
    return bytes(value)
