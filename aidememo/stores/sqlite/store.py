"""`SqliteStore`: the canonical store on SQLite, over any `SqlExecutor`.

The same SQL serves the embedded file (stdlib `sqlite3`) and a project's Durable Object
(`ctx.storage.sql`); only the executor differs (DESIGN section 2). A command is one
statement before its commit (`begin_command`'s four point reads in one SELECT), then the
operation's own reads, then five to eight statements in `commit_mutation`; a generic put
or delete (`POST /v1/commands`) is six statements between `BEGIN` and `COMMIT`.

Writers are serialized by the executor (`BEGIN IMMEDIATE`, or a Durable Object's single
thread), so `begin_command` reads without a lock; the head still moves by compare-and-swap, so a
second writer that slipped past would fail with `storage_failure` instead of forking history.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from typing import Any, TypeVar

from aidememo.domain.errors import ErrorCode, fail
from aidememo.domain.model import (
    Actor,
    ActorKind,
    AuditRow,
    ChangeOp,
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
from aidememo.stores.sqlite import sql as q
from aidememo.stores.sqlite.archive import ArchiveReads, ArchiveWrites
from aidememo.stores.sqlite.executor import SqlExecutor
from aidememo.stores.sqlite.schema import migrate, read_version

T = TypeVar("T")

_OPS = {op.value: op for op in ChangeOp}
_ROLES = {role.value: role for role in Role}
_STATUSES = {status.value: status for status in MemberStatus}


def fts_query(terms: list[str]) -> str:
    """An FTS5 query matching any term, each quoted so no user syntax reaches FTS5."""
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)


class SqliteReadTx(ArchiveReads):
    """`ReadTx` over an executor; rows become value objects here and nowhere else."""

    __slots__ = ("_x",)

    def __init__(self, executor: SqlExecutor) -> None:
        self._x = executor

    def get_project(self, scope: Scope) -> Project | None:
        """The project row, or None."""
        rows: list[Any] = self._x.execute(q.GET_PROJECT, (scope.tenant_id, scope.project_id))
        if not rows:
            return None
        epoch, head = rows[0]
        return Project(scope.tenant_id, scope.project_id, epoch, head)

    def get_resource(self, scope: Scope, ref: ResourceRef) -> StoredResource | None:
        """The resource's current revision and body (None body = tombstone), or None."""
        rows: list[Any] = self._x.execute(
            q.GET_RESOURCE, (scope.tenant_id, scope.project_id, ref.kind, ref.id)
        )
        if not rows:
            return None
        revision, body = rows[0]
        return StoredResource(ref, revision, body)

    def get_receipt(self, scope: Scope, command_id: str) -> Receipt | None:
        """The stored receipt of `command_id`, or None."""
        rows: list[Any] = self._x.execute(
            q.GET_RECEIPT, (scope.tenant_id, scope.project_id, command_id)
        )
        if not rows:
            return None
        fp, actor, seq, kind, rid, revision, at = rows[0]
        return Receipt(
            command_id=command_id,
            fingerprint=fp,
            tenant_id=scope.tenant_id,
            project_id=scope.project_id,
            actor_id=actor,
            project_seq=seq,
            resource=ResourceRef(kind, rid),
            revision=revision,
            committed_at_ms=at,
        )

    def list_changes(
        self, scope: Scope, after_seq: int, limit: int, bodies: bool = True
    ) -> list[ChangeRecord]:
        """Changes with `seq > after_seq`, ascending, at most `limit`, bodies included
        (without `bodies`, only participant-scoped records keep theirs)."""
        rows: list[Any] = self._x.execute(
            q.LIST_CHANGES if bodies else q.LIST_CHANGE_HEADS,
            (scope.tenant_id, scope.project_id, after_seq, limit),
        )
        return [
            ChangeRecord(seq, epoch, ResourceRef(kind, rid), _OPS[op], rev, actor, at, body)
            for seq, epoch, kind, rid, op, rev, actor, at, body in rows
        ]

    def list_resources(
        self, scope: Scope, limit: int, after: ResourceRef | None = None
    ) -> list[StoredResource]:
        """Current resources (tombstones included) ordered by (kind, id), at most `limit`,
        after `after` when given."""
        t, p = scope.tenant_id, scope.project_id
        rows: list[Any] = (
            self._x.execute(q.LIST_RESOURCES, (t, p, limit))
            if after is None
            else self._x.execute(q.LIST_RESOURCES_AFTER, (t, p, after.kind, after.id, limit))
        )
        return [StoredResource(ResourceRef(kind, rid), rev, body) for kind, rid, rev, body in rows]

    def list_audit(
        self, scope: Scope, after_seq: int = 0, limit: int | None = None
    ) -> list[AuditRow]:
        """The audit rows after `after_seq`, ascending by sequence, at most `limit`."""
        rows: list[Any] = self._x.execute(
            q.LIST_AUDIT,
            (scope.tenant_id, scope.project_id, after_seq, -1 if limit is None else limit),
        )
        return [
            AuditRow(seq, cid, operation, ResourceRef(kind, rid), actor, at)
            for seq, cid, operation, kind, rid, actor, at in rows
        ]

    def get_actor(self, tenant_id: str, actor_id: str) -> Actor | None:
        """The actor, or None."""
        rows: list[Any] = self._x.execute(q.GET_ACTOR, (tenant_id, actor_id))
        return Actor(tenant_id, actor_id, ActorKind(rows[0][0])) if rows else None

    def get_membership(self, scope: Scope, actor_id: str) -> Membership | None:
        """The actor's membership in the project, or None."""
        rows: list[Any] = self._x.execute(
            q.GET_MEMBERSHIP, (scope.tenant_id, scope.project_id, actor_id)
        )
        if not rows:
            return None
        role, status = rows[0]
        return Membership(
            scope.tenant_id, scope.project_id, actor_id, _ROLES[role], _STATUSES[status]
        )

    def get_token(self, token_sha256: bytes) -> TokenBinding | None:
        """The binding of a token digest, or None."""
        rows: list[Any] = self._x.execute(q.GET_TOKEN, (token_sha256,))
        if not rows:
            return None
        tenant, actor, active, created = rows[0]
        return TokenBinding(token_sha256, tenant, actor, bool(active), created)

    def tenant_exists(self, tenant_id: str) -> bool:
        """True when the tenant row exists."""
        return bool(self._x.execute(q.TENANT_EXISTS, (tenant_id,)))

    def authenticate_token(self, token_sha256: bytes) -> TokenBinding | None:
        """The active binding of a digest whose tenant and actor exist: one statement."""
        rows: list[Any] = self._x.execute_alone(q.AUTHENTICATE_TOKEN, (token_sha256,))
        if not rows:
            return None
        tenant, actor, created = rows[0]
        return TokenBinding(token_sha256, tenant, actor, True, created)

    def get_access(self, scope: Scope, actor_id: str) -> tuple[Project | None, Membership | None]:
        """The project and the actor's membership: one statement."""
        t, p = scope.tenant_id, scope.project_id
        rows: list[Any] = self._x.execute(q.GET_ACCESS, (actor_id, t, p))
        if not rows:
            return None, None
        epoch, head, role, status = rows[0]
        project = Project(t, p, epoch, head)
        if role is None:
            return project, None
        return project, Membership(t, p, actor_id, _ROLES[role], _STATUSES[status])

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
        rows: list[Any] = self._x.execute(q.MAILBOX[key], params)
        return [(row[6], HandoffIndexRow(*row)) for row in rows]

    def search(
        self, scope: Scope, terms: list[str], source_id: str | None, limit: int
    ) -> list[SearchHit]:
        """Facts matching any term, by BM25 (score = -bm25, higher is better), then fact id."""
        if not terms or limit <= 0:
            return []
        match = fts_query(terms)
        t, p = scope.tenant_id, scope.project_id
        params: tuple[str | int, ...]
        if source_id is None:
            statement, params = q.SEARCH, (match, t, p, limit)
        else:
            statement, params = q.SEARCH_IN_SOURCE, (match, t, p, source_id, limit)
        rows: list[Any] = self._x.execute(statement, params)
        return [SearchHit(fact_id, -float(rank)) for fact_id, rank in rows]


