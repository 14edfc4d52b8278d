"""The derived semantic index's records (SPEC.md SEM-6), shared by every store."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from aidememo.domain.model import Scope


@dataclass(frozen=True, slots=True)
class IndexState:
    """A project's index: the fingerprint it is pinned to, the project epoch and sequence it
    has applied, and its generation (moves when a vector is replaced, removed or reset, so a
    reader's cache knows an append-only refresh is not enough)."""

    fingerprint: str
    project_epoch: str
    applied_seq: int
    generation: int


def index_wait_over(
    found: tuple[int, IndexState | None] | None, at_least_seq: int, fingerprint: str
) -> bool:
    """Whether SEM-5's wait for `at_least_seq` ends at this read of a project's head and index
    state (`ReadTx.semantic_head`): the project is gone, `at_least_seq` is beyond the head
    (no wait reaches it), or the index under `fingerprint` has applied it."""
    if found is None:
        return True
    head, state = found
    if at_least_seq > head:
        return True
    return (
        state is not None and state.fingerprint == fingerprint and state.applied_seq >= at_least_seq
    )


@dataclass(frozen=True, slots=True)
class PendingProject:
    """A project whose index needs work: its epoch, head and current index state."""

    scope: Scope
    project_epoch: str
    head_seq: int
    state: IndexState | None


@dataclass(frozen=True, slots=True)
class VectorRow:
    """One fact's vector (packed, `aidememo.domain.semantic.pack`), the sequence of the change
    that made it and the fact's source id (search filters on it). `replaces` is set by the
    indexer when the fact had a vector already."""

    fact_id: str
    seq: int
    source_id: str | None
    vector: bytes
    replaces: bool = False


@dataclass(frozen=True, slots=True)
class IndexStep:
    """One move of a project's index from `from_seq` to `to_seq` under `fingerprint`: the
    vectors to write and the facts whose vectors go. A store applies it only while the index
    is still at `from_seq` under `fingerprint` (another indexer may have moved it)."""

    fingerprint: str
    from_seq: int
    to_seq: int
    upserts: Sequence[VectorRow] = ()
    deletes: Sequence[str] = ()

    @property
    def generation_bump(self) -> int:
        """1 when the step replaces or removes a vector a reader may hold, else 0 (an
        append-only step keeps the generation, see `IndexState`)."""
        return 1 if self.deletes or any(r.replaces for r in self.upserts) else 0


@dataclass(frozen=True, slots=True)
class NearestQuery:
    """What `VectorSearch.nearest` looks for: the query as `embed_query` made it, at most `k`
    facts, and only facts of `source_id` when it is given."""

    query: bytes
    k: int
    source_id: str | None
