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
from aidememo.domain.semantic_index import IndexState, NearestQuery, VectorRow
from aidememo.ports import Embedder, ReadTx

QUERY_CACHE = 1024  # query vectors kept (agents repeat their questions)


GROWTH = 1.25  # an append beyond the buffer makes room for this share more


@dataclass
class _Project:
    """One project's vectors: rows `[0, count)` of `buffer`, each row's fact id and the code
    of its source (`codes`, an int32 row per fact; `source_codes` numbers the source ids)."""

    fingerprint: str
    generation: int
    applied_seq: int
    fact_ids: list[str] = field(default_factory=list)
    source_codes: dict[str | None, int] = field(default_factory=dict)
    buffer: Any = None
    codes: Any = None
    count: int = 0


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
        self, tx: ReadTx, scope: Scope, state: IndexState, want: NearestQuery
    ) -> list[tuple[str, float]]:
        query, k, source_id = want.query, want.k, want.source_id
        project, n, code = self._refresh(tx, scope, state, source_id)
        if n == 0:
            return []
        # rows [0, n) are never written again: appends go after them, a reload makes a new
        # project (so this search reads a fixed view while the cache moves on)
        # numpy's own loop on this thread: BLAS's product would wake its thread pool on the
        # other cores, whose spinning costs more CPU than the product itself on busy cores
        scores = np.einsum("ij,j->i", project.buffer[:n], np.frombuffer(query, dtype="<f4"))
        if source_id is not None:
            scores = np.where(project.codes[:n] == code, scores, -np.inf)
        top = np.argpartition(-scores, min(k, n) - 1)[: min(k, n)] if n > k else np.arange(n)
        found = [
            (project.fact_ids[i], float(scores[i])) for i in top.tolist() if scores[i] > -np.inf
        ]
        found.sort(key=lambda pair: (-pair[1], pair[0]))
        return found

    def memory_bytes(self) -> int:
        """What the cached matrices hold (their buffers, spare rows included)."""
        with self._lock:
            return sum(
                p.buffer.nbytes + p.codes.nbytes
                for p in self._projects.values()
                if p.buffer is not None
            )

    def _refresh(
        self, tx: ReadTx, scope: Scope, state: IndexState, source_id: str | None
    ) -> tuple[_Project, int, int]:
        """The project's cache brought to `state`, the rows a search may read and the code of
        `source_id` (-1: no vector of it). A cache already past `state` (a search whose read
        view is older than another's) is used as it is: the facts it holds beyond that view
        are not in the view, so their results are dropped when the bodies are read."""
        key = (scope.tenant_id, scope.project_id)
        with self._lock:
            cached = self._projects.get(key)
            if (
                cached is None
                or cached.fingerprint != state.fingerprint
                or cached.generation != state.generation
            ):
                cached = _Project(state.fingerprint, state.generation, 0)
                self._add(cached, tx.semantic_vectors(scope, 0))
                cached.applied_seq = state.applied_seq
                self._projects[key] = cached
            elif cached.applied_seq < state.applied_seq:
                self._add(cached, tx.semantic_vectors(scope, cached.applied_seq))
                cached.applied_seq = state.applied_seq
            return cached, cached.count, cached.source_codes.get(source_id, -1)

    def _add(self, project: _Project, rows: list[VectorRow]) -> None:
        """Append `rows` in place: a full reload is sized exactly, and a buffer that is full
        grows by `GROWTH` (so an append copies the matrix only now and then, not each time
        the index moves)."""
        dims = self.fingerprint.dimensions
        rows = [r for r in rows if len(r.vector) == 4 * dims]
        if not rows:
            return
        block = np.frombuffer(b"".join(r.vector for r in rows), dtype="<f4").reshape(-1, dims)
        codes = np.array(
            [project.source_codes.setdefault(r.source_id, len(project.source_codes)) for r in rows],
            dtype=np.int32,
        )
        start, end = project.count, project.count + len(rows)
        if project.buffer is None or end > len(project.buffer):
            size = end if project.buffer is None else max(end, int(len(project.buffer) * GROWTH))
            buffer = np.empty((size, dims), dtype="<f4")
            spare = np.empty(size, dtype=np.int32)
            if project.buffer is not None:
                buffer[:start] = project.buffer[:start]
                spare[:start] = project.codes[:start]
            project.buffer, project.codes = buffer, spare
        project.buffer[start:end] = block
        project.codes[start:end] = codes
        project.count = end
        project.fact_ids.extend(r.fact_id for r in rows)