class SqliteWriteTx(ArchiveWrites, SqliteReadTx):
    """`WriteTx`: the reads plus the writes of one command or one provisioning step."""

    __slots__ = ()

    def begin_command(
        self, scope: Scope, actor_id: str, command_id: str, ref: ResourceRef
    ) -> CommandStart:
        """The four point reads of CMD-5 in one statement (`q.BEGIN_COMMAND`): what
        `get_project`, `get_membership`, `get_receipt` and `get_resource` would return."""
        t, p = scope.tenant_id, scope.project_id
        kind, rid = ref.kind, ref.id
        row: Any = self._x.execute(
            q.BEGIN_COMMAND, (t, p, t, p, actor_id, t, p, command_id, t, p, kind, rid)
        )[0]
        epoch, head, role, status, fp, actor, seq, rkind, rrid, rrev, at, rev, body = row
        return CommandStart(
            None if epoch is None else Project(t, p, epoch, head),
            None if role is None else Membership(t, p, actor_id, _ROLES[role], _STATUSES[status]),
            None
            if fp is None
            else Receipt(
                command_id=command_id,
                fingerprint=fp,
                tenant_id=t,
                project_id=p,
                actor_id=actor,
                project_seq=seq,
                resource=ResourceRef(rkind, rrid),
                revision=rrev,
                committed_at_ms=at,
            ),
            None if rev is None else StoredResource(ref, rev, body),
        )

    def commit_mutation(self, mutation: Mutation) -> None:
        """Move the head by compare-and-swap, then write resource, change, audit, receipt and
        the optional index rows (CMD-6); `storage_failure` if the head was not `seq - 1`."""
        r = mutation.receipt
        t, p, seq = r.tenant_id, r.project_id, r.project_seq
        x = self._x
        if x.execute_count(q.ADVANCE_HEAD, (seq, t, p, seq - 1)) != 1:
            raise fail(ErrorCode.STORAGE_FAILURE, "project head moved during the command")
        kind, rid, rev, actor, at = (
            r.resource.kind,
            r.resource.id,
            r.revision,
            r.actor_id,
            (r.committed_at_ms),
        )
        body = mutation.body
        x.execute(q.UPSERT_RESOURCE, (t, p, kind, rid, rev, body))
        x.execute(
            q.INSERT_CHANGE,
            (t, p, seq, mutation.project_epoch, kind, rid, mutation.op.value, rev, actor, at, body),
        )
        x.execute(
            q.INSERT_AUDIT, (t, p, seq, r.command_id, mutation.operation, kind, rid, actor, at)
        )
        x.execute(
            q.INSERT_RECEIPT, (t, p, r.command_id, r.fingerprint, actor, seq, kind, rid, rev, at)
        )
        h = mutation.handoff
        if h is not None:
            x.execute(
                q.UPSERT_HANDOFF,
                (
                    t,
                    p,
                    h.handoff_id,
                    h.from_actor,
                    h.to_actor,
                    h.source_id,
                    h.status,
                    h.revision,
                    h.updated_seq,
                ),
            )
        doc = mutation.search
        if doc is not None:
            rowid = x.execute(q.SEARCH_KEY, (t, p, doc.fact_id))[0][0]
            x.execute(q.SEARCH_DELETE, (rowid,))
            x.execute(q.SEARCH_INSERT, (rowid, doc.terms, t, p, doc.fact_id, doc.source_id))

    def insert_tenant(self, tenant_id: str, created_at_ms: int) -> None:
        """Create a tenant row (an existing one is kept, with the new time)."""
        self._x.execute(q.INSERT_TENANT, (tenant_id, created_at_ms))

    def insert_project(self, project: Project, created_at_ms: int) -> None:
        """Create a project row with its epoch and head."""
        self._x.execute(
            q.INSERT_PROJECT,
            (
                project.tenant_id,
                project.project_id,
                project.project_epoch,
                project.head_seq,
                created_at_ms,
            ),
        )

    def insert_actor(self, actor: Actor, created_at_ms: int) -> None:
        """Create an actor row."""
        self._x.execute(
            q.INSERT_ACTOR, (actor.tenant_id, actor.actor_id, actor.kind.value, created_at_ms)
        )

    def put_membership(self, membership: Membership, updated_at_ms: int) -> None:
        """Create or replace a membership."""
        m = membership
        self._x.execute(
            q.PUT_MEMBERSHIP,
            (m.tenant_id, m.project_id, m.actor_id, m.role.value, m.status.value, updated_at_ms),
        )

    def insert_token(self, binding: TokenBinding) -> None:
        """Bind a token digest (exactly 32 bytes, enforced by the schema) to an actor."""
        b = binding
        self._x.execute(
            q.INSERT_TOKEN,
            (bytes(b.token_sha256), b.tenant_id, b.actor_id, int(b.active), b.created_at_ms),
        )

    def set_token_active(self, token_sha256: bytes, active: bool) -> None:
        """Activate or revoke a token binding; an unknown digest is a no-op."""
        self._x.execute(q.SET_TOKEN_ACTIVE, (int(active), token_sha256))


