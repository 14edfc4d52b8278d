"""Whole-tenant reads and writes for export, import and tenant deletion (SPEC.md ARC-*).

Kept apart from the hot path, like the SQLite store's: these run rarely and touch every table.
Tenant deletion is one `DELETE FROM tenants`: every table hangs off the tenant through
`ON DELETE CASCADE` foreign keys (schema.py), and the counts afterwards prove it.
Imported search rows go through `aidememo_index_fact`, the same function a command uses, so
the project's BM25 statistics stay exact.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aidememo.domain.model import (
    Actor,
    ActorKind,
    History,
    Membership,
    MemberStatus,
    Project,
    Receipt,
    ResourceRef,
    Role,
    Scope,
    TokenBinding,
)
from aidememo.stores.postgres import sql as q

if TYPE_CHECKING:
    from aidememo.stores.postgres.tx import Session

LIST_PROJECTS = (
    "SELECT project_id, project_epoch, head_seq FROM projects WHERE tenant_id = %s "
    "ORDER BY project_id"
)
LIST_ACTORS = "SELECT actor_id, kind FROM actors WHERE tenant_id = %s ORDER BY actor_id"
LIST_MEMBERSHIPS = (
    "SELECT project_id, actor_id, role, status FROM memberships WHERE tenant_id = %s "
    "ORDER BY project_id, actor_id"
)
LIST_TOKENS = (
    "SELECT token_sha256, actor_id, active, created_at_ms FROM token_bindings "
    "WHERE tenant_id = %s ORDER BY token_sha256"
)
LIST_RECEIPTS = (
    "SELECT command_id, fingerprint, actor_id, project_seq, kind, resource_id, revision, "
    "committed_at_ms FROM receipts WHERE tenant_id = %s AND project_id = %s "
    "AND project_seq > %s ORDER BY project_seq LIMIT %s"
)

TENANT_TABLES = (
    "fact_search",
    "handoff_index",
    "audit",
    "changes",
    "receipts",
    "resources",
    "memberships",
    "token_bindings",
    "projects",
    "actors",
    "tenants",
)
# One statement, one round trip: a count per table.
COUNT_TENANT_ROWS = "SELECT " + ", ".join(
    f"(SELECT count(*) FROM {table} WHERE tenant_id = %s)" for table in TENANT_TABLES
)
DELETE_TENANT = "DELETE FROM tenants WHERE tenant_id = %s"


class ArchiveReads:
    """The ReadTx methods of ARC-*; expects `self._s` to be the transaction's session."""

    __slots__ = ()
    _s: Session

    def list_projects(self, tenant_id: str) -> list[Project]:
        """Every project of the tenant."""
        rows = self._s.run(LIST_PROJECTS, (tenant_id,))
        return [Project(tenant_id, pid, epoch, head) for pid, epoch, head in rows]

    def list_actors(self, tenant_id: str) -> list[Actor]:
        """Every actor of the tenant."""
        rows = self._s.run(LIST_ACTORS, (tenant_id,))
        return [Actor(tenant_id, aid, ActorKind(kind)) for aid, kind in rows]

    def list_memberships(self, tenant_id: str) -> list[Membership]:
        """Every membership of the tenant."""
        rows = self._s.run(LIST_MEMBERSHIPS, (tenant_id,))
        return [
            Membership(tenant_id, pid, aid, Role(role), MemberStatus(status))
            for pid, aid, role, status in rows
        ]

    def list_tokens(self, tenant_id: str) -> list[TokenBinding]:
        """Every token binding of the tenant."""
        rows = self._s.run(LIST_TOKENS, (tenant_id,))
        return [
            TokenBinding(bytes(digest), tenant_id, aid, bool(active), at)
            for digest, aid, active, at in rows
        ]

    def list_receipts(
        self, scope: Scope, after_seq: int = 0, limit: int | None = None
    ) -> list[Receipt]:
        """The receipts after `after_seq`, ascending by sequence, at most `limit` (LIMIT NULL
        is no limit)."""
        t, p = scope.tenant_id, scope.project_id
        rows = self._s.run(LIST_RECEIPTS, (t, p, after_seq, limit))
        return [
            Receipt(cid, fp, t, p, actor, seq, ResourceRef(kind, rid), rev, at)
            for cid, fp, actor, seq, kind, rid, rev, at in rows
        ]

    def count_tenant_rows(self, tenant_id: str) -> dict[str, int]:
        """Row counts of every table the tenant owns."""
        row = self._s.run(COUNT_TENANT_ROWS, (tenant_id,) * len(TENANT_TABLES))[0]
        return {table: int(n) for table, n in zip(TENANT_TABLES, row, strict=True)}


class ArchiveWrites:
    """The WriteTx methods of ARC-*."""

    __slots__ = ()
    _s: Session

    def restore_history(self, project: Project, history: History) -> None:
        """Insert an imported project's rows as they are (the project row exists)."""
        s, t, p = self._s, project.tenant_id, project.project_id
        for r in history.resources:
            s.run(q.UPSERT_RESOURCE, (t, p, r.ref.kind, r.ref.id, r.revision, r.body))
        for c in history.changes:
            s.run(
                q.INSERT_CHANGE,
                (
                    t, p, c.seq, c.project_epoch, c.ref.kind, c.ref.id, c.op.value,
                    c.revision, c.actor_id, c.committed_at_ms, c.body,
                ),
            )  # fmt: skip
        for a in history.audit:
            s.run(
                q.INSERT_AUDIT,
                (
                    t, p, a.project_seq, a.command_id, a.operation, a.ref.kind, a.ref.id,
                    a.actor_id, a.committed_at_ms,
                ),
            )  # fmt: skip
        for rc in history.receipts:
            s.run(
                q.INSERT_RECEIPT,
                (
                    t, p, rc.command_id, rc.fingerprint, rc.actor_id, rc.project_seq,
                    rc.resource.kind, rc.resource.id, rc.revision, rc.committed_at_ms,
                ),
            )  # fmt: skip
        for h in history.handoffs:
            s.run(
                q.UPSERT_HANDOFF,
                (
                    t, p, h.handoff_id, h.from_actor, h.to_actor, h.source_id, h.status,
                    h.revision, h.updated_seq,
                ),
            )  # fmt: skip
        for doc in history.search:
            s.run(q.INDEX_FACT, (t, p, doc.fact_id, doc.source_id, doc.terms))

    def delete_tenant(self, tenant_id: str) -> None:
        """Delete the tenant; its projects, actors and everything below them cascade."""
        self._s.run(DELETE_TENANT, (tenant_id,))
