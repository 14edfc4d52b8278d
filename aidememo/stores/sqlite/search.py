"""Search on the SQLite store: the project-scoped lexical index (SPEC.md SRCH-1, SRCH-4, SRCH-5).

The index is four plain tables keyed by (tenant, project) first (`schema.py` version 5):
`fact_search` (one row per fact: its doc_seq, length and terms), `fact_search_postings` (one row
per fact and distinct term: tf and the fact's length, fact and source ids), `fact_search_terms`
(the project's document frequency of each term) and `fact_search_stats` (the project's fact
count, total length and last doc_seq). Every read is a key-prefix range of one project, so a
search costs what the project's own matches cost, and its statistics are the project's own.
The plan, weights and window are `aidememo.domain.ranking`'s; the same statements serve the
embedded file and a Durable Object.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from aidememo.domain import ranking
from aidememo.domain.model import Scope, SearchDoc, SearchPage
from aidememo.stores.sqlite import sql as q
from aidememo.stores.sqlite.executor import SqlExecutor, SqlValue


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def search(
    x: SqlExecutor, scope: Scope, terms: list[str], source_id: str | None, limit: int
) -> SearchPage:
    """Facts matching any term, best first, then by fact id (SRCH-3..5)."""
    t, p = scope.tenant_id, scope.project_id

    def stats(query: list[str]) -> tuple[int, int, dict[str, int]]:
        rows: list[Any] = x.execute(q.SEARCH_STATS, (t, p, t, p, _json(query)))
        docs, total, df = 0, 0, {}
        for term, n, length in rows:
            if term == "":
                docs, total = int(n), int(length)
            else:
                df[term] = int(n)
        return docs, total, df

    def cutoff(term: str, rank: int) -> int:
        return int(x.execute(q.SEARCH_CUTOFF, (t, p, term, rank - 1))[0][0])  # type: ignore[arg-type]

    def top(w: ranking.Weights, min_doc: int, source: str | None, n: int) -> list[tuple[str, int]]:
        params: tuple[SqlValue, ...]
        if len(w.terms) == 2:
            statement, params = q.SEARCH_TOP_PAIR[source is not None], _pair(w, min_doc, source, n)
        else:
            statement = q.SEARCH_TOP[len(w.terms) > 1, source is not None]
            head = (_json(w.terms), w.k, w.kb, t, p, min_doc)
            params = (*head, n) if source is None else (*head, source, n)
        rows: list[Any] = x.execute(statement, params)
        return [(fact_id, int(units)) for fact_id, units in rows]

    def _pair(w: ranking.Weights, min_doc: int, source: str | None, n: int) -> tuple[SqlValue, ...]:
        (term_a, weight_a), (term_b, weight_b) = w.terms
        src: tuple[SqlValue, ...] = () if source is None else (source,)
        return (
            *(weight_a, w.k, w.kb, t, p, term_a, min_doc, *src, n),
            *(weight_b, w.k, w.kb, t, p, term_b, min_doc, *src, n),
            *(t, p, term_a, min_doc, *src, t, p, term_b, min_doc, *src),
            *(weight_a, w.k, w.kb, weight_b, w.k, w.kb),
            *(t, p, term_a, t, p, term_b, n, n),
        )

    return ranking.search(stats, cutoff, top, terms, source_id, limit)


def _indexed(words: list[str]) -> str:
    return _json(sorted({w for w in words if ranking.indexable(w)}))


def index_fact(x: SqlExecutor, t: str, p: str, doc: SearchDoc) -> None:
    """Replace a fact's entry in the project's index (SRCH-1, SRCH-4): the old postings and
    document frequencies go, the statistics move and give the fact the project's next
    doc_seq, then the new postings and document frequencies are written."""
    old: list[Any] = x.execute(q.SEARCH_OLD, (t, p, doc.fact_id))
    words = doc.terms.split()
    docs_delta, terms_delta = 1, len(words)
    if old:
        old_seq, old_terms = old[0]
        old_words = old_terms.split()
        gone = _indexed(old_words)
        x.execute(q.SEARCH_UNPOST, (t, p, old_seq, gone))
        x.execute(q.SEARCH_UNCOUNT, (t, p, gone))
        x.execute(q.SEARCH_DROP_TERMS, (t, p, gone))
        docs_delta, terms_delta = 0, len(words) - len(old_words)
    seq = x.execute(q.SEARCH_BUMP, (t, p, len(words), docs_delta, terms_delta))[0][0]
    x.execute(q.SEARCH_PUT, (t, p, doc.fact_id, doc.source_id, seq, len(words), doc.terms))
    tf = _json({w: n for w, n in Counter(words).items() if ranking.indexable(w)})
    x.execute(q.SEARCH_POST, (t, p, seq, doc.fact_id, doc.source_id, len(words), tf))
    x.execute(q.SEARCH_COUNT, (t, p, tf))
