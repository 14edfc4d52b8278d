"""Whole-tenant reads and writes for export, import and tenant deletion (SPEC.md ARC-*).

Kept apart from the hot-path store code: these run rarely, touch every table, and read the
tenant's rows in bulk. Mixed into the store's transaction classes.
"""

from __future__ import annotations

from typing import Any

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
from aidememo.stores.sqlite import sql as q
from aidememo.stores.sqlite.executor import SqlExecutor

LIST_PROJECTS = (
    "SELECT project_id, project_epoch, head_seq FROM projects WHERE tenant_id = ? "
    "ORDER BY project_id"
)
LIST_ACTORS = "SELECT actor_id, kind FROM actors WHERE tenant_id = ? ORDER BY actor_id"
LIST_MEMBERSHIPS = (
    "SELECT project_id, actor_id, role, status FROM memberships WHERE tenant_id = ? "
    "ORDER BY project_id, actor_id"
)
LIST_TOKENS = (
    "SELECT token_sha256, actor_id, active, created_at_ms FROM token_bindings "
    "WHERE tenant_id = ? ORDER BY token_sha256"
)
LIST_RECEIPTS = (
    "SELECT command_id, fingerprint, actor_id, project_seq, kind, resource_id, revision, "
    "committed_at_ms FROM receipts WHERE tenant_id = ? AND project_id = ? AND project_seq > ? "
    "ORDER BY project_seq LIMIT ?"
)

# Child tables first, so foreign keys hold at every step of a deletion.
TENANT_TABLES = (
    "fact_search_keys",
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
COUNT = {table: f"SELECT count(*) FROM {table} WHERE tenant_id = ?" for table in TENANT_TABLES}
DELETE = {table: f"DELETE FROM {table} WHERE tenant_id = ?" for table in TENANT_TABLES}
# FTS5 UNINDEXED columns cannot be filtered through an index; its rows go by their key rows.
COUNT_SEARCH = "SELECT count(*) FROM fact_search WHERE tenant_id = ?"
DELETE_SEARCH = (
    "DELETE FROM fact_search WHERE rowid IN "
    "(SELECT doc_rowid FROM fact_search_keys WHERE tenant_id = ?)"
)


class ArchiveReads:
    """The ReadTx methods of ARC-*; expects `self._x` to be the executor."""

    __slots__ = ()
    _x: SqlExecutor

    def list_projects(self, tenant_id: str) -> list[Project]:
        """Every project of the tenant."""
        rows: list[Any] = self._x.execute(LIST_PROJECTS, (tenant_id,))
        return [Project(tenant_id, pid, epoch, head) for pid, epoch, head in rows]

    def list_actors(self, tenant_id: str) -> list[Actor]:
        """Every actor of the tenant."""
        rows: list[Any] = self._x.execute(LIST_ACTORS, (tenant_id,))
        return [Actor(tenant_id, aid, ActorKind(kind)) for aid, kind in rows]

    def list_memberships(self, tenant_id: str) -> list[Membership]:
        """Every membership of the tenant."""
        rows: list[Any] = self._x.execute(LIST_MEMBERSHIPS, (tenant_id,))
        return [
            Membership(tenant_id, pid, aid, Role(role), MemberStatus(status))
            for pid, aid, role, status in rows
        ]

    def list_tokens(self, tenant_id: str) -> list[TokenBinding]:
        """Every token binding of the tenant."""
        rows: list[Any] = self._x.execute(LIST_TOKENS, (tenant_id,))
        return [
            TokenBinding(bytes(digest), tenant_id, aid, bool(active), at)
            for digest, aid, active, at in rows
        ]

    def list_receipts(
        self, scope: Scope, after_seq: int = 0, limit: int | None = None
    ) -> list[Receipt]:
        """The receipts after `after_seq`, ascending by sequence, at most `limit` (a negative
        LIMIT is none in SQLite)."""
        t, p = scope.tenant_id, scope.project_id
        rows: list[Any] = self._x.execute(
            LIST_RECEIPTS, (t, p, after_seq, -1 if limit is None else limit)
        )
        return [
            Receipt(cid, fp, t, p, actor, seq, ResourceRef(kind, rid), rev, at)
            for cid, fp, actor, seq, kind, rid, rev, at in rows
        ]

    def _count(self, sql: str, tenant_id: str) -> int:
        rows: list[Any] = self._x.execute(sql, (tenant_id,))
        return int(rows[0][0])

    def count_tenant_rows(self, tenant_id: str) -> dict[str, int]:
        """Row counts of every table the tenant owns."""
        counts = {table: self._count(COUNT[table], tenant_id) for table in TENANT_TABLES}
        counts["fact_search"] = self._count(COUNT_SEARCH, tenant_id)
        return counts


class ArchiveWrites:
    """The WriteTx methods of ARC-*."""

    __slots__ = ()
    _x: SqlExecutor

    def restore_history(self, project: Project, history: History) -> None:
        """Insert an imported project's rows as they are."""
        x, t, p = self._x, project.tenant_id, project.project_id
        for row in history.resources:
            x.execute(q.UPSERT_RESOURCE, (t, p, row.ref.kind, row.ref.id, row.revision, row.body))
        for c in history.changes:
            x.execute(
                q.INSERT_CHANGE,
                (
                    t,
                    p,
                    c.seq,
                    c.project_epoch,
                    c.ref.kind,
                    c.ref.id,
                    c.op.value,
                    c.revision,
                    c.actor_id,
                    c.committed_at_ms,
                    c.body,
                ),
            )
        for a in history.audit:
            x.execute(
                q.INSERT_AUDIT,
                (
                    t,
                    p,
                    a.project_seq,
                    a.command_id,
                    a.operation,
                    a.ref.kind,
                    a.ref.id,
                    a.actor_id,
                    a.committed_at_ms,
                ),
            )
        for r in history.receipts:
            x.execute(
                q.INSERT_RECEIPT,
                (
                    t,
                    p,
                    r.command_id,
                    r.fingerprint,
                    r.actor_id,
                    r.project_seq,
                    r.resource.kind,
                    r.resource.id,
                    r.revision,
                    r.committed_at_ms,
                ),
            )
        for h in history.handoffs:
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
        for doc in history.search:
            rowid = x.execute(q.SEARCH_KEY, (t, p, doc.fact_id))[0][0]
            x.execute(q.SEARCH_INSERT, (rowid, doc.terms, t, p, doc.fact_id, doc.source_id))

    def delete_tenant(self, tenant_id: str) -> None:
        """Delete every row of the tenant, children first."""
        self._x.execute(DELETE_SEARCH, (tenant_id,))
        for table in TENANT_TABLES:
            self._x.execute(DELETE[table], (tenant_id,))
