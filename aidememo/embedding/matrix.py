"""Query-time semantic search (`aidememo.ports.VectorSearch`, SPEC.md SEM-4): each project's
vectors as one float32 matrix in memory, scored with a matrix-vector product.

The matrix is a cache of the derived index tables, which every origin shares: it is keyed by
the project's index state, extended with the rows made after the sequence it holds when only
the sequence moved, and reloaded whole when the fingerprint or the generation changed (a
vector replaced or removed, a rebuild). 384 float32 values are 1.5 KiB per fact.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from aidememo.domain.model import Scope
from aidememo.domain.semantic_index import IndexState, VectorRow
from aidememo.ports import Embedder, ReadTx

QUERY_CACHE = 1024  # query vectors kept (agents repeat their questions)


@dataclass
class _Project:
    fingerprint: str
    generation: int
    applied_seq: int
    fact_ids: list[str] = field(default_factory=list)
    sources: list[str | None] = field(default_factory=list)
    matrix: Any = None


class MatrixSearch:
    """`VectorSearch` over an embedder; thread-safe."""

    def __init__(self, embedder: Embedder, cached_queries: int = QUERY_CACHE) -> None:
        """`embedder` should be the searches' own (an indexer's batch on a shared one would
        make a query wait for it); the last `cached_queries` query vectors are kept."""
        self.embedder = embedder
        self.fingerprint = embedder.fingerprint
        self._projects: dict[tuple[str, str], _Project] = {}
        self._lock = threading.Lock()
        self._queries: OrderedDict[str, bytes] = OrderedDict()
        self._cached_queries = cached_queries

    def embed_query(self, text: str) -> bytes:
        with self._lock:
            found = self._queries.get(text)
            if found is not None:
                self._queries.move_to_end(text)
                return found
        vector = self.embedder.embed([text])[0]
        with self._lock:
            self._queries[text] = vector
            if len(self._queries) > self._cached_queries:
                self._queries.popitem(last=False)
        return vector

    def nearest(
        self,
        tx: ReadTx,
        scope: Scope,
        state: IndexState,
        query: bytes,
        k: int,
        source_id: str | None,
    ) -> list[tuple[str, float]]:
        project = self._refresh(tx, scope, state)
        if project.matrix is None or not project.fact_ids:
            return []
        scores = project.matrix @ np.frombuffer(query, dtype="<f4")
        if source_id is not None:
            keep = np.array([s == source_id for s in project.sources], dtype=bool)
            scores = np.where(keep, scores, -np.inf)
        n = len(project.fact_ids)
        top = np.argpartition(-scores, min(k, n) - 1)[: min(k, n)] if n > k else np.arange(n)
        found = [
            (project.fact_ids[i], float(scores[i])) for i in top.tolist() if scores[i] > -np.inf
        ]
        found.sort(key=lambda pair: (-pair[1], pair[0]))
        return found

    def memory_bytes(self) -> int:
        """What the cached matrices hold."""
        with self._lock:
            return sum(p.matrix.nbytes for p in self._projects.values() if p.matrix is not None)

    def _refresh(self, tx: ReadTx, scope: Scope, state: IndexState) -> _Project:
        key = (scope.tenant_id, scope.project_id)
        with self._lock:
            cached = self._projects.get(key)
            if (
                cached is None
                or cached.fingerprint != state.fingerprint
                or cached.generation != state.generation
                or cached.applied_seq > state.applied_seq
            ):
                cached = _Project(state.fingerprint, state.generation, 0)
                self._add(cached, tx.semantic_vectors(scope, 0))
                cached.applied_seq = state.applied_seq
                self._projects[key] = cached
            elif cached.applied_seq < state.applied_seq:
                self._add(cached, tx.semantic_vectors(scope, cached.applied_seq))
                cached.applied_seq = state.applied_seq
            return cached

    def _add(self, project: _Project, rows: list[VectorRow]) -> None:
        dims = self.fingerprint.dimensions
        rows = [r for r in rows if len(r.vector) == 4 * dims]
        if not rows:
            return
        block = np.frombuffer(b"".join(r.vector for r in rows), dtype="<f4").reshape(-1, dims)
        project.fact_ids.extend(r.fact_id for r in rows)
        project.sources.extend(r.source_id for r in rows)
        project.matrix = block if project.matrix is None else np.vstack([project.matrix, block])
