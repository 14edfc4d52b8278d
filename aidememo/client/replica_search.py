"""Lexical search over a replica's facts, offline (SPEC.md REPLICA-7): the server's BM25
(`aidememo.domain.ranking`, SRCH-2..5) over the facts the replica holds at its cursor, so the
same facts give the same scores and order as `GET .../search?mode=lexical` at that sequence.
The index is built in memory from the replica's rows on each search (a replica holds one
member's view of one project)."""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterable

from aidememo.domain import ranking
from aidememo.domain.tokenize import query_terms, tokenize

Posting = tuple[str, str, int, int]  # fact id, source id, tf, dl


def search_facts(
    facts: Iterable[tuple[int, str, str, str]], q: str, source_id: str | None, limit: int
) -> tuple[list[tuple[str, float]], bool]:
    """`(fact_id, score)` best first and whether every match was evaluated, over facts given
    as `(seq, fact_id, source_id, content)`. Every fact is evaluated (a replica holds one
    view of one project; SRCH-5's window would need the server's indexing order)."""
    postings: dict[str, dict[int, Posting]] = {}
    docs = total = 0
    # A replica's bootstrap stamps every row with the snapshot's sequence: facts are numbered
    # in (seq, fact_id) order, so two facts never share a posting slot.
    for seq, (_, fact_id, source, content) in enumerate(sorted(facts), start=1):
        tokens = tokenize(content)
        docs += 1
        total += len(tokens)
        for term, tf in Counter(tokens).items():
            if ranking.indexable(term):
                postings.setdefault(term, {})[seq] = (fact_id, source, tf, len(tokens))

    def stats(query: list[str]) -> tuple[int, int, dict[str, int]]:
        df = {t: len(postings.get(t, ())) for t in query}
        return docs, total, {t: n for t, n in df.items() if n}

    def cutoff(term: str, rank: int) -> int:
        return heapq.nlargest(rank, postings[term])[-1]

    def top(w: ranking.Weights, min_doc: int, source: str | None, n: int) -> list[tuple[str, int]]:
        scores: dict[str, int] = {}
        for term, weight in w.terms:
            for seq, (fact_id, src, tf, dl) in postings.get(term, {}).items():
                if seq >= min_doc and (source is None or src == source):
                    scores[fact_id] = scores.get(fact_id, 0) + ranking.part(
                        weight, tf, w.k, w.kb, dl
                    )
        return heapq.nsmallest(n, scores.items(), key=lambda kv: (-kv[1], kv[0]))

    terms = query_terms(q)
    if not terms:
        return [], True
    page = ranking.search(stats, cutoff, top, terms, source_id, limit)
    return [(h.fact_id, h.score) for h in page.hits], page.exhaustive
