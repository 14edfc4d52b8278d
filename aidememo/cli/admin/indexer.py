"""`aidememo indexer`: the semantic indexer as its own process (SPEC.md SEM-7), for several
origins on one PostgreSQL (each then serves with `--indexer off`). It follows every project's
feed until SIGTERM/SIGINT, or with `--once` until every index has caught up."""

from __future__ import annotations

import argparse
import signal
import sys
from types import FrameType

from aidememo.cli.errors import EXIT_USAGE, CliError
from aidememo.cli.stores import default_database, open_store


def cmd_indexer(ns: argparse.Namespace) -> int:
    """Run the indexer over the database's projects."""
    try:
        from aidememo.embedding import load_embedder
        from aidememo.service.semantic_indexer import SemanticIndexer

        embedder = load_embedder(ns.embedding, threads=1)
    except ImportError:
        raise CliError(
            "aidememo indexer needs the semantic extra: pip install 'aidememo[semantic]'",
            EXIT_USAGE,
        ) from None
    store = open_store(ns.database or default_database())
    indexer = SemanticIndexer(store, embedder)
    try:
        if ns.once:
            indexer.run_until_idle()
        else:

            def stop(_sig: int, _frame: FrameType | None) -> None:
                indexer.stop()

            signal.signal(signal.SIGTERM, stop)
            signal.signal(signal.SIGINT, stop)
            sys.stderr.write(f"indexing with {embedder.fingerprint.text()}\n")
            indexer.run()
    finally:
        store.close()
    sys.stdout.write(f"indexed {indexer.stats.facts} facts, lag {indexer.stats.lag}\n")
    return 0
