"""The in-memory reference store: the model every other store must match.

Writes apply to plain dicts under one re-entrant lock and are recorded in an undo log, so a
callback that raises leaves no trace (STORE-1). It runs anywhere, including Pyodide, and is
the store the Pyodide tier runs the conformance suite against.
"""

from __future__ import annotations

import bisect
import heapq
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar

from aidememo.domain import ranking
from aidememo.domain.canonical import decode_stored
from aidememo.domain.errors import ErrorCode, fail
from aidememo.domain.model import (
    Actor,
    AuditRow,
    ChangeRecord,
    CommandCall,
    CommandStart,
    HandoffIndexRow,
    History,
    MailboxQuery,
    Member,
    Membership,
    Mutation,
    Project,
    RawOutcome,
    RawWrite,
    Receipt,
    ResourceRef,
    Scope,
    SearchDoc,
    SearchPage,
    StoredResource,
    TokenBinding,
)
from aidememo.ports import ReadTx, WriteTx
from aidememo.stores import raw_write
from aidememo.stores.guard import not_awaitable
from aidememo.stores.in_memory_artifacts import InMemoryArtifactTx
from aidememo.stores.in_memory_semantic import InMemorySemanticTx
from aidememo.stores.in_memory_tables import Tables

T = TypeVar("T")
R = TypeVar("R")
SCHEMA_VERSION = 1

# A posting: (fact_id, source_id, tf, dl), keyed by the fact's doc_seq under (t, p, term).


