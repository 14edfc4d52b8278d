"""Search over a replica in every mode, offline (SPEC.md REPLICA-7, SEM-9).

`lexical` is the server's BM25 over the replica's facts (`aidememo.client.replica_search`).
`semantic` and `hybrid` need a local embedder (the bundled model of the `semantic` extra,
loaded by the caller): the replica's facts are embedded on the machine and the vectors cached
in the replica file, in the `vectors` table, each with the fingerprint of the model that made
it and the sequence of the fact's row it was made from. A search first brings the cache to the
replica's cursor: vectors of another fingerprint are dropped (two models are never mixed),
facts whose row moved since (a newer revision) or that are new are embedded, and vectors of
facts no longer held are removed, in one transaction; so the semantic list, like the lexical
one, reflects the replica at its cursor. `auto` is `hybrid` with an embedder and `lexical`
(with `fallback_reason` `semantic_unavailable`) without one; `semantic` and `hybrid` without
one are refused. Hybrid fuses the two lists as the server does (SEM-4).

Cosines are computed in Python over `array` rows: the client imports no numpy, and a replica
holds one member's view of one project.
"""

from __future__ import annotations

import json
import operator
import sqlite3
import sys
from array import array
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from aidememo.client.replica_search import search_facts
from aidememo.domain import semantic as sem

VECTORS_TABLE = (
    "CREATE TABLE IF NOT EXISTS vectors (fact_id TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, "
    "seq INTEGER NOT NULL, vector BLOB NOT NULL)"
)
EMBED_BATCH = 64

Fact = tuple[int, str, str, str]  # seq, fact id, source id, content


class LocalEmbedder(Protocol):
    """What a replica search needs of an embedder (`aidememo.ports.Embedder`'s shape)."""

    @property
    def fingerprint(self) -> sem.Fingerprint: ...

    def embed(self, texts: Sequence[str]) -> list[bytes]: ...


class SemanticUnavailable(Exception):
    """`semantic` or `hybrid` was asked for and no local embedder is installed."""


def _floats(blob: bytes) -> array[float]:
    out = array("f")
    out.frombytes(blob)
    if sys.byteorder == "big":  # pragma: no cover - no big-endian CPU runs this
        out.byteswap()
    return out


def refresh_vectors(
    conn: sqlite3.Connection, embedder: LocalEmbedder, facts: Sequence[Fact]
) -> tuple[dict[str, bytes], int]:
    """The cached vectors of `facts` made by `embedder`, brought up to date first; and how
    many facts were embedded now. One transaction; nothing of another fingerprint is kept."""
    fingerprint = embedder.fingerprint.text()
    conn.execute(VECTORS_TABLE)
    cached = {
        fact_id: (seq, vector)
        for fact_id, seq, vector in conn.execute(
            "SELECT fact_id, seq, vector FROM vectors WHERE fingerprint = ?", (fingerprint,)
        )
    }
    stale = [f for f in facts if cached.get(f[1], (None,))[0] != f[0]]
    made: list[tuple[str, str, int, bytes]] = []
    for start in range(0, len(stale), EMBED_BATCH):
        batch = stale[start : start + EMBED_BATCH]
        embedded = embedder.embed([content for _, _, _, content in batch])
        made.extend(
            (fact_id, fingerprint, seq, vector)
            for (seq, fact_id, _, _), vector in zip(batch, embedded, strict=True)
        )
    held = {f[1] for f in facts}
    gone = [(fact_id,) for fact_id in cached if fact_id not in held]
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute("DELETE FROM vectors WHERE fingerprint != ?", (fingerprint,))
        conn.executemany("DELETE FROM vectors WHERE fact_id = ?", gone)
        conn.executemany(
            "INSERT INTO vectors VALUES (?, ?, ?, ?) ON CONFLICT (fact_id) DO UPDATE SET "
            "fingerprint = excluded.fingerprint, seq = excluded.seq, vector = excluded.vector",
            made,
        )
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    vectors = {fact_id: vector for fact_id, (_, vector) in cached.items() if fact_id in held}
    vectors.update((fact_id, vector) for fact_id, _, _, vector in made)
    return vectors, len(made)


