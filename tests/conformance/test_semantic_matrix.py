"""The query-time matrix (`aidememo.embedding.matrix.MatrixSearch`, SPEC.md SEM-4) on every store
that keeps an index: it follows the index in place as the indexer moves it, filters by source
through its source codes, and holds at most 2 KiB a fact (384 float32 values and spare rows)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from aidememo.domain.records import CreateRequest
from aidememo.http.app import Services
from aidememo.ports import Embedder
from tests.conformance.conftest import BACKENDS, Backend
from tests.conformance.test_semantic_index import (
    CALLER,
    FACTS,
    PROJECT,
    STORES,
    _facts,
    _indexer,
    _setup,
    embedder,
)

pytest.importorskip("onnxruntime")
from aidememo.embedding.matrix import MatrixSearch

__all__ = ["embedder"]


@pytest.fixture(params=STORES)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    backend = BACKENDS[request.param](tmp_path)
    yield backend
    for cleanup in backend.cleanups:
        cleanup()


def _semantic(services: Services, q: str, source_id: str | None = None) -> list[str]:
    found = services.searches.search(
        CALLER, PROJECT, q=q, source_id=source_id, limit=10, at_least_seq=None, mode="semantic"
    )
    return [str(r["fact_id"]) for r in found.results]


def test_sem4_matrix_follows_the_index_in_place_and_filters_by_source(
    backend: Backend, embedder: Embedder
) -> None:
    store = backend.open()
    services = _setup(store, embedder)
    engine = services.searches.engine
    assert isinstance(engine, MatrixSearch)
    indexer = _indexer(store, embedder)  # batches of 3: the matrix grows step by step
    while indexer.step():
        assert set(_semantic(services, "database pool")) <= {f for f, _ in FACTS}
    assert _semantic(services, "why is the db saturated")[0] == "f_pool"
    services.typed_writes.create_session(
        CALLER,
        PROJECT,
        CreateRequest("c-s2", {"session_id": "s2", "source_id": "ops", "topic": "t"}),
    )
    services.typed_writes.create_fact(
        CALLER, PROJECT,
        CreateRequest("c-f_ops", {"fact_id": "f_ops", "session_id": "s2",
                                  "content": "postgres refused clients: too many connections"}),
    )  # fmt: skip
    _facts(services, [("f_late", "the nightly backup finished late")])
    indexer.run_until_idle()
    everyone = _semantic(services, "why is the db saturated")
    assert {"f_ops", "f_late"} <= set(everyone) and len(everyone) == len(FACTS) + 2
    assert _semantic(services, "why is the db saturated", "ops") == ["f_ops"]
    assert "f_ops" not in _semantic(services, "why is the db saturated", "src")
    assert _semantic(services, "why is the db saturated", "nobody") == []
    assert engine.memory_bytes() <= 2048 * (len(FACTS) + 2)