class _InMemoryTx(InMemorySemanticTx, InMemoryArtifactTx):
    """Read and write access to the tables; writes are journaled for rollback."""

    # -- ReadTx ---------------------------------------------------------------------------

    def get_project(self, scope: Scope) -> Project | None:
        return self._t.projects.get((scope.tenant_id, scope.project_id))

    def get_resource(self, scope: Scope, ref: ResourceRef) -> StoredResource | None:
        return self._t.resources.get((scope.tenant_id, scope.project_id), {}).get(
            (ref.kind, ref.id)
        )

    def get_receipt(self, scope: Scope, command_id: str) -> Receipt | None:
        return self._t.receipts.get((scope.tenant_id, scope.project_id, command_id))

    def list_changes(
        self, scope: Scope, after_seq: int, limit: int, bodies: bool = True
    ) -> list[ChangeRecord]:
        rows = self._t.changes.get((scope.tenant_id, scope.project_id), [])
        # Sequences are dense from 1, so the list index of seq s is s - 1.
        return rows[after_seq : after_seq + limit]

    def list_resources(
        self, scope: Scope, limit: int, after: ResourceRef | None = None
    ) -> list[StoredResource]:
        rows = self._t.resources.get((scope.tenant_id, scope.project_id), {})
        keys = sorted(rows)
        start = 0 if after is None else bisect.bisect_right(keys, (after.kind, after.id))
        return [rows[key] for key in keys[start : start + limit]]

    def list_resources_at(
        self, scope: Scope, at_seq: int, limit: int, after: ResourceRef | None = None
    ) -> list[StoredResource]:
        key = (scope.tenant_id, scope.project_id)
        changes = self._t.changes.get(key, [])
        # Sequences are dense from 1: the changes up to at_seq are the first at_seq entries.
        later = {(c.ref.kind, c.ref.id) for c in changes[at_seq:]}
        then: dict[tuple[str, str], StoredResource] = {}
        if later:
            for c in changes[:at_seq]:
                ref_key = (c.ref.kind, c.ref.id)
                if ref_key in later:
                    then[ref_key] = StoredResource(c.ref, c.revision, c.body)
        rows = self._t.resources.get(key, {})
        keys = sorted(rows)
        start = 0 if after is None else bisect.bisect_right(keys, (after.kind, after.id))
        out: list[StoredResource] = []
        for ref_key in keys[start:]:
            if len(out) >= limit:
                break
            if ref_key not in later:
                out.append(rows[ref_key])
            elif ref_key in then:
                out.append(then[ref_key])
        return out

    def list_session_facts(
        self, scope: Scope, session_id: str, after_seq: int, limit: int
    ) -> list[tuple[int, StoredResource]]:
        out: list[tuple[int, StoredResource]] = []
        for c in self._t.changes.get((scope.tenant_id, scope.project_id), [])[after_seq:]:
            if len(out) >= limit:
                break
            if c.ref.kind == "fact" and c.body is not None:
                fact = decode_stored(c.body)
                if isinstance(fact, dict) and fact.get("session_id") == session_id:
                    out.append((c.seq, StoredResource(c.ref, c.revision, c.body)))
        return out

    def page_token_key(self) -> bytes:
        return self._t.page_token_key

    def list_audit(
        self, scope: Scope, after_seq: int = 0, limit: int | None = None
    ) -> list[AuditRow]:
        rows = self._t.audit.get((scope.tenant_id, scope.project_id), [])
        return _page(rows, lambda a: a.project_seq, after_seq, limit)

    def get_actor(self, tenant_id: str, actor_id: str) -> Actor | None:
        return self._t.actors.get((tenant_id, actor_id))

    def get_membership(self, scope: Scope, actor_id: str) -> Membership | None:
        return self._t.memberships.get((scope.tenant_id, scope.project_id, actor_id))

    def list_sessions(
        self, scope: Scope, before_seq: int | None, limit: int
    ) -> list[tuple[int, str]]:
        rows = sorted(
            (
                (r.project_seq, r.resource.id)
                for (t, p, _), r in self._t.receipts.items()
                if (t, p) == (scope.tenant_id, scope.project_id)
                and r.resource.kind == "session"
                and (before_seq is None or r.project_seq < before_seq)
            ),
            reverse=True,
        )
        return rows[:limit]

    def list_members(self, scope: Scope) -> list[Member]:
        rows = [
            Member(m.actor_id, self._t.actors[(t, m.actor_id)].kind, m.role, m.status)
            for (t, p, _), m in self._t.memberships.items()
            if (t, p) == (scope.tenant_id, scope.project_id)
        ]
        return sorted(rows, key=lambda m: m.actor_id)

    def get_token(self, token_sha256: bytes) -> TokenBinding | None:
        return self._t.tokens.get(token_sha256)

    def tenant_exists(self, tenant_id: str) -> bool:
        return tenant_id in self._t.tenants

    def authenticate_token(self, token_sha256: bytes) -> TokenBinding | None:
        binding = self._t.tokens.get(token_sha256)
        if (
            binding is None
            or not binding.active
            or binding.tenant_id not in self._t.tenants
            or (binding.tenant_id, binding.actor_id) not in self._t.actors
        ):
            return None
        return binding

    def token_valid(self, token_sha256: bytes, tenant_id: str, actor_id: str) -> bool:
        binding = self.authenticate_token(token_sha256)
        return binding is not None and (binding.tenant_id, binding.actor_id) == (
            tenant_id,
            actor_id,
        )

    def get_access(
        self, scope: Scope, actor_id: str, token_sha256: bytes | None = None
    ) -> tuple[Project | None, Membership | None]:
        if token_sha256 is not None and not self.token_valid(
            token_sha256, scope.tenant_id, actor_id
        ):
            raise fail(ErrorCode.AUTHENTICATION_FAILED, "unknown or revoked token")
        project = self._t.projects.get((scope.tenant_id, scope.project_id))
        if project is None:
            return None, None
        return project, self._t.memberships.get((scope.tenant_id, scope.project_id, actor_id))

    def get_access_resource(
        self, scope: Scope, actor_id: str, token_sha256: bytes | None, ref: ResourceRef
    ) -> tuple[Project | None, Membership | None, StoredResource | None]:
        project, membership = self.get_access(scope, actor_id, token_sha256)
        if project is None:
            return None, None, None
        return project, membership, self.get_resource(scope, ref)

    def mailbox(self, scope: Scope, query: MailboxQuery) -> list[tuple[int, HandoffIndexRow]]:
        rows = self._t.handoffs.get((scope.tenant_id, scope.project_id), {}).values()
        inbox = query.box == "inbox"
        picked = [
            row
            for row in rows
            if (row.to_actor if inbox else row.from_actor) == query.actor_id
            and (query.source_id is None or row.source_id == query.source_id)
            and (query.include_completed or row.status != "completed")
            and (query.before_seq is None or row.updated_seq < query.before_seq)
        ]
        picked.sort(key=lambda row: row.updated_seq, reverse=True)
        return [(row.updated_seq, row) for row in picked[: query.limit]]

    def search(
        self, scope: Scope, terms: list[str], source_id: str | None, limit: int
    ) -> SearchPage:
        key = (scope.tenant_id, scope.project_id)
        postings = self._t.postings

        def stats(query: list[str]) -> tuple[int, int, dict[str, int]]:
            docs, total, _ = self._t.search_stats.get(key, (0, 0, 0))
            df = {t: len(postings.get((*key, t), ())) for t in query}
            return docs, total, {t: n for t, n in df.items() if n}

        def cutoff(term: str, rank: int) -> int:
            return heapq.nlargest(rank, postings[(*key, term)])[-1]

        def top(
            w: ranking.Weights, min_doc: int, source: str | None, n: int
        ) -> list[tuple[str, int]]:
            scores: dict[str, int] = {}
            for term, weight in w.terms:
                for seq, (fact_id, src, tf, dl) in postings.get((*key, term), {}).items():
                    if seq >= min_doc and (source is None or src == source):
                        part = ranking.part(weight, tf, w.k, w.kb, dl)
                        scores[fact_id] = scores.get(fact_id, 0) + part
            return heapq.nsmallest(n, scores.items(), key=lambda kv: (-kv[1], kv[0]))

        return ranking.search(stats, cutoff, top, terms, source_id, limit)

    def list_projects(self, tenant_id: str) -> list[Project]:
        return sorted(
            (p for (t, _), p in self._t.projects.items() if t == tenant_id),
            key=lambda p: p.project_id,
        )

    def list_actors(self, tenant_id: str) -> list[Actor]:
        return sorted(
            (a for (t, _), a in self._t.actors.items() if t == tenant_id),
            key=lambda a: a.actor_id,
        )

    def list_memberships(self, tenant_id: str) -> list[Membership]:
        rows = [m for (t, _, _), m in self._t.memberships.items() if t == tenant_id]
        return sorted(rows, key=lambda m: (m.project_id, m.actor_id))

    def list_tokens(self, tenant_id: str) -> list[TokenBinding]:
        rows = [b for b in self._t.tokens.values() if b.tenant_id == tenant_id]
        return sorted(rows, key=lambda b: b.token_sha256)

    def list_receipts(
        self, scope: Scope, after_seq: int = 0, limit: int | None = None
    ) -> list[Receipt]:
        rows = [
            r
            for (t, p, _), r in self._t.receipts.items()
            if (t, p) == (scope.tenant_id, scope.project_id)
        ]
        return _page(rows, lambda r: r.project_seq, after_seq, limit)

    def count_tenant_rows(self, tenant_id: str) -> dict[str, int]:
        t = self._t

        def scoped(table: dict[tuple[str, str], Any]) -> int:
            return sum(len(v) for (tenant, _), v in table.items() if tenant == tenant_id)

        return {
            "tenants": int(tenant_id in t.tenants),
            "projects": sum(1 for (tenant, _) in t.projects if tenant == tenant_id),
            "actors": sum(1 for (tenant, _) in t.actors if tenant == tenant_id),
            "memberships": sum(1 for (tenant, _, _) in t.memberships if tenant == tenant_id),
            "token_bindings": sum(1 for b in t.tokens.values() if b.tenant_id == tenant_id),
            "resources": scoped(t.resources),
            "receipts": sum(1 for (tenant, _, _) in t.receipts if tenant == tenant_id),
            "changes": scoped(t.changes),
            "audit": scoped(t.audit),
            "handoff_index": scoped(t.handoffs),
            "fact_search": scoped(t.search),
            "artifact_reservations": self._artifact_tenant_count(tenant_id),
            **self._semantic_tenant_counts(tenant_id),
        }

    def staged_import_page(self, import_id: str, project_id: str, seq: int) -> bytes | None:
        staged = self._t.import_staging.get((import_id, project_id, seq))
        return None if staged is None else staged[1]

    # -- WriteTx --------------------------------------------------------------------------

    def begin_command(self, call: CommandCall) -> CommandStart:
        scope, actor_id, token = call.scope, call.actor_id, call.token_sha256
        if token is not None and not self.token_valid(token, scope.tenant_id, actor_id):
            raise fail(ErrorCode.AUTHENTICATION_FAILED, "unknown or revoked token")
        return CommandStart(
            self.get_project(scope),
            self.get_membership(scope, actor_id),
            self.get_receipt(scope, call.command_id),
            self.get_resource(scope, call.resource),
        )

    def commit_mutation(self, mutation: Mutation) -> None:
        receipt = mutation.receipt
        key = (receipt.tenant_id, receipt.project_id)
        project = self._t.projects.get(key)
        if project is None or project.head_seq != receipt.project_seq - 1:
            raise fail(ErrorCode.STORAGE_FAILURE, "project head moved during the command")
        ref = receipt.resource
        self._set(
            self._child(self._t.resources, key),
            (ref.kind, ref.id),
            StoredResource(ref, receipt.revision, mutation.body),
        )
        self._append(self._t.changes, key, mutation.change())
        self._append(self._t.audit, key, mutation.audit())
        self._set(self._t.receipts, (*key, receipt.command_id), receipt)
        if mutation.handoff is not None:
            self._set(self._child(self._t.handoffs, key), ref.id, mutation.handoff)
        if mutation.search is not None:
            self._index(key, mutation.search)
        self._set(self._t.projects, key, replace(project, head_seq=receipt.project_seq))

    def insert_tenant(self, tenant_id: str, created_at_ms: int) -> None:
        self._set(self._t.tenants, tenant_id, created_at_ms)

    def insert_project(self, project: Project, created_at_ms: int) -> None:
        self._set(self._t.projects, (project.tenant_id, project.project_id), project)

    def insert_actor(self, actor: Actor, created_at_ms: int) -> None:
        self._set(self._t.actors, (actor.tenant_id, actor.actor_id), actor)

    def put_membership(self, membership: Membership, updated_at_ms: int) -> None:
        key = (membership.tenant_id, membership.project_id, membership.actor_id)
        self._set(self._t.memberships, key, membership)

    def insert_token(self, binding: TokenBinding) -> None:
        self._set(self._t.tokens, binding.token_sha256, binding)

    def set_token_active(self, token_sha256: bytes, active: bool) -> None:
        binding = self._t.tokens.get(token_sha256)
        if binding is not None:
            self._set(self._t.tokens, token_sha256, replace(binding, active=active))

    def restore_history(self, project: Project, history: History) -> None:
        key = (project.tenant_id, project.project_id)
        resources = self._child(self._t.resources, key)
        for row in history.resources:
            self._set(resources, (row.ref.kind, row.ref.id), row)
        for change in history.changes:
            self._append(self._t.changes, key, change)
        for audit in history.audit:
            self._append(self._t.audit, key, audit)
        for receipt in history.receipts:
            self._set(self._t.receipts, (*key, receipt.command_id), receipt)
        handoffs = self._child(self._t.handoffs, key)
        for handoff in history.handoffs:
            self._set(handoffs, handoff.handoff_id, handoff)
        for doc in history.search:
            self._index(key, doc)

    def _index(self, key: tuple[str, str], doc: SearchDoc) -> None:
        """Replace a fact's index entry: its postings, its doc_seq (the project's next) and
        the project's statistics, as every store's indexing does (SRCH-4)."""
        t = self._t
        docs = self._child(t.search, key)
        n_docs, n_terms, last = t.search_stats.get(key, (0, 0, 0))
        old = docs.get(doc.fact_id)
        if old is not None:
            old_seq, old_doc = old
            old_words = old_doc.terms.split()
            for term in set(old_words):
                if ranking.indexable(term):
                    self._pop(t.postings[(*key, term)], old_seq)
            n_docs, n_terms = n_docs - 1, n_terms - len(old_words)
        words = doc.terms.split()
        last += 1
        for term, tf in Counter(words).items():
            if ranking.indexable(term):
                posting = (doc.fact_id, doc.source_id, tf, len(words))
                self._set(self._child(t.postings, (*key, term)), last, posting)
        self._set(docs, doc.fact_id, (last, doc))
        self._set(t.search_stats, key, (n_docs + 1, n_terms + len(words), last))

    def stage_import_page(
        self, import_id: str, project_id: str, seq: int, body: bytes, created_at_ms: int
    ) -> None:
        key = (import_id, project_id, seq)
        if key in self._t.import_staging:
            raise fail(ErrorCode.STORAGE_FAILURE, "a staged import page is written twice")
        self._set(self._t.import_staging, key, (created_at_ms, bytes(body)))

    def drop_import_stage(self, import_id: str) -> None:
        staging = self._t.import_staging
        for key in [k for k in staging if k[0] == import_id]:
            self._pop(staging, key)

    def drop_import_stages_before(self, cutoff_ms: int) -> None:
        staging = self._t.import_staging
        for key in [k for k, (at, _) in staging.items() if at <= cutoff_ms]:
            self._pop(staging, key)

    def delete_tenant(self, tenant_id: str) -> None:
        t = self._t
        tables: list[dict[Any, Any]] = [
            t.projects,
            t.actors,
            t.memberships,
            t.receipts,
            t.resources,
            t.changes,
            t.audit,
            t.handoffs,
            t.search,
            t.postings,
            t.search_stats,
        ]
        for table in tables:
            for key in [k for k in table if k[0] == tenant_id]:
                self._pop(table, key)
        for digest in [d for d, b in t.tokens.items() if b.tenant_id == tenant_id]:
            self._pop(t.tokens, digest)
        self._artifact_tenant_delete(tenant_id)
        self._semantic_tenant_delete(tenant_id)
        if tenant_id in t.tenants:
            self._pop(t.tenants, tenant_id)


