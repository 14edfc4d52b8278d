"""The derived semantic index on every store that keeps one (SPEC.md SEM-2..SEM-7), with the
real bundled model: build, follow, rebuild, a change of model, search modes and
`at_least_seq`, tenant deletion and export/import leaving no orphan vectors.

Memory, SQLite and PostgreSQL (psycopg and pg8000); the edge's stores answer semantic modes
with `semantic_unavailable` (tests/contract/test_search_modes.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from aidememo.domain.clock import FixedClock, RandomIds
from aidememo.domain.errors import AidememoError, ErrorCode
from aidememo.domain.records import CreateRequest
from aidememo.domain.semantic import Fingerprint
from aidememo.http.app import Services
from aidememo.ports import Embedder, Store
from aidememo.service.access import Caller
from aidememo.service.semantic_indexer import IndexerSettings, SemanticIndexer
from tests.conformance.conftest import BACKENDS, Backend

pytest.importorskip("onnxruntime")
from aidememo.embedding import load_embedder
from aidememo.embedding.matrix import MatrixSearch

STORES = ("memory", "sqlite_file", "postgres_psycopg", "postgres_pg8000")
TENANT, PROJECT, ACTOR = "tenant_sem", "project_sem", "agent_sem"
CALLER = Caller(TENANT, ACTOR)
FACTS = [
    ("f_pool", "the database connection pool has 2 connections; raise it to 20"),
    ("f_tabs", "we indent python with four spaces, never tabs"),
    ("f_cert", "the TLS certificate of the gateway expired at midnight"),
    ("f_lunch", "team lunch moved to thursday"),
    ("f_oom", "the worker was killed for using too much memory"),
]


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return load_embedder(threads=1)


@pytest.fixture(params=STORES)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    backend = BACKENDS[request.param](tmp_path)
    yield backend
    for cleanup in backend.cleanups:
        cleanup()


class Renamed:
    """The bundled model under another revision: what an operator's model change looks like
    to the index (same vectors, another fingerprint)."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        f = inner.fingerprint
        self.fingerprint = Fingerprint(f.provider, f.model, "other", f.dimensions)

    def embed(self, texts: Sequence[str]) -> list[bytes]:
        return self.inner.embed(texts)


def _setup(store: Store, embedder: Embedder, facts: list[tuple[str, str]] = FACTS) -> Services:
    services = Services(
        store, FixedClock(1_000), RandomIds(), 60_000, semantic=MatrixSearch(embedder),
        search_wait_s=0.2,
    )  # fmt: skip
    services.identity.bootstrap(tenant_id=TENANT, project_id=PROJECT, actor_id=ACTOR)
    services.typed_writes.create_session(
        CALLER, PROJECT, CreateRequest("c-s", {"session_id": "s", "source_id": "src", "topic": "t"})
    )
    _facts(services, facts)
    return services


def _facts(services: Services, facts: list[tuple[str, str]]) -> int:
    seq = 0
    for fid, text in facts:
        receipt = services.typed_writes.create_fact(
            CALLER,
            PROJECT,
            CreateRequest(f"c-{fid}", {"fact_id": fid, "session_id": "s", "content": text}),
        )
        seq = receipt.project_seq
    return seq


def _indexer(store: Store, embedder: Embedder) -> SemanticIndexer:
    return SemanticIndexer(store, embedder, IndexerSettings(duty=1.0, batch=3))


def _ids(services: Services, q: str, mode: str, **kw: object) -> list[str]:
    found = services.searches.search(
        CALLER, PROJECT, q=q, source_id=None, limit=3, at_least_seq=None, mode=mode, **kw
    )
    return [str(r["fact_id"]) for r in found.results]


