"""`GET .../search` in every mode (SPEC.md SEM-3..5): lexical is `TypedReads.search` as it is
(SRCH-*); semantic and hybrid read the project's derived semantic index through a
`VectorSearch`, and hybrid fuses both lists (`aidememo.domain.semantic.fuse`).

Waiting for `at_least_seq` and embedding the query happen before the read view opens, so no
transaction is held while the provider works or the index catches up.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from aidememo.domain.canonical import decode_stored
from aidememo.domain.errors import AidememoError, ErrorCode, fail
from aidememo.domain.model import ResourceRef, Scope, SearchPage
from aidememo.domain.semantic import (
    CANDIDATES,
    DEFAULT_MODE,
    FALLBACK_BEHIND,
    FALLBACK_NOT_BUILT,
    FALLBACK_UNAVAILABLE,
    LEXICAL_WEIGHT,
    MODE_AUTO,
    MODE_HYBRID,
    MODE_LEXICAL,
    MODE_SEMANTIC,
    MODES,
    SEMANTIC_FLOOR,
    Fused,
    fuse,
)
from aidememo.domain.semantic_index import IndexState, NearestQuery, index_wait_over
from aidememo.domain.tokenize import split_query
from aidememo.ports import ReadTx, Store, VectorSearch
from aidememo.service.access import Caller, authorize
from aidememo.service.typed_reads import SearchQuery, SearchResult, TypedReads

# SEM-5: how long a request with `at_least_seq` beyond the index waits for it.
WAIT_S = 2.0
POLL_S = 0.02


@dataclass(frozen=True, slots=True)
class SearchAnswer:
    """Everything `GET .../search` answers (SEM-3)."""

    project_epoch: str
    index_seq: int
    mode: str
    semantic_model: dict[str, object] | None
    semantic_lag: int | None
    fallback_reason: str | None
    exhaustive: bool
    results: list[dict[str, object]]
    terms_dropped: int = 0  # distinct query terms past the cap (SRCH-7)

    def as_json(self) -> dict[str, object]:
        """The wire body."""
        return {
            "project_epoch": self.project_epoch,
            "index_seq": self.index_seq,
            "mode": self.mode,
            "semantic_model": self.semantic_model,
            "semantic_lag": self.semantic_lag,
            "fallback_reason": self.fallback_reason,
            "exhaustive": self.exhaustive,
            "terms_dropped": self.terms_dropped,
            "results": self.results,
        }


@dataclass(frozen=True, slots=True, eq=False)
class Searches:
    """Search in the four modes over one store and, where one is configured, one
    `VectorSearch` (None on the edge and without the `semantic` extra); read-only once built
    (a benchmark tunes a copy made with `dataclasses.replace`)."""

    store: Store
    typed_reads: TypedReads
    engine: VectorSearch | None = None
    wait_s: float = WAIT_S  # SEM-5's bounded wait for `at_least_seq`
    sleep: Callable[[float], None] = time.sleep
    lexical_weight: float = LEXICAL_WEIGHT  # SEM-4; the benchmark tunes it
    semantic_floor: float = SEMANTIC_FLOOR  # SEM-4; the benchmark tunes it

    def search(
        self,
        caller: Caller,
        project_id: str,
        *,
        q: str,
        source_id: str | None,
        limit: int,
        at_least_seq: int | None,
        mode: str | None,
    ) -> SearchAnswer:
        """Run the search `mode` asks for (SEM-3), or the default's."""
        wanted = DEFAULT_MODE if mode is None else mode
        if wanted not in MODES:
            raise fail(ErrorCode.INVALID_COMMAND, "mode must be lexical, semantic, hybrid or auto")
        engine = self.engine
        request = SearchQuery(q, source_id, limit, at_least_seq)

        def lexical(reason: str | None) -> SearchAnswer:
            found = self.typed_reads.search(caller, project_id, request)
            return _lexical_answer(found, reason)

        if wanted == MODE_LEXICAL:
            return lexical(None)
        if engine is None:
            if wanted == MODE_AUTO:
                return lexical(FALLBACK_UNAVAILABLE)
            raise fail(ErrorCode.SEMANTIC_UNAVAILABLE, f"{wanted} search is not available here")
        # The lexical path checks q, limit and at_least_seq (SRCH-1); semantic ones do too.
        request.check()
        scope = caller.scope(project_id)
        fingerprint = engine.fingerprint.text()
        if at_least_seq is not None:
            self._wait(scope_reader(self.store, scope), at_least_seq, fingerprint)
        query = engine.embed_query(q)
        terms, dropped = split_query(q)

        def run(tx: ReadTx) -> SearchAnswer | str:
            project, _ = authorize(tx, caller, project_id, write=False)
            if at_least_seq is not None and at_least_seq > project.head_seq:
                raise fail(ErrorCode.CURSOR_OUT_OF_RANGE, "at_least_seq is beyond the head")
            state = tx.semantic_state(scope)
            # An index still at 0 under a head beyond it (its first build running) has
            # nothing to answer with: not built yet (SEM-3).
            usable = (
                state is not None
                and state.fingerprint == fingerprint
                and state.project_epoch == project.project_epoch
                and (state.applied_seq > 0 or project.head_seq == 0)
            )
            applied = state.applied_seq if state is not None and usable else 0
            if not usable or (at_least_seq is not None and at_least_seq > applied):
                if wanted == MODE_SEMANTIC:
                    raise AidememoError(
                        ErrorCode.INDEX_NOT_READY,
                        f"the semantic index is at sequence {applied}",
                        index_seq=applied,
                    )
                return FALLBACK_NOT_BUILT if not usable else FALLBACK_BEHIND
            assert state is not None
            return self._semantic(
                tx,
                scope,
                state,
                project.head_seq,
                project.project_epoch,
                query,
                terms,
                source_id,
                limit,
                wanted,
                dropped,
            )

        answer = self.store.read(run)
        if isinstance(answer, str):
            return lexical(answer)
        return answer

    def _semantic(
        self,
        tx: ReadTx,
        scope: Scope,
        state: IndexState,
        head_seq: int,
        epoch: str,
        query: bytes,
        terms: list[str],
        source_id: str | None,
        limit: int,
        wanted: str,
        dropped: int,
    ) -> SearchAnswer:
        assert self.engine is not None
        k = limit if wanted == MODE_SEMANTIC else max(CANDIDATES, limit)
        semantic = self.engine.nearest(tx, scope, state, NearestQuery(query, k, source_id))
        bodies: dict[str, bytes | None] = {}
        if wanted == MODE_SEMANTIC:
            page = SearchPage([], True)
            fused = [
                Fused(fid, score, None, None, score, i + 1)
                for i, (fid, score) in enumerate(semantic)
            ]
            effective = MODE_SEMANTIC
        else:
            page = tx.search(scope, terms, source_id, k) if terms else SearchPage([], True)
            lexical = [(h.fact_id, h.score) for h in page.hits]
            if page.bodies is not None:
                bodies = {h.fact_id: b for h, b in zip(page.hits, page.bodies, strict=True)}
            fused = fuse(lexical, semantic, limit, self.lexical_weight, self.semantic_floor)
            effective = MODE_HYBRID
        results = [r for r in (_result(tx, scope, f, bodies) for f in fused) if r is not None]
        return SearchAnswer(
            epoch,
            state.applied_seq,
            effective,
            self.engine.fingerprint.as_json(),
            max(0, head_seq - state.applied_seq),
            None,
            page.exhaustive,
            results,
            dropped,
        )

    def _wait(
        self,
        read_head: Callable[[], tuple[int, IndexState | None] | None],
        at_least_seq: int,
        fingerprint: str,
    ) -> None:
        """Poll the index until it reaches `at_least_seq` or `wait_s` passed (SEM-5); the
        read that follows decides what to answer."""
        deadline = time.monotonic() + self.wait_s
        while not index_wait_over(read_head(), at_least_seq, fingerprint):
            if time.monotonic() >= deadline:
                return
            self.sleep(POLL_S)