class SqliteStore:
    """The canonical store on one SQLite database; implements `aidememo.ports.Store`."""

    def __init__(self, executor: SqlExecutor, mode: str = "single_node") -> None:
        self.executor = executor
        self.mode = mode
        self.capabilities: frozenset[str] = executor.capabilities
        self._read_tx = SqliteReadTx(executor)
        self._write_tx = SqliteWriteTx(executor)
        migrate(executor)

    @classmethod
    def open_file(
        cls, path: str | os.PathLike[str], synchronous: str = "FULL", mode: str = "single_node"
    ) -> SqliteStore:
        """Open (or create, 0600) a database file with the stdlib `sqlite3` executor."""
        from aidememo.stores.sqlite.sqlite3_executor import Sqlite3Executor

        executor = Sqlite3Executor(path, synchronous=synchronous)
        return cls._opened(executor, mode)

    @classmethod
    def open_memory(cls) -> SqliteStore:
        """A private in-memory database: fast, gone on close (tests, throwaway stores)."""
        from aidememo.stores.sqlite.sqlite3_executor import MEMORY, Sqlite3Executor

        return cls._opened(Sqlite3Executor(MEMORY), "single_node")

    @classmethod
    def on_durable_object(
        cls, storage: Any, capabilities: frozenset[str] = frozenset()
    ) -> SqliteStore:
        """The store of one project's Durable Object, over `ctx.storage`."""
        from aidememo.stores.sqlite.do_executor import DoSqlExecutor

        return cls(DoSqlExecutor(storage, capabilities), mode="edge")

    @classmethod
    def _opened(cls, executor: SqlExecutor, mode: str) -> SqliteStore:
        try:
            return cls(executor, mode)
        except BaseException:
            executor.close()  # a refused schema must not leak the connection
            raise

    def transaction(self, fn: Callable[[WriteTx], T]) -> T:
        """Run `fn` in one write transaction; commit if it returns, roll back if it raises."""
        tx = self._write_tx

        def run() -> T:
            return _not_awaitable(fn(tx))

        return self.executor.transaction(run)

    def read(self, fn: Callable[[ReadTx], T]) -> T:
        """Run `fn` against one consistent read-only view."""
        tx = self._read_tx
        return self.executor.read(lambda: _not_awaitable(fn(tx)))

    def schema_version(self) -> int:
        """The version recorded in `aidememo_schema`."""
        executor = self.executor
        return executor.read(lambda: read_version(executor))

    def free_bytes(self) -> int | None:
        """Free bytes on the database file's file system, for the readiness probe (READY-1);
        None where the executor has no file (`:memory:`, a Durable Object)."""
        probe: Callable[[], int | None] | None = getattr(self.executor, "free_bytes", None)
        return None if probe is None else probe()

    def close(self) -> None:
        """Release the connection; the store is unusable afterwards."""
        self.executor.close()


def _not_awaitable(result: T) -> T:
    # A coroutine would run after the transaction ended, outside its guarantees (STORE-2);
    # raising inside the callback rolls the transaction back.
    if inspect.isawaitable(result):
        if inspect.iscoroutine(result):
            result.close()
        raise fail(ErrorCode.STORAGE_FAILURE, "a transaction callback must not be async")
    return result