def test_sem6_index_builds_follows_and_rebuilds_to_the_same_answers(
    backend: Backend, embedder: Embedder
) -> None:
    store = backend.open()
    services = _setup(store, embedder)
    indexer = _indexer(store, embedder)
    assert indexer.run_until_idle() == 1 + len(FACTS)  # the session's change is applied too
    found = services.searches.search(
        CALLER, PROJECT, q="why is the db saturated", source_id=None, limit=3,
        at_least_seq=None, mode="semantic",
    )  # fmt: skip
    assert found.mode == "semantic" and found.results[0]["fact_id"] == "f_pool"
    assert found.semantic_model == embedder.fingerprint.as_json()
    assert found.index_seq == 1 + len(FACTS) and found.semantic_lag == 0
    hit = found.results[0]
    assert hit["semantic_rank"] == 1 and hit["lexical_rank"] is None
    # follow: a new fact is found once the indexer ran, never before
    seq = _facts(services, [("f_disk", "the volume ran out of space because logs piled up")])
    assert "f_disk" not in _ids(services, "no space left on the disk", "semantic")
    indexer.run_until_idle()
    assert _ids(services, "no space left on the disk", "semantic")[0] == "f_disk"
    before = {q: _ids(services, q, "hybrid") for q in ("memory killed", "certificate", "spaces")}
    # rebuild: dropping the derived rows and re-indexing gives the same answers
    state = store.read(lambda tx: tx.semantic_state(CALLER.scope(PROJECT)))
    assert state is not None and state.applied_seq == seq
    store.transaction(
        lambda tx: tx.semantic_reset(CALLER.scope(PROJECT), state.fingerprint, "gone")
    )
    _indexer(store, embedder).run_until_idle()
    assert {q: _ids(services, q, "hybrid") for q in before} == before


def test_sem2_a_model_change_rebuilds_and_never_mixes(backend: Backend, embedder: Embedder) -> None:
    store = backend.open()
    _setup(store, embedder)
    _indexer(store, embedder).run_until_idle()
    other = Renamed(embedder)
    _indexer(store, other).run_until_idle()
    scope = CALLER.scope(PROJECT)
    state = store.read(lambda tx: tx.semantic_state(scope))
    assert state is not None and state.fingerprint == other.fingerprint.text()
    rows = store.read(lambda tx: tx.semantic_vectors(scope, 0))
    assert sorted(r.fact_id for r in rows) == sorted(f for f, _ in FACTS)
    # a search pinned to the first model finds no index of its own: auto falls back, says why
    services = Services(
        store, FixedClock(1_000), RandomIds(), 60_000, semantic=MatrixSearch(embedder)
    )
    found = services.searches.search(
        CALLER, PROJECT, q="pool", source_id=None, limit=3, at_least_seq=None, mode="auto"
    )
    assert (found.mode, found.fallback_reason) == ("lexical", "semantic_index_not_built")
    with pytest.raises(AidememoError) as refused:
        services.searches.search(
            CALLER, PROJECT, q="pool", source_id=None, limit=3, at_least_seq=None, mode="semantic"
        )
    assert refused.value.code is ErrorCode.INDEX_NOT_READY and refused.value.index_seq == 0


def test_sem4_sem5_hybrid_fuses_and_at_least_seq_beyond_the_index(
    backend: Backend, embedder: Embedder
) -> None:
    store = backend.open()
    services = _setup(store, embedder)
    _indexer(store, embedder).run_until_idle()
    found = services.searches.search(
        CALLER, PROJECT, q="gateway certificate", source_id=None, limit=3,
        at_least_seq=None, mode=None,
    )  # fmt: skip
    assert found.mode == "hybrid" and found.results[0]["fact_id"] == "f_cert"
    top = found.results[0]
    assert top["lexical_rank"] == 1 and top["semantic_rank"] == 1
    assert isinstance(top["lexical_score"], float) and isinstance(top["semantic_score"], float)
    seq = _facts(services, [("f_new", "a brand new fact about certificates")])
    behind = services.searches.search(
        CALLER, PROJECT, q="certificate", source_id=None, limit=3, at_least_seq=seq, mode="auto"
    )
    assert (behind.mode, behind.fallback_reason) == ("lexical", "semantic_index_behind")
    assert behind.index_seq == seq  # the lexical index is the head (SRCH-1)
    with pytest.raises(AidememoError) as refused:
        services.searches.search(
            CALLER, PROJECT, q="certificate", source_id=None, limit=3, at_least_seq=seq,
            mode="semantic",
        )  # fmt: skip
    assert refused.value.code is ErrorCode.INDEX_NOT_READY and refused.value.index_seq == seq - 1
    lagging = services.searches.search(
        CALLER, PROJECT, q="certificate", source_id=None, limit=3, at_least_seq=None, mode="hybrid"
    )
    assert (lagging.mode, lagging.semantic_lag, lagging.index_seq) == ("hybrid", 1, seq - 1)
    _indexer(store, embedder).run_until_idle()
    caught_up = services.searches.search(
        CALLER, PROJECT, q="certificate", source_id=None, limit=3, at_least_seq=seq, mode="hybrid"
    )
    assert caught_up.mode == "hybrid" and caught_up.index_seq == seq


