"""The row mapping of the SQL stores, written once for SQLite and PostgreSQL.

`SqlReadRows` is every `ReadTx` query whose SQL both dialects share, `SqlWriteRows` the
provisioning writes and `restore_history` (ARC-3). Both run over a `RowExecutor` (the SQLite
store's executor, or the PostgreSQL store's session) and read the statement texts and value
conversions off the class's `Dialect`; rows become value objects here and nowhere else. A
store's transaction classes mix them in and add what is their own.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from aidememo.domain.errors import ErrorCode, fail
from aidememo.domain.limits import SQL_INT_MAX, seq_bound
from aidememo.domain.model import (
    Actor,
    ActorKind,
    AuditRow,
    ChangeOp,
    ChangeRecord,
    CommandCall,
    CommandStart,
    HandoffIndexRow,
    History,
    MailboxQuery,
    Member,
    Membership,
    MemberStatus,
    Project,
    Receipt,
    ResourceRef,
    Role,
    Scope,
    SearchDoc,
    StoredResource,
    TokenBinding,
)
from aidememo.stores.sql_common.dialect import Dialect

OPS = {op.value: op for op in ChangeOp}
ROLES = {role.value: role for role in Role}
STATUSES = {status.value: status for status in MemberStatus}


def command_start(
    call: CommandCall, row: Sequence[Any], revision: int | None, body: bytes | None
) -> CommandStart:
    """The `CommandStart` of CMD-5's one-statement read for `call`: `row` begins with the
    project's epoch and head, the membership's role and status and the receipt's fingerprint,
    actor, sequence, kind, resource id, revision and time (NULLs where a row is missing);
    `revision` and `body` are the resource's (revision None: never written)."""
    t, p = call.scope.tenant_id, call.scope.project_id
    epoch, head, role, status, fp, actor, seq, kind, rid, r_rev, at = row[:11]
    actor_id, command_id = call.actor_id, call.command_id
    return CommandStart(
        None if epoch is None else Project(t, p, epoch, head),
        None if role is None else Membership(t, p, actor_id, ROLES[role], STATUSES[status]),
        None
        if fp is None
        else Receipt(command_id, fp, t, p, actor, seq, ResourceRef(kind, rid), r_rev, at),
        None if revision is None else StoredResource(call.resource, revision, body),
    )