class InMemoryStore:
    """The reference implementation of `aidememo.ports.Store`."""

    capabilities: frozenset[str] = frozenset()
    mode = "single_node"

    def __init__(self) -> None:
        self._tables = Tables()
        self._lock = threading.RLock()

    def transaction(self, fn: Callable[[WriteTx], T]) -> T:
        """Run `fn` with write access; undo every write if it raises (STORE-1)."""
        with self._lock:
            tx = _InMemoryTx(self._tables, writable=True)
            try:
                result = not_awaitable(fn(tx))
            except BaseException:
                for undo in reversed(tx.undo):
                    undo()
                raise
            return result

    def execute_raw(self, write: RawWrite) -> RawOutcome:
        """`Store.execute_raw`: the guarded write in a transaction of this store's."""
        return raw_write.execute_raw(self, write)

    def read(self, fn: Callable[[ReadTx], T]) -> T:
        """Run `fn` against the current state, with no writer in between."""
        with self._lock:
            return not_awaitable(fn(_InMemoryTx(self._tables, writable=False)))

    def schema_version(self) -> int:
        """The reference store has no persisted schema; it reports the code's version."""
        return SCHEMA_VERSION

    def after_commit(self, fn: Callable[[], None]) -> None:
        """`Store.after_commit`: a commit of this store is done when it returns, so now."""
        fn()

    def close(self) -> None:
        """Nothing to release."""


def _conforms(tables: Tables) -> tuple[ReadTx, WriteTx]:
    """Never called: lets mypy check that the transaction view implements both ports."""
    return _InMemoryTx(tables, writable=False), _InMemoryTx(tables, writable=True)


def _page(rows: list[R], seq: Callable[[R], int], after_seq: int, limit: int | None) -> list[R]:
    """The rows with `seq(row) > after_seq`, ascending by it, at most `limit`."""
    picked = sorted((r for r in rows if seq(r) > after_seq), key=seq)
    return picked if limit is None else picked[:limit]
