"""Backends of the search-mode contract with a semantic provider (SPEC.md SEM-1..SEM-11): the
origin's app over its derived index and the in-memory matrix, and the edge (both storage
modes) over the Workers AI and Vectorize doubles. Every one embeds with the same
deterministic `tests.doubles.hashed_embedding`, so every backend gives the same answers.

`SemanticBackend.catch_up()` brings the index to the head however the backend builds it
(the origin's indexer run until idle; at the edge the project object's alarms fired with the
clock moved past Vectorize's visibility delay); `counts()` is `(Workers AI calls, Vectorize
queries)` at the edge and None at the origin.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aidememo.bodies.memory import MemoryBodies
from aidememo.domain.clock import FixedClock
from aidememo.service.semantic_indexer import IndexerSettings, SemanticIndexer
from aidememo.stores.in_memory import InMemoryStore
from aidememo.stores.sqlite.store import SqliteStore
from tests.contract.conftest import open_api
from tests.contract.support import ADMIN_TOKEN, Api, Backend, _app
from tests.doubles.hashed_embedding import HashedEmbedder


@dataclass
class SemanticBackend:
    """A contract `Api` with a semantic provider, and how to drive its index."""

    api: Api
    catch_up: Callable[[], None]
    counts: Callable[[], tuple[int, int] | None]
    runtime: Any = None  # the edge's runtime double; None at the origin


def _origin(make_store: Callable[[Path], Any]) -> Callable[[Path, FixedClock], Backend]:
    def factory(tmp: Path, clock: FixedClock) -> Backend:
        from aidememo.embedding.matrix import MatrixSearch
        from tests.contract.support import InProcessClient

        store = make_store(tmp)
        app = _app(store, clock, MemoryBodies(), MatrixSearch(HashedEmbedder()), 0.1)
        backend = Backend(InProcessClient(app), app.services.identity, store.close)
        backend.admin_token = ADMIN_TOKEN
        backend.store = lambda: store
        indexer = SemanticIndexer(store, HashedEmbedder(), IndexerSettings(duty=1.0))
        backend.catch_up = indexer.run_until_idle  # type: ignore[attr-defined]
        return backend

    return factory


def _edge(postgres: bool) -> Callable[[Path, FixedClock], Backend]:
    def factory(tmp: Path, clock: FixedClock) -> Backend:
        from tests.edge import backend as edge

        backend: Backend = (edge.edge_postgres_backend if postgres else edge.edge_backend)(
            tmp, clock, semantic=True
        )
        backend.admin_token = backend.client.runtime.admin_token  # type: ignore[attr-defined]
        return backend

    return factory


FACTORIES: dict[str, Callable[[Path, FixedClock], Backend]] = {
    "memory": _origin(lambda tmp: InMemoryStore()),
    "sqlite_file": _origin(lambda tmp: SqliteStore.open_file(tmp / "ssot.sqlite")),
    "edge": _edge(postgres=False),
    "edge_postgres": _edge(postgres=True),
}


def open_semantic(name: str, tmp_path: Path) -> Iterator[SemanticBackend]:
    """The contract fixture on backend `name`, with its index controls."""
    made: list[Backend] = []

    def factory(tmp: Path, clock: FixedClock) -> Backend:
        backend = FACTORIES[name](tmp, clock)
        made.append(backend)
        return backend

    for api in open_api(name, factory, tmp_path):
        backend = made[0]
        runtime = getattr(backend.client, "runtime", None)
        if runtime is not None:

            def counts(rt: Any = runtime) -> tuple[int, int]:
                return rt.ai.calls, rt.vectorize.calls.get("query", 0)

            yield SemanticBackend(api, runtime.catch_up_index, counts, runtime)
        else:
            yield SemanticBackend(api, backend.catch_up, lambda: None)  # type: ignore[attr-defined]