def _lexical_answer(found: SearchResult, reason: str | None) -> SearchAnswer:
    """A lexical search's result as a mode answer; `reason` says why a semantic mode fell
    back to it (None when lexical was asked for)."""
    results = [
        {
            **r,
            "lexical_score": r["score"],
            "lexical_rank": i + 1,
            "semantic_score": None,
            "semantic_rank": None,
        }
        for i, r in enumerate(found.results)
    ]
    return SearchAnswer(
        found.project_epoch,
        found.index_seq,
        found.mode,
        None,
        None,
        reason,
        found.exhaustive,
        results,
        found.terms_dropped,
    )


def scope_reader(store: Store, scope: Scope) -> Callable[[], tuple[int, IndexState | None] | None]:
    """A function reading the project's head and index state in one view."""
    return lambda: store.read(lambda tx: tx.semantic_head(scope))


def _result(
    tx: ReadTx, scope: Scope, fused: Fused, bodies: dict[str, bytes | None]
) -> dict[str, object] | None:
    """The result's wire shape; None for a fact the index still holds but that is gone."""
    body = bodies.get(fused.fact_id)
    if body is None:
        found = tx.get_resource(scope, ResourceRef("fact", fused.fact_id))
        body = None if found is None else found.body
    if body is None:
        return None
    fact = decode_stored(body)
    return {
        "fact_id": fact["fact_id"],
        "session_id": fact["session_id"],
        "source_id": fact["source_id"],
        "actor_id": fact["actor_id"],
        "content": fact["content"],
        "score": fused.score,
        "lexical_score": fused.lexical_score,
        "lexical_rank": fused.lexical_rank,
        "semantic_score": fused.semantic_score,
        "semantic_rank": fused.semantic_rank,
    }