def test_sem6_arc4_tenant_deletion_and_import_leave_no_orphan_vectors(
    backend: Backend, embedder: Embedder
) -> None:
    store = backend.open()
    services = _setup(store, embedder)
    _indexer(store, embedder).run_until_idle()
    counts = store.read(lambda tx: tx.count_tenant_rows(TENANT))
    assert counts["semantic_vectors"] == len(FACTS) and counts["semantic_state"] == 1
    lines = list(services.archive.export_lines(TENANT))
    services.archive.delete_tenant(TENANT, TENANT)
    after = store.read(lambda tx: tx.count_tenant_rows(TENANT))
    assert after["semantic_vectors"] == 0 and after["semantic_state"] == 0
    services.archive.import_lines(lines)
    scope = CALLER.scope(PROJECT)
    assert store.read(lambda tx: tx.semantic_vectors(scope, 0)) == []
    _indexer(store, embedder).run_until_idle()  # the imported project is indexed anew
    assert _ids(services, "why is the db saturated", "semantic")[0] == "f_pool"
    rows = store.read(lambda tx: tx.semantic_vectors(scope, 0))
    assert sorted(r.fact_id for r in rows) == sorted(f for f, _ in FACTS)


class _StopAfter:
    """A stop event for `SemanticIndexer.run` that records each pause and is set after
    `pauses` of them, so the loop's stepping can be followed without a clock."""

    def __init__(self, pauses: int) -> None:
        self.pauses = pauses
        self.waits: list[float] = []

    def is_set(self) -> bool:
        return len(self.waits) >= self.pauses

    def wait(self, timeout: float) -> bool:
        self.waits.append(timeout)
        return self.is_set()


def test_sem7_the_indexer_steps_at_once_while_behind_and_pauses_once_caught_up(
    backend: Backend, embedder: Embedder
) -> None:
    store = backend.open()
    services = _setup(store, embedder)  # the session and five facts: six changes
    indexer = _indexer(store, embedder)  # three changes a step
    assert indexer.step() == 3 and not indexer.caught_up()  # the batch came full
    assert indexer.step() == 3 and not indexer.caught_up()
    assert indexer.step() == 0 and indexer.caught_up()
    _facts(services, [("f_disk", "the volume ran out of space because logs piled up")])
    assert indexer.step() == 1 and indexer.caught_up()  # a short batch: nothing left
    # run(): no pause between the steps of a backlog, one after the step that caught up
    _facts(services, [(f"f_more{i}", f"another fact number {i}") for i in range(4)])
    stop = _StopAfter(pauses=2)
    indexer._stop = stop  # type: ignore[assignment]
    steps: list[int] = []
    step = indexer.step
    indexer.step = lambda: steps.append(step()) or steps[-1]  # type: ignore[method-assign]
    indexer.run()
    assert steps == [3, 1, 0]  # the full batch, the rest (a pause), nothing (a pause)
    assert stop.waits == [indexer.settings.idle_s] * 2 and indexer.stats.lag == 0