class RowExecutor(Protocol):
    """Runs one statement of the dialect and returns every row at once, as sequences in
    column order (none for a command); a failure is `storage_failure`."""

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """Run one statement."""
        ...

    def execute_alone(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """`execute` for a statement that may be a read view's only one (the SQLite
        executors may then skip the view's `BEGIN`/`COMMIT`)."""
        ...


X = TypeVar("X", bound=RowExecutor)


class SqlReadRows(Generic[X]):
    """The shared `ReadTx` queries over `self._x`, in the dialect `_d` (a class attribute of
    the store's transaction class)."""

    __slots__ = ("_x",)
    _d: ClassVar[Dialect]
    # The dialect's snapshot statements (first page, next page) and session facts statement.
    _resources_at: ClassVar[tuple[str, str]]
    _session_facts: ClassVar[str]

    def __init__(self, executor: X) -> None:
        self._x = executor

    def list_resources_at(
        self, scope: Scope, at_seq: int, limit: int, after: ResourceRef | None = None
    ) -> list[StoredResource]:
        """The resources as of `at_seq`, from the change log (SNAP-4), ordered by (kind, id),
        at most `limit`, after `after` when given."""
        t, p = scope.tenant_id, scope.project_id
        first, next_page = self._resources_at
        rows: list[Any] = (
            self._x.execute(first, (at_seq, t, p, limit))
            if after is None
            else self._x.execute(next_page, (at_seq, t, p, after.kind, after.id, limit))
        )
        blob = self._d.blob
        return [
            StoredResource(ResourceRef(kind, rid), rev, blob(body)) for kind, rid, rev, body in rows
        ]

    def list_session_facts(
        self, scope: Scope, session_id: str, after_seq: int, limit: int
    ) -> list[tuple[int, StoredResource]]:
        """A session's facts in commit order, on the session facts index (READS-4)."""
        rows: list[Any] = self._x.execute(
            self._session_facts,
            (scope.tenant_id, scope.project_id, session_id, seq_bound(after_seq), limit),
        )
        blob = self._d.blob
        return [
            (int(seq), StoredResource(ResourceRef("fact", rid), rev, blob(body)))
            for seq, rid, rev, body in rows
        ]

    def get_project(self, scope: Scope) -> Project | None:
        """The project row, or None."""
        rows = self._x.execute(self._d.GET_PROJECT, (scope.tenant_id, scope.project_id))
        if not rows:
            return None
        epoch, head = rows[0]
        return Project(scope.tenant_id, scope.project_id, epoch, head)

    def get_resource(self, scope: Scope, ref: ResourceRef) -> StoredResource | None:
        """The resource's current revision and body (None body = tombstone), or None."""
        d = self._d
        rows = self._x.execute(
            d.GET_RESOURCE, (scope.tenant_id, scope.project_id, ref.kind, ref.id)
        )
        if not rows:
            return None
        revision, body = rows[0]
        return StoredResource(ref, revision, d.blob(body))

    def get_receipt(self, scope: Scope, command_id: str) -> Receipt | None:
        """The stored receipt of `command_id`, or None."""
        t, p = scope.tenant_id, scope.project_id
        rows = self._x.execute(self._d.GET_RECEIPT, (t, p, command_id))
        if not rows:
            return None
        fp, actor, seq, kind, rid, revision, at = rows[0]
        return Receipt(command_id, fp, t, p, actor, seq, ResourceRef(kind, rid), revision, at)

    def list_changes(
        self, scope: Scope, after_seq: int, limit: int, bodies: bool = True
    ) -> list[ChangeRecord]:
        """Changes with `seq > after_seq`, ascending, at most `limit`, bodies included
        (without `bodies`, only participant-scoped records keep theirs)."""
        d = self._d
        rows = self._x.execute(
            d.LIST_CHANGES if bodies else d.LIST_CHANGE_HEADS,
            (scope.tenant_id, scope.project_id, seq_bound(after_seq), limit),
        )
        blob = d.blob
        return [
            ChangeRecord(seq, epoch, ResourceRef(kind, rid), OPS[op], rev, actor, at, blob(body))
            for seq, epoch, kind, rid, op, rev, actor, at, body in rows
        ]

    def list_resources(
        self, scope: Scope, limit: int, after: ResourceRef | None = None
    ) -> list[StoredResource]:
        """Current resources (tombstones included) ordered by (kind, id), at most `limit`,
        after `after` when given."""
        d, t, p = self._d, scope.tenant_id, scope.project_id
        rows = (
            self._x.execute(d.LIST_RESOURCES, (t, p, limit))
            if after is None
            else self._x.execute(d.LIST_RESOURCES_AFTER, (t, p, after.kind, after.id, limit))
        )
        blob = d.blob
        return [
            StoredResource(ResourceRef(kind, rid), rev, blob(body)) for kind, rid, rev, body in rows
        ]

    def page_token_key(self) -> bytes:
        """The key of snapshot page tokens, made by the schema's migration (SNAP-3)."""
        rows = self._x.execute(self._d.GET_STORE_KEY, ("snapshot_page",))
        key = self._d.blob(rows[0][0]) if rows else None
        if key is None:
            raise fail(ErrorCode.STORAGE_FAILURE, "the store has no page token key")
        return key

    def list_audit(
        self, scope: Scope, after_seq: int = 0, limit: int | None = None
    ) -> list[AuditRow]:
        """The audit rows after `after_seq`, ascending by sequence, at most `limit`."""
        d = self._d
        rows = self._x.execute(
            d.LIST_AUDIT,
            (
                scope.tenant_id,
                scope.project_id,
                seq_bound(after_seq),
                d.no_limit if limit is None else limit,
            ),
        )
        return [
            AuditRow(seq, cid, operation, ResourceRef(kind, rid), actor, at)
            for seq, cid, operation, kind, rid, actor, at in rows
        ]

    def get_actor(self, tenant_id: str, actor_id: str) -> Actor | None:
        """The actor, or None."""
        rows = self._x.execute(self._d.GET_ACTOR, (tenant_id, actor_id))
        return Actor(tenant_id, actor_id, ActorKind(rows[0][0])) if rows else None

    def get_membership(self, scope: Scope, actor_id: str) -> Membership | None:
        """The actor's membership in the project, or None."""
        t, p = scope.tenant_id, scope.project_id
        rows = self._x.execute(self._d.GET_MEMBERSHIP, (t, p, actor_id))
        if not rows:
            return None
        role, status = rows[0]
        return Membership(t, p, actor_id, ROLES[role], STATUSES[status])

    def get_token(self, token_sha256: bytes) -> TokenBinding | None:
        """The binding of a token digest, or None."""
        digest = bytes(token_sha256)
        rows = self._x.execute(self._d.GET_TOKEN, (digest,))
        if not rows:
            return None
        tenant, actor, active, created = rows[0]
        return TokenBinding(digest, tenant, actor, bool(active), created)

    def tenant_exists(self, tenant_id: str) -> bool:
        """True when the tenant row exists."""
        return bool(self._x.execute(self._d.TENANT_EXISTS, (tenant_id,)))

    def authenticate_token(self, token_sha256: bytes) -> TokenBinding | None:
        """The active binding of a digest whose tenant and actor exist: one statement."""
        digest = bytes(token_sha256)
        rows = self._x.execute_alone(self._d.AUTHENTICATE_TOKEN, (digest,))
        if not rows:
            return None
        tenant, actor, created = rows[0]
        return TokenBinding(digest, tenant, actor, True, created)

    def token_valid(self, token_sha256: bytes, tenant_id: str, actor_id: str) -> bool:
        """True when the digest is bound, active, to this tenant's actor (AUTH-7)."""
        rows = self._x.execute(self._d.TOKEN_VALID, (bytes(token_sha256), tenant_id, actor_id))
        return bool(rows)

    def get_access(
        self, scope: Scope, actor_id: str, token_sha256: bytes | None = None
    ) -> tuple[Project | None, Membership | None]:
        """The project and the actor's membership: one statement, which also checks the
        binding of `token_sha256` when given (AUTH-7)."""
        t, p = scope.tenant_id, scope.project_id
        if token_sha256 is None:
            rows = self._x.execute(self._d.GET_ACCESS, (actor_id, t, p))
            if not rows:
                return None, None
            epoch, head, role, status = rows[0]
        else:
            params = (bytes(token_sha256), t, actor_id, t, p, actor_id)
            epoch, head, role, status, valid = self._x.execute(self._d.GET_ACCESS_TOKEN, params)[0]
            if valid is None:
                raise fail(ErrorCode.AUTHENTICATION_FAILED, "unknown or revoked token")
            if epoch is None:
                return None, None
        project = Project(t, p, epoch, head)
        if role is None:
            return project, None
        return project, Membership(t, p, actor_id, ROLES[role], STATUSES[status])

    def get_access_resource(
        self, scope: Scope, actor_id: str, token_sha256: bytes | None, ref: ResourceRef
    ) -> tuple[Project | None, Membership | None, StoredResource | None]:
        """`get_access` and `get_resource` in one statement (READS-5)."""
        t, p = scope.tenant_id, scope.project_id
        d = self._d
        if token_sha256 is None:
            rows = self._x.execute_alone(d.GET_ACCESS_RESOURCE, (actor_id, ref.kind, ref.id, t, p))
            if not rows:
                return None, None, None
            epoch, head, role, status, revision, body = rows[0]
        else:
            params = (bytes(token_sha256), t, actor_id, t, p, actor_id, ref.kind, ref.id)
            row = self._x.execute_alone(d.GET_ACCESS_RESOURCE_TOKEN, params)[0]
            epoch, head, role, status, revision, body, valid = row
            if valid is None:
                raise fail(ErrorCode.AUTHENTICATION_FAILED, "unknown or revoked token")
            if epoch is None:
                return None, None, None
        project = Project(t, p, epoch, head)
        found = None if revision is None else StoredResource(ref, revision, d.blob(body))
        if role is None:
            return project, None, found
        return project, Membership(t, p, actor_id, ROLES[role], STATUSES[status]), found

    def mailbox(self, scope: Scope, query: MailboxQuery) -> list[tuple[int, HandoffIndexRow]]:
        """A page of the inbox (`to_actor`) or outbox (`from_actor`), newest first."""
        params: list[str | int] = [scope.tenant_id, scope.project_id, query.actor_id]
        if query.source_id is not None:
            params.append(query.source_id)
        if query.before_seq is not None:
            params.append(seq_bound(query.before_seq))
        params.append(query.limit)
        key = (
            query.box == "inbox",
            query.source_id is not None,
            query.include_completed,
            query.before_seq is not None,
        )
        rows = self._x.execute(self._d.MAILBOX[key], params)
        return [(row[6], HandoffIndexRow(*row)) for row in rows]

    # -- whole-tenant reads, for export (ARC-*) -------------------------------------------

    def list_projects(self, tenant_id: str) -> list[Project]:
        """Every project of the tenant."""
        rows = self._x.execute(self._d.LIST_PROJECTS, (tenant_id,))
        return [Project(tenant_id, pid, epoch, head) for pid, epoch, head in rows]

    def list_actors(self, tenant_id: str) -> list[Actor]:
        """Every actor of the tenant."""
        rows = self._x.execute(self._d.LIST_ACTORS, (tenant_id,))
        return [Actor(tenant_id, aid, ActorKind(kind)) for aid, kind in rows]

    def list_memberships(self, tenant_id: str) -> list[Membership]:
        """Every membership of the tenant."""
        rows = self._x.execute(self._d.LIST_MEMBERSHIPS, (tenant_id,))
        return [
            Membership(tenant_id, pid, aid, ROLES[role], STATUSES[status])
            for pid, aid, role, status in rows
        ]

    def list_sessions(
        self, scope: Scope, before_seq: int | None, limit: int
    ) -> list[tuple[int, str]]:
        """Sessions newest first by their creation receipt (partial `receipts_session_idx`)."""
        before = SQL_INT_MAX if before_seq is None else seq_bound(before_seq)
        params = (scope.tenant_id, scope.project_id, before, limit)
        return [(int(seq), str(sid)) for seq, sid in self._x.execute(self._d.LIST_SESSIONS, params)]

    def list_members(self, scope: Scope) -> list[Member]:
        """Every member of the project with its actor's kind (the memberships key)."""
        rows = self._x.execute(self._d.LIST_MEMBERS, (scope.tenant_id, scope.project_id))
        return [
            Member(aid, ActorKind(kind), ROLES[role], STATUSES[status])
            for aid, kind, role, status in rows
        ]

    def list_tokens(self, tenant_id: str) -> list[TokenBinding]:
        """Every token binding of the tenant."""
        rows = self._x.execute(self._d.LIST_TOKENS, (tenant_id,))
        return [
            TokenBinding(bytes(digest), tenant_id, aid, bool(active), at)
            for digest, aid, active, at in rows
        ]

    def list_receipts(
        self, scope: Scope, after_seq: int = 0, limit: int | None = None
    ) -> list[Receipt]:
        """The receipts after `after_seq`, ascending by sequence, at most `limit`."""
        d, t, p = self._d, scope.tenant_id, scope.project_id
        rows = self._x.execute(
            d.LIST_RECEIPTS, (t, p, seq_bound(after_seq), d.no_limit if limit is None else limit)
        )
        return [
            Receipt(cid, fp, t, p, actor, seq, ResourceRef(kind, rid), rev, at)
            for cid, fp, actor, seq, kind, rid, rev, at in rows
        ]

    def staged_import_page(self, import_id: str, project_id: str, seq: int) -> bytes | None:
        """Page `seq` of a project in a staged import (ARC-9), or None."""
        d = self._d
        rows = self._x.execute(d.STAGED_IMPORT_PAGE, (import_id, project_id, seq))
        return d.blob(rows[0][0]) if rows else None


class SqlWriteRows(SqlReadRows[X], ABC):
    """The provisioning writes and `restore_history`; a store adds `_index_restored`."""

    __slots__ = ()

    def insert_tenant(self, tenant_id: str, created_at_ms: int) -> None:
        """Create a tenant row (an existing one is kept, with the new time)."""
        self._x.execute(self._d.INSERT_TENANT, (tenant_id, created_at_ms))

    def insert_project(self, project: Project, created_at_ms: int) -> None:
        """Create a project row with its epoch and head."""
        p = project
        self._x.execute(
            self._d.INSERT_PROJECT,
            (p.tenant_id, p.project_id, p.project_epoch, p.head_seq, created_at_ms),
        )

    def insert_actor(self, actor: Actor, created_at_ms: int) -> None:
        """Create an actor row."""
        a = actor
        self._x.execute(
            self._d.INSERT_ACTOR, (a.tenant_id, a.actor_id, a.kind.value, created_at_ms)
        )

    def put_membership(self, membership: Membership, updated_at_ms: int) -> None:
        """Create or replace a membership."""
        m = membership
        self._x.execute(
            self._d.PUT_MEMBERSHIP,
            (m.tenant_id, m.project_id, m.actor_id, m.role.value, m.status.value, updated_at_ms),
        )

    def insert_token(self, binding: TokenBinding) -> None:
        """Bind a token digest (exactly 32 bytes, enforced by the schema) to an actor."""
        d, b = self._d, binding
        self._x.execute(
            d.INSERT_TOKEN,
            (bytes(b.token_sha256), b.tenant_id, b.actor_id, d.flag(b.active), b.created_at_ms),
        )

    def set_token_active(self, token_sha256: bytes, active: bool) -> None:
        """Activate or revoke a token binding; an unknown digest is a no-op."""
        d = self._d
        self._x.execute(d.SET_TOKEN_ACTIVE, (d.flag(active), bytes(token_sha256)))

    def stage_import_page(
        self, import_id: str, project_id: str, seq: int, body: bytes, created_at_ms: int
    ) -> None:
        """Stage page `seq` of a project's rows for an import (ARC-9)."""
        self._x.execute(
            self._d.STAGE_IMPORT_PAGE, (import_id, project_id, seq, created_at_ms, bytes(body))
        )

    def drop_import_stage(self, import_id: str) -> None:
        """Drop every staged page of an import (nothing if it is gone)."""
        self._x.execute(self._d.DROP_IMPORT_STAGE, (import_id,))

    def drop_import_stages_before(self, cutoff_ms: int) -> None:
        """Drop every staged page of imports that began at or before `cutoff_ms`."""
        self._x.execute(self._d.DROP_IMPORT_STAGES_BEFORE, (cutoff_ms,))

    def restore_history(self, project: Project, history: History) -> None:
        """Insert an imported project's rows as they are (the project row exists); search
        rows go through the store's `_index_restored`."""
        x, d, t, p = self._x, self._d, project.tenant_id, project.project_id
        for r in history.resources:
            x.execute(d.UPSERT_RESOURCE, (t, p, r.ref.kind, r.ref.id, r.revision, r.body))
        for c in history.changes:
            x.execute(
                d.INSERT_CHANGE,
                (
                    t, p, c.seq, c.project_epoch, c.ref.kind, c.ref.id, c.op.value,
                    c.revision, c.actor_id, c.committed_at_ms, c.body,
                ),
            )  # fmt: skip
        for a in history.audit:
            x.execute(
                d.INSERT_AUDIT,
                (
                    t, p, a.project_seq, a.command_id, a.operation, a.ref.kind, a.ref.id,
                    a.actor_id, a.committed_at_ms,
                ),
            )  # fmt: skip
        for rc in history.receipts:
            x.execute(
                d.INSERT_RECEIPT,
                (
                    t, p, rc.command_id, rc.fingerprint, rc.actor_id, rc.project_seq,
                    rc.resource.kind, rc.resource.id, rc.revision, rc.committed_at_ms,
                ),
            )  # fmt: skip
        for h in history.handoffs:
            x.execute(
                d.UPSERT_HANDOFF,
                (
                    t, p, h.handoff_id, h.from_actor, h.to_actor, h.source_id, h.status,
                    h.revision, h.updated_seq,
                ),
            )  # fmt: skip
        if history.search:
            self._index_restored(t, p, history.search)

    @abstractmethod
    def _index_restored(self, tenant_id: str, project_id: str, docs: list[SearchDoc]) -> None:
        """Write imported search rows, in order, as the store's commits would index them."""
