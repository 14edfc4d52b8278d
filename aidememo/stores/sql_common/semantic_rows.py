"""The derived semantic index's rows on both SQL stores (SPEC.md SEM-6): per project the
fingerprint it is pinned to, the project epoch and sequence it has applied and a generation
that moves whenever a vector is replaced or removed; per fact its vector.

The statements are written with `?` and rendered for the dialect once. The tables are made by
the canonical migrations (SQLite version 8, PostgreSQL version 11) and are tenant data: tenant
deletion removes them and `count_tenant_rows` counts them (ARC-4). Mixed into a store's
transaction classes, which give `_x` (the executor) and `_d` (the dialect).
"""

from __future__ import annotations

from typing import Any, ClassVar

from aidememo.domain.model import Scope
from aidememo.domain.semantic_index import IndexState, IndexStep, PendingProject, VectorRow
from aidememo.stores.sql_common.dialect import Dialect

STATE_TABLE = "semantic_state"
VECTOR_TABLE = "semantic_vectors"
SEMANTIC_TABLES = (VECTOR_TABLE, STATE_TABLE)

_STATE = (
    "SELECT fingerprint, project_epoch, applied_seq, generation FROM semantic_state "
    "WHERE tenant_id = ? AND project_id = ?"
)
# Every project whose index is missing, pinned to another model or epoch, or behind its head.
_PENDING = (
    "SELECT p.tenant_id, p.project_id, p.project_epoch, p.head_seq, s.fingerprint, "
    "s.project_epoch, s.applied_seq, s.generation FROM projects AS p "
    "LEFT JOIN semantic_state AS s ON s.tenant_id = p.tenant_id AND s.project_id = p.project_id "
    "WHERE s.tenant_id IS NULL OR s.fingerprint <> ? OR s.project_epoch <> p.project_epoch "
    "OR s.applied_seq < p.head_seq ORDER BY p.tenant_id, p.project_id LIMIT ?"
)
_HEADS = (
    "SELECT p.head_seq, s.applied_seq, s.fingerprint, s.project_epoch, p.project_epoch "
    "FROM projects AS p LEFT JOIN semantic_state AS s "
    "ON s.tenant_id = p.tenant_id AND s.project_id = p.project_id "
    "WHERE p.tenant_id = ? AND p.project_id = ?"
)
_DROP_VECTORS = "DELETE FROM semantic_vectors WHERE tenant_id = ? AND project_id = ?"
_RESET_STATE = (
    "INSERT INTO semantic_state (tenant_id, project_id, fingerprint, project_epoch, "
    "applied_seq, generation) VALUES (?, ?, ?, ?, 0, 1) ON CONFLICT (tenant_id, project_id) "
    "DO UPDATE SET fingerprint = excluded.fingerprint, project_epoch = excluded.project_epoch, "
    "applied_seq = 0, generation = semantic_state.generation + 1"
)
# Compare-and-swap: only the writer that read `applied_seq` moves it (two indexers race safely).
_ADVANCE = (
    "UPDATE semantic_state SET applied_seq = ?, generation = generation + ? "
    "WHERE tenant_id = ? AND project_id = ? AND fingerprint = ? AND applied_seq = ? "
    "RETURNING applied_seq"
)
_UPSERT_VECTOR = (
    "INSERT INTO semantic_vectors (tenant_id, project_id, fact_id, seq, source_id, vector) "
    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (tenant_id, project_id, fact_id) DO UPDATE SET "
    "seq = excluded.seq, source_id = excluded.source_id, vector = excluded.vector"
)
_DELETE_VECTOR = (
    "DELETE FROM semantic_vectors WHERE tenant_id = ? AND project_id = ? AND fact_id = ?"
)
_VECTORS_AFTER = (
    "SELECT seq, fact_id, source_id, vector FROM semantic_vectors "
    "WHERE tenant_id = ? AND project_id = ? AND seq > ? ORDER BY seq, fact_id"
)

_RENDERED: dict[tuple[str, str], str] = {}


def _sql(d: Dialect, template: str) -> str:
    key = (d.name, template)
    text = _RENDERED.get(key)
    if text is None:
        text = _RENDERED[key] = template.replace("?", "%s" if d.name == "postgres" else "?")
    return text


class SemanticRows:
    """The semantic index's reads and writes (`aidememo.ports.ReadTx`/`WriteTx`)."""

    __slots__ = ()
    _x: Any
    _d: ClassVar[Dialect]

    def semantic_state(self, scope: Scope) -> IndexState | None:
        """The project's index state, or None before its first build."""
        rows = self._x.execute(_sql(self._d, _STATE), (scope.tenant_id, scope.project_id))
        if not rows:
            return None
        fingerprint, epoch, applied, generation = rows[0]
        return IndexState(str(fingerprint), str(epoch), int(applied), int(generation))

    def semantic_head(self, scope: Scope) -> tuple[int, IndexState | None] | None:
        """The project's head and its index state (None when not built, or built for
        another epoch); None when there is no such project."""
        rows = self._x.execute(_sql(self._d, _HEADS), (scope.tenant_id, scope.project_id))
        if not rows:
            return None
        head, applied, fingerprint, epoch, project_epoch = rows[0]
        if applied is None or epoch != project_epoch:
            return int(head), None
        return int(head), IndexState(str(fingerprint), str(epoch), int(applied), 0)

    def semantic_pending(self, fingerprint: str, limit: int) -> list[PendingProject]:
        """Up to `limit` projects whose index needs work for `fingerprint`."""
        rows = self._x.execute(_sql(self._d, _PENDING), (fingerprint, limit))
        out: list[PendingProject] = []
        for t, p, epoch, head, fp, s_epoch, applied, generation in rows:
            state = (
                None
                if fp is None
                else IndexState(str(fp), str(s_epoch), int(applied), int(generation))
            )
            out.append(PendingProject(Scope(str(t), str(p)), str(epoch), int(head), state))
        return out

    def semantic_vectors(self, scope: Scope, after_seq: int) -> list[VectorRow]:
        """The project's vectors committed after `after_seq`, in sequence order."""
        rows = self._x.execute(
            _sql(self._d, _VECTORS_AFTER), (scope.tenant_id, scope.project_id, after_seq)
        )
        blob = self._d.blob
        return [
            VectorRow(str(fid), int(seq), None if src is None else str(src), blob(vec) or b"")
            for seq, fid, src, vec in rows
        ]

    def semantic_reset(self, scope: Scope, fingerprint: str, project_epoch: str) -> None:
        """Drop the project's vectors and pin its index to `fingerprint` at sequence 0."""
        t, p = scope.tenant_id, scope.project_id
        self._x.execute(_sql(self._d, _DROP_VECTORS), (t, p))
        self._x.execute(_sql(self._d, _RESET_STATE), (t, p, fingerprint, project_epoch))

    def semantic_apply(self, scope: Scope, step: IndexStep) -> bool:
        """Move the index by `step`; False (nothing written) when its state is no longer
        `step.from_seq` under `step.fingerprint`."""
        t, p = scope.tenant_id, scope.project_id
        moved = self._x.execute(
            _sql(self._d, _ADVANCE),
            (step.to_seq, step.generation_bump, t, p, step.fingerprint, step.from_seq),
        )
        if not moved:
            return False
        for r in step.upserts:
            self._x.execute(
                _sql(self._d, _UPSERT_VECTOR), (t, p, r.fact_id, r.seq, r.source_id, r.vector)
            )
        for fact_id in step.deletes:
            self._x.execute(_sql(self._d, _DELETE_VECTOR), (t, p, fact_id))
        return True
