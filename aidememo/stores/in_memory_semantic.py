"""The reference store's semantic index rows (SPEC.md SEM-6): what
`aidememo.stores.sql_common.semantic_rows` keeps in SQL, in two dicts, written through the
transaction's undo log."""

from __future__ import annotations

from dataclasses import replace

from aidememo.domain.model import Project, Scope
from aidememo.domain.semantic_index import IndexState, IndexStep, PendingProject, VectorRow
from aidememo.stores.in_memory_tables import JournaledView, SemanticTables


class InMemorySemanticTx(JournaledView):
    """The semantic index methods of `ReadTx`/`WriteTx` on the reference store."""

    @property
    def _semantic(self) -> SemanticTables:
        return self._t.semantic

    def _projects(self) -> dict[tuple[str, str], Project]:
        return self._t.projects

    def semantic_state(self, scope: Scope) -> IndexState | None:
        return self._semantic.state.get((scope.tenant_id, scope.project_id))

    def semantic_head(self, scope: Scope) -> tuple[int, IndexState | None] | None:
        project = self._projects().get((scope.tenant_id, scope.project_id))
        if project is None:
            return None
        state = self.semantic_state(scope)
        if state is None or state.project_epoch != project.project_epoch:
            return project.head_seq, None
        return project.head_seq, state

    def semantic_pending(self, fingerprint: str, limit: int) -> list[PendingProject]:
        out: list[PendingProject] = []
        for key in sorted(self._projects()):
            project = self._projects()[key]
            state = self._semantic.state.get(key)
            if (
                state is None
                or state.fingerprint != fingerprint
                or state.project_epoch != project.project_epoch
                or state.applied_seq < project.head_seq
            ):
                out.append(
                    PendingProject(Scope(*key), project.project_epoch, project.head_seq, state)
                )
        return out[:limit]

    def semantic_vectors(self, scope: Scope, after_seq: int) -> list[VectorRow]:
        t, p = scope.tenant_id, scope.project_id
        rows = [
            replace(r, replaces=False)
            for (rt, rp, _), r in self._semantic.vectors.items()
            if (rt, rp) == (t, p) and r.seq > after_seq
        ]
        return sorted(rows, key=lambda r: (r.seq, r.fact_id))

    def semantic_reset(self, scope: Scope, fingerprint: str, project_epoch: str) -> None:
        t, p = scope.tenant_id, scope.project_id
        for key in [k for k in self._semantic.vectors if k[:2] == (t, p)]:
            self._pop(self._semantic.vectors, key)
        old = self._semantic.state.get((t, p))
        generation = 1 if old is None else old.generation + 1
        fresh = IndexState(fingerprint, project_epoch, 0, generation)
        self._set(self._semantic.state, (t, p), fresh)

    def semantic_apply(self, scope: Scope, step: IndexStep) -> bool:
        t, p = scope.tenant_id, scope.project_id
        state = self._semantic.state.get((t, p))
        if (
            state is None
            or state.fingerprint != step.fingerprint
            or state.applied_seq != step.from_seq
        ):
            return False
        generation = state.generation + step.generation_bump
        moved = replace(state, applied_seq=step.to_seq, generation=generation)
        self._set(self._semantic.state, (t, p), moved)
        for r in step.upserts:
            self._set(self._semantic.vectors, (t, p, r.fact_id), replace(r, replaces=False))
        for fact_id in step.deletes:
            if (t, p, fact_id) in self._semantic.vectors:
                self._pop(self._semantic.vectors, (t, p, fact_id))
        return True

    def _semantic_tenant_counts(self, tenant_id: str) -> dict[str, int]:
        return {
            "semantic_state": sum(1 for k in self._semantic.state if k[0] == tenant_id),
            "semantic_vectors": sum(1 for k in self._semantic.vectors if k[0] == tenant_id),
        }

    def _semantic_tenant_delete(self, tenant_id: str) -> None:
        for table in (self._semantic.state, self._semantic.vectors):
            for key in [k for k in table if k[0] == tenant_id]:
                self._pop(table, key)
