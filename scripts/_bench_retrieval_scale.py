"""bench_retrieval's scale part: hybrid and lexical search latency on one project of 100,000
facts (SPEC.md SEM-3, SEM-4), on SQLite and on PostgreSQL.

Writing 100,000 facts one command at a time and embedding each with the bundled model would
take most of an hour on this machine and measure neither search. So the project is loaded as
an import loads one (`restore_history`: the facts, their changes 1..N and their search rows,
in batches of 5,000), and the real indexer follows those changes with the bundled model behind
`PoolEmbedder`: the facts are the labelled set's texts, each with a suffix ` #i` of its own, and
each text's vector is the one the model gives its labelled text (embedded once). The index
tables, the query-time matrix, the lexical index and the search path are the product's, and
every query is embedded by the model (no cache), as in the 10,000-fact measurement.
"""

from __future__ import annotations

import re
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from _bench_common import note

from aidememo.domain.canonical import canonical_bytes
from aidememo.domain.clock import RandomIds, SystemClock
from aidememo.domain.model import (
    ChangeOp,
    ChangeRecord,
    History,
    Membership,
    MemberStatus,
    Project,
    ResourceRef,
    Role,
    StoredResource,
)
from aidememo.embedding.matrix import MatrixSearch
from aidememo.http.app import Services
from aidememo.ports import Embedder, Store
from aidememo.service.access import Caller
from aidememo.service.archive_rows import search_doc
from aidememo.service.semantic_indexer import IndexerSettings, SemanticIndexer

BATCH = 5_000
SUFFIX = re.compile(r" #\d+$")


class PoolEmbedder:
    """The model's vectors of the texts without their ` #i` suffix, each embedded once; the
    model's fingerprint, so the index is the one the searches read."""

    def __init__(self, model: Embedder) -> None:
        self.model = model
        self.fingerprint = model.fingerprint
        self._vectors: dict[str, bytes] = {}

    def embed(self, texts: Sequence[str]) -> list[bytes]:
        bases = [SUFFIX.sub("", t) for t in texts]
        missing = sorted({b for b in bases if b not in self._vectors})
        for base, vector in zip(missing, self.model.embed(missing), strict=True):
            self._vectors[base] = vector
        return [self._vectors[b] for b in bases]


def bulk_project(
    store: Store, tenant: str, project_id: str, actor: str, facts: list[tuple[str, str]]
) -> None:
    """A project of `facts` (id, text) at head len(facts), its member `actor`, written as an
    import writes rows."""
    epoch = RandomIds().new_id("epoch")
    project = Project(tenant, project_id, epoch, len(facts))
    now = SystemClock().now_ms()

    def begin(tx: Any) -> None:
        if not tx.tenant_exists(tenant):
            tx.insert_tenant(tenant, now)
        tx.insert_project(project, now)
        membership = Membership(tenant, project_id, actor, Role.WRITER, MemberStatus.ACTIVE)
        tx.put_membership(membership, now)

    store.transaction(begin)
    for start in range(0, len(facts), BATCH):
        resources, changes, docs = [], [], []
        for seq, (fact_id, text) in enumerate(facts[start : start + BATCH], start=start + 1):
            body = canonical_bytes(
                {"actor_id": actor, "content": text, "fact_id": fact_id,
                 "session_id": "s1", "source_id": "team"}
            )  # fmt: skip
            ref = ResourceRef("fact", fact_id)
            resource = StoredResource(ref, 1, body)
            resources.append(resource)
            changes.append(ChangeRecord(seq, epoch, ref, ChangeOp.UPSERT, 1, actor, now, body))
            doc = search_doc(resource)
            if doc is not None:
                docs.append(doc)
        history = History(resources, changes, [], [], [], docs)

        def write(tx: Any, h: History = history) -> None:
            tx.restore_history(project, h)

        store.transaction(write)


def measure(
    store: Store,
    model: Embedder,
    tenant: str,
    actor: str,
    pool: list[str],
    n: int,
    texts: list[str],
    timed: Callable[[Any, str, list[str], str], dict[str, float]],
    label: str,
    settle: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Load `n` facts into a project `huge`, index them, then time hybrid and lexical searches
    of `texts`; figures named `{label}_...`."""
    facts = [(f"h-{i:06d}", f"{pool[i % len(pool)]} #{i}") for i in range(n)]
    engine = MatrixSearch(model, cached_queries=0)
    services = Services(store, SystemClock(), RandomIds(), 60_000, semantic=engine)
    services.identity.bootstrap(tenant_id=tenant, project_id="seed", actor_id=actor)
    started = time.perf_counter()
    bulk_project(store, tenant, "huge", actor, facts)
    note(f"{label}: loaded {n} facts in {time.perf_counter() - started:.1f}s")
    if settle is not None:
        settle()
    started = time.perf_counter()
    indexer = SemanticIndexer(store, PoolEmbedder(model), IndexerSettings(batch=2_000, duty=1.0))
    indexer.run_until_idle()
    note(f"{label}: indexed {indexer.stats.facts} facts in {time.perf_counter() - started:.1f}s")
    if settle is not None:
        settle()
    timed(services.searches, "huge", texts[:5], "hybrid")  # load the project's matrix
    hybrid = timed(services.searches, "huge", texts, "hybrid")
    lexical = timed(services.searches, "huge", texts, "lexical")
    found = services.searches.search(
        Caller(tenant, actor), "huge", q=texts[0], source_id=None, limit=10,
        at_least_seq=None, mode="hybrid",
    )  # fmt: skip
    assert found.mode == "hybrid" and found.index_seq == n, (found.mode, found.index_seq)
    out = {f"{label}_{k}": v for k, v in {**hybrid, **lexical}.items()}
    out[f"{label}_index_memory_bytes_per_fact"] = round(engine.memory_bytes() / n, 1)
    return out


def run_scale(
    stores: list[str],
    model: Embedder,
    tenant: str,
    actor: str,
    pool: list[str],
    n: int,
    texts: list[str],
    timed: Callable[[Any, str, list[str], str], dict[str, float]],
) -> dict[str, Any]:
    """`measure` on a fresh SQLite file and, when asked, a throwaway PostgreSQL cluster."""
    figures: dict[str, Any] = {}
    for kind in stores:
        label = f"{kind}_{n // 1000}k"
        with tempfile.TemporaryDirectory(prefix="aidememo-bench-retrieval.") as base:
            if kind == "sqlite":
                from aidememo.stores.sqlite.store import SqliteStore

                store: Any = SqliteStore.open_file(Path(base) / "huge.sqlite")
                try:
                    figures.update(
                        measure(store, model, tenant, actor, pool, n, texts, timed, label)
                    )
                finally:
                    store.close()
                continue
            from _bench_pg_server import Cluster

            from aidememo.cli.stores import psycopg_connector
            from aidememo.stores.postgres import PostgresStore

            cluster = Cluster(base)
            cluster.start()
            try:
                store = PostgresStore.open(psycopg_connector(cluster.url), migrate=True)

                def settle(url: str = cluster.url) -> None:
                    # statistics and visibility made current after the load, as bench_search
                    import psycopg

                    with psycopg.connect(url, autocommit=True) as conn:
                        conn.execute("VACUUM ANALYZE")
                        conn.execute("CHECKPOINT")

                try:
                    figures.update(
                        measure(store, model, tenant, actor, pool, n, texts, timed, label, settle)
                    )
                finally:
                    store.close()
            finally:
                cluster.stop()
    return figures