def nearest(
    vectors: dict[str, bytes],
    sources: dict[str, str],
    query: bytes,
    source_id: str | None,
    k: int,
) -> list[tuple[str, float]]:
    """The `k` facts of highest cosine to `query` (unit vectors: the dot product), best
    first, ties by fact id; only `source_id`'s facts when it is given."""
    q = _floats(query)
    scored = [
        (fact_id, float(sum(map(operator.mul, q, _floats(blob)))))
        for fact_id, blob in vectors.items()
        if len(blob) == len(query) and (source_id is None or sources.get(fact_id) == source_id)
    ]
    scored.sort(key=lambda pair: (-pair[1], pair[0]))
    return scored[:k]


def search_replica(
    facts: dict[str, dict[str, Any]],
    entries: list[Fact],
    conn: sqlite3.Connection,
    *,
    q: str,
    source_id: str | None,
    limit: int,
    mode: str,
    embedder: Callable[[], LocalEmbedder | None],
) -> dict[str, Any]:
    """The body of `GET .../search` over the replica's facts (`facts` by id, `entries` their
    search rows), without `project_epoch` and `index_seq`, which the replica adds. `embedder`
    is called only when the mode may need it; `SemanticUnavailable` when it must and gives
    None."""
    if mode not in sem.MODES:
        raise ValueError("mode must be lexical, semantic, hybrid or auto")
    model = None if mode == sem.MODE_LEXICAL else embedder()
    if model is None:
        if mode in (sem.MODE_SEMANTIC, sem.MODE_HYBRID):
            raise SemanticUnavailable(f"{mode} search needs the local embedding model")
        hits, exhaustive = search_facts(entries, q, source_id, limit)
        fused = [sem.Fused(f, s, s, i + 1, None, None) for i, (f, s) in enumerate(hits)]
        reason = sem.FALLBACK_UNAVAILABLE if mode == sem.MODE_AUTO else None
        return _answer(facts, fused, sem.MODE_LEXICAL, None, reason, exhaustive, 0)
    vectors, embedded = refresh_vectors(conn, model, entries)
    sources = {fact_id: source for _, fact_id, source, _ in entries}
    query = model.embed([q])[0]
    if mode == sem.MODE_SEMANTIC:
        semantic = nearest(vectors, sources, query, source_id, limit)
        fused = [sem.Fused(f, s, None, None, s, i + 1) for i, (f, s) in enumerate(semantic)]
        effective, exhaustive = sem.MODE_SEMANTIC, True
    else:
        k = max(sem.CANDIDATES, limit)
        semantic = nearest(vectors, sources, query, source_id, k)
        lexical, exhaustive = search_facts(entries, q, source_id, k)
        fused = sem.fuse(lexical, semantic, limit, sem.LEXICAL_WEIGHT)
        effective = sem.MODE_HYBRID
    return _answer(facts, fused, effective, model.fingerprint, None, exhaustive, embedded)


def _answer(
    facts: dict[str, dict[str, Any]],
    fused: list[sem.Fused],
    mode: str,
    fingerprint: sem.Fingerprint | None,
    reason: str | None,
    exhaustive: bool,
    embedded: int,
) -> dict[str, Any]:
    results = [
        {
            **{k: facts[f.fact_id][k] for k in ("fact_id", "session_id", "source_id", "actor_id")},
            "content": facts[f.fact_id]["content"],
            "score": f.score,
            "lexical_score": f.lexical_score,
            "lexical_rank": f.lexical_rank,
            "semantic_score": f.semantic_score,
            "semantic_rank": f.semantic_rank,
        }
        for f in fused
    ]
    return {
        "mode": mode,
        "semantic_model": None if fingerprint is None else fingerprint.as_json(),
        # The vectors are brought to the replica's cursor before every semantic answer.
        "semantic_lag": None if fingerprint is None else 0,
        "fallback_reason": reason,
        "exhaustive": exhaustive,
        "embedded": embedded,
        "results": results,
    }


def load_facts(conn: sqlite3.Connection) -> tuple[dict[str, dict[str, Any]], list[Fact]]:
    """The replica's live facts: by id, and as search rows."""
    facts: dict[str, dict[str, Any]] = {}
    entries: list[Fact] = []
    for seq, fact_id, body in conn.execute(
        "SELECT seq, id, body FROM resources WHERE kind = 'fact' AND body IS NOT NULL"
    ):
        record = json.loads(body)
        facts[fact_id] = record
        entries.append((seq, fact_id, record["source_id"], record["content"]))
    return facts, entries
