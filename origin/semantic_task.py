"""The origin's semantic search (SPEC.md SEM-2, SEM-6, SEM-7): the provider loaded once per
process, the query-time matrix search the app answers with, and the indexer on a daemon
thread (unless a separate `aidememo indexer` process does the indexing).

A provider that cannot load (the `semantic` extra missing, a model file that fails its pin)
is logged and the origin serves without it: `auto` searches answer lexically and say why,
`semantic` and `hybrid` answer `semantic_unavailable`.
"""

from __future__ import annotations

import logging
import threading

from aidememo.domain.errors import AidememoError
from aidememo.ports import Embedder, Store
from aidememo.service.semantic_indexer import IndexerSettings, SemanticIndexer

log = logging.getLogger("aidememo.semantic")

OFF = "off"


def load_provider(spec: str) -> Embedder | None:
    """The embedder `spec` names (`aidememo.embedding.load_embedder`), None for `off` or
    when it cannot load (logged)."""
    if spec == OFF:
        return None
    try:
        from aidememo.embedding import load_embedder

        embedder = load_embedder(spec, threads=1)
    except (ImportError, AidememoError) as exc:
        log.warning("semantic search off: the embedding provider did not load (%s)", exc)
        return None
    log.info("semantic search with %s", embedder.fingerprint.text())
    return embedder


class IndexerTask:
    """Runs a `SemanticIndexer` on a daemon thread from `start()` until `stop()`."""

    def __init__(
        self, store: Store, embedder: Embedder, settings: IndexerSettings | None = None
    ) -> None:
        self.indexer = SemanticIndexer(store, embedder, settings)
        self._thread = threading.Thread(
            target=self.indexer.run, name="aidememo-indexer", daemon=True
        )

    def start(self) -> None:
        """Start the thread (once)."""
        self._thread.start()

    def stop(self) -> None:
        """Ask the indexer to stop and wait for its current step."""
        self.indexer.stop()
        if self._thread.is_alive():
            self._thread.join(timeout=30)
