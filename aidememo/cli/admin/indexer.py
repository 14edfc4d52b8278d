"""`aidememo indexer`: the semantic indexer as its own process (SPEC.md SEM-7), for several
origins on one PostgreSQL (each then serves with `--indexer off`). It follows every project's
feed until SIGTERM/SIGINT, or with `--once` until every index has caught up.

`--attached` is how `aidememo serve` runs it as its child: the status `/ready` reports is
printed as one JSON line on stdout whenever it changes, and the indexer stops when stdin
closes (the server stopping it, or the server gone)."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from types import FrameType
from typing import TYPE_CHECKING

from aidememo.cli.errors import EXIT_USAGE, CliError
from aidememo.cli.stores import default_database, open_store

if TYPE_CHECKING:
    from aidememo.service.semantic_indexer import SemanticIndexer

REPORT_S = 0.25  # how often an attached indexer looks for a changed status


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
            if ns.attached:
                _attach(indexer)
            indexer.run()
    finally:
        store.close()
    if not ns.attached:
        sys.stdout.write(f"indexed {indexer.stats.facts} facts, lag {indexer.stats.lag}\n")
    return 0


def _attach(indexer: SemanticIndexer) -> None:
    """Threads that stop `indexer` when stdin closes and print its status when it changes."""
    stopped = threading.Event()

    def watch_stdin() -> None:
        while sys.stdin.buffer.read(4096):
            pass
        stopped.set()
        indexer.stop()

    def report() -> None:
        last = None
        while True:
            line = json.dumps(indexer.status(), sort_keys=True)
            if line != last:
                sys.stdout.write(line + "\n")
                sys.stdout.flush()
                last = line
            if stopped.wait(REPORT_S):
                return

    threading.Thread(target=watch_stdin, name="stdin", daemon=True).start()
    threading.Thread(target=report, name="status", daemon=True).start()
