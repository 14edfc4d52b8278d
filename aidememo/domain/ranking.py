"""Lexical ranking, written once for every backend (SPEC.md SRCH-4, SRCH-5).

Each store keeps the same project-scoped inverted index: one row per (project, term, fact)
with the term's count in the fact (tf) and the fact's length in terms (dl), the number of the
project's facts holding each term (df), and the project's fact count (N) and total length.
A store answers three questions about one project only: those statistics (`Stats`), where a
term's `SEARCH_WINDOW` newest matches begin (`Cutoff`), and the best facts for a weighted
query (`Top`). This module turns the answers into hits, so the plan, the weights and the
window are the same code everywhere.

A score is BM25 with k1 = 1.2 and b = 0.75 and Lucene's idf, ln(1 + (N - n + 0.5) / (n + 0.5)),
which stays above zero even for a term every fact holds. Each term's part of a fact's score
is computed in IEEE doubles from the same inputs in the same order on every store (SQLite,
PostgreSQL, Python), truncated to an integer count of 2**-32 units, and the parts are summed
as integers, so a score is identical bit for bit whatever store or query plan summed it.

Cost stays inside the project: statistics, cutoffs and postings are all read by key prefix
(tenant, project, term). A term matching more than its window of the project's facts makes
the search evaluate only the newest facts, from the point where the window's newest matches of
such a term begin, and the answer says it is not exhaustive. The window is `SEARCH_WINDOW` for
up to eight terms and `POSTINGS_BUDGET` shared by the terms beyond that (`window_for`), so no
search evaluates more postings than the budget, whatever its terms.

Two terms. Summing every candidate's parts means grouping all of them, which costs far more
than scanning them; so a store may answer a query with two present terms, A and B, from three
short lists instead: the `limit` best facts by A's part alone, the `limit` best by B's part
alone, and the `limit` best of the facts holding both (by their full score), each fact keeping
its largest score, best first. That is exactly the top: a fact holding both is in the third
list with its full score; a fact holding A only scores its A part, and every fact ahead of it
by A's part alone (larger part, or equal with a smaller fact id) is ahead of it in the answer
too (its score is at least its A part), so a fact of the answer's first `limit` is among the
`limit` best by A's part. The parts are the same integers either way, so the scores are too.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from aidememo.domain.model import SearchHit, SearchPage

K1 = 1.2
B = 0.75
SEARCH_WINDOW = 10_000
"""A term matching more facts of the project than this is evaluated over its newest ones."""
POSTINGS_BUDGET = 80_000
"""The postings one search may evaluate, all its terms together (SRCH-7): each term's window
is this budget shared by the query's terms, never more than `SEARCH_WINDOW`."""


def window_for(term_count: int) -> int:
    """The window of each term of a query of `term_count` distinct terms (SRCH-5, SRCH-7):
    `SEARCH_WINDOW` up to 8 terms, then `POSTINGS_BUDGET` shared, so a search evaluates at
    most the budget's postings (each term at most its window past the common cutoff)."""
    return min(SEARCH_WINDOW, POSTINGS_BUDGET // max(1, term_count))


SCORE_UNIT = 2.0**-32
"""A term's part of a score is a whole number of these; scores are sums of such parts."""
MAX_TERM_BYTES = 1024
"""A longer term (a run of letters over 1 KiB) is not indexed (it still counts in the fact's
length), so every store's index keys stay within PostgreSQL's B-tree entry limit."""

_SCALE = 2.0**32
_K = K1 * (1.0 - B)
SQL_CONSTANTS = (_K, K1 * B, K1 + 1.0, _SCALE)
"""What a store that computes `weights` in SQL is given (PostgreSQL's `aidememo_search`): k,
k1 * b, k1 + 1 and the unit scale, as the doubles this module computes with."""


@dataclass(frozen=True, slots=True)
class Weights:
    """A query's integer term weights (idf * (k1 + 1) in score units) and the two length
    factors of BM25's denominator, as a store's `Top` applies them."""

    terms: list[tuple[str, int]]
    k: float
    kb: float


# (terms) -> (N, total length, df of each present term)
Stats = Callable[[list[str]], tuple[int, int, dict[str, int]]]
# (term, rank) -> the doc_seq of the term's rank-th newest posting (rank from 1)
Cutoff = Callable[[str, int], int]
# (weights, min doc_seq, source_id, limit) -> [(fact_id, score in units)], best first
Top = Callable[[Weights, int, str | None, int], list[tuple[str, int]]]


def indexable(term: str) -> bool:
    """Whether a term gets postings (`MAX_TERM_BYTES`)."""
    return len(term) * 4 <= MAX_TERM_BYTES or len(term.encode("utf-8")) <= MAX_TERM_BYTES


def idf(docs: int, df: int) -> float:
    """Lucene's BM25 idf: positive for every df in 1..N."""
    return math.log(1.0 + (docs - df + 0.5) / (df + 0.5))


def part(weight: int, tf: int, k: float, kb: float, dl: int) -> int:
    """One term's part of a fact's score, in units: the same expression, in the same order,
    as every store's SQL (an integer product, then one IEEE division, then truncation)."""
    return int(weight * tf / (tf + k + kb * dl))


def weights(docs: int, total_terms: int, df: dict[str, int], terms: list[str]) -> Weights:
    """The weights of the query terms present in the project, in query order."""
    avgdl = total_terms / docs
    return Weights(
        [(t, round(idf(docs, df[t]) * (K1 + 1.0) * _SCALE)) for t in terms if df.get(t)],
        _K,
        K1 * B / avgdl,
    )


def search(
    stats: Stats, cutoff: Cutoff, top: Top, terms: list[str], source_id: str | None, limit: int
) -> SearchPage:
    """Plan and run one project's search through a store's three primitives."""
    if not terms or limit <= 0:
        return SearchPage([], True)
    docs, total, df = stats(terms)
    if docs <= 0 or total <= 0 or not any(df.get(t) for t in terms):
        return SearchPage([], True)
    w = weights(docs, total, df, terms)
    window = window_for(len(terms))
    over = [t for t, _ in w.terms if df[t] > window]
    min_doc = max((cutoff(t, window) for t in over), default=0)
    rows = top(w, min_doc, source_id, limit)
    return SearchPage([SearchHit(f, units * SCORE_UNIT) for f, units in rows], not over)
