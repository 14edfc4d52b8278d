"""Search on the SQLite store: the project-scoped lexical index (SPEC.md SRCH-1, SRCH-4, SRCH-5).

The index is FTS5 (`aidememo.stores.sqlite.search_schema`, schema version 7): a fact is one row
of `fact_search_fts` holding one token per distinct indexable term, `k<project key>·<term>·
<tf>`, beside its `fact_search` row (doc_seq, length, terms), its `fact_search_docs` row (fact
id, source, length), its `fact_search_text` row (token text) and the project's statistics in
`fact_search_stats` (fact count, total length, last doc_seq, key). Every lookup is by the
project's own tokens, so a search costs what the project's own matches cost and its statistics
are the project's own. The plan, weights and window are `aidememo.domain.ranking`'s; the same
statements serve the embedded file and a Durable Object.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from aidememo.domain import ranking
from aidememo.domain.errors import ErrorCode, fail
from aidememo.domain.model import Scope, SearchDoc, SearchPage
from aidememo.stores.sqlite import sql as q
from aidememo.stores.sqlite.executor import SqlExecutor, SqlValue
from aidememo.stores.sqlite.search_schema import KEY_SHIFT, SEP

_SEQ_MASK = (1 << KEY_SHIFT) - 1
_AFTER_DIGITS = ":"  # the character after "9": a term's tokens end before it


def _prefix(key: int, term: str) -> str:
    return f"k{key}{SEP}{term}{SEP}"


def token_text(key: int, words: list[str]) -> str:
    """A fact's FTS5 text: its distinct indexable terms with their counts, in first-seen order
    (the migration builds the same set in SQL: `search_schema.tokens_of`)."""
    counts = Counter(words)
    return " ".join(f"{_prefix(key, w)}{n}" for w, n in counts.items() if ranking.indexable(w))


def _phrase(token: str) -> str:
    """A token as an FTS5 query: a quoted string (tokens hold letters, digits and `SEP`)."""
    return f'"{token}"'


def _rowid(key: int, seq: int) -> int:
    if not 0 < seq <= _SEQ_MASK:
        raise fail(ErrorCode.STORAGE_FAILURE, "the project's search index is full")
    return (key << KEY_SHIFT) | seq


def search(
    x: SqlExecutor, scope: Scope, terms: list[str], source_id: str | None, limit: int
) -> SearchPage:
    """Facts matching any term, best first, then by fact id (SRCH-3..5), with their current
    bodies read in one statement."""
    t, p = scope.tenant_id, scope.project_id
    project: list[Any] = x.execute(q.SEARCH_PROJECT, (t, p))
    if not project:
        return SearchPage([], True)
    docs, total, key = (int(v) for v in project[0])
    found: dict[str, list[tuple[str, int, int]]] = {}

    def tokens(term: str) -> list[tuple[str, int, int]]:
        """The term's tokens in this project: (token, tf, facts holding it)."""
        if term not in found:
            low = _prefix(key, term)
            rows: list[Any] = x.execute(q.SEARCH_TOKENS, (low, low + _AFTER_DIGITS))
            found[term] = [(tok, int(tok[len(low) :]), int(n)) for tok, n in rows]
        return found[term]

    def stats(query: list[str]) -> tuple[int, int, dict[str, int]]:
        df = {term: sum(n for _, _, n in tokens(term)) for term in query}
        return docs, total, {term: n for term, n in df.items() if n}

    def cutoff(term: str, rank: int) -> int:
        match = " OR ".join(_phrase(tok) for tok, _, _ in tokens(term))
        rows: list[Any] = x.execute(q.SEARCH_CUTOFF, (match, rank - 1))
        return int(rows[0][0]) & _SEQ_MASK

    def wanted(term: str, weight: int) -> list[list[object]]:
        return [[_phrase(tok), tf, weight] for tok, tf, _ in tokens(term)]

    def top(w: ranking.Weights, min_doc: int, source: str | None, n: int) -> list[tuple[str, int]]:
        first = (key << KEY_SHIFT) | min_doc
        tail: tuple[SqlValue, ...] = (first, n) if source is None else (first, source, n)
        params: tuple[SqlValue, ...]
        if len(w.terms) == 2:
            (term_a, weight_a), (term_b, weight_b) = w.terms
            pairs = [
                [f"{_phrase(tok_a)} AND {_phrase(tok_b)}", tf_a, weight_a, tf_b, weight_b]
                for tok_a, tf_a, _ in tokens(term_a)
                for tok_b, tf_b, _ in tokens(term_b)
            ]
            statement = q.SEARCH_TOP_PAIR[source is not None]
            params = (
                *(_json(wanted(term_a, weight_a)), _json(wanted(term_b, weight_b)), _json(pairs)),
                *(w.k, w.kb, *tail, w.k, w.kb, *tail),
                *(w.k, w.kb, w.k, w.kb, *tail, n),
            )
        else:
            rows_wanted = [row for term, weight in w.terms for row in wanted(term, weight)]
            statement = q.SEARCH_TOP[len(w.terms) > 1, source is not None]
            params = (_json(rows_wanted), w.k, w.kb, *tail)
        rows: list[Any] = x.execute(statement, params)
        return [(fact_id, int(units)) for fact_id, units in rows]

    page = ranking.search(stats, cutoff, top, terms, source_id, limit)
    if not page.hits:
        return page
    ids = _json([hit.fact_id for hit in page.hits])
    rows: list[Any] = x.execute(q.SEARCH_BODIES, (ids, t, p))
    bodies = [None if body is None else bytes(body) for (body,) in rows]
    return SearchPage(page.hits, page.exhaustive, bodies)


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def index_fact(x: SqlExecutor, t: str, p: str, doc: SearchDoc) -> None:
    """Replace a fact's entry in the project's index (SRCH-1, SRCH-4): the old entry goes, the
    statistics move and give the fact the project's next doc_seq, then the new entry is
    written."""
    old: list[Any] = x.execute(q.SEARCH_OLD, (t, p, doc.fact_id))
    words = doc.terms.split()
    docs_delta, terms_delta = 1, len(words)
    if old:
        docs_delta, terms_delta = 0, len(words) - len(str(old[0][1]).split())
    bumped: list[Any] = x.execute(q.SEARCH_BUMP, (t, p, len(words), docs_delta, terms_delta))
    seq, key = int(bumped[0][0]), int(bumped[0][1])
    if old:
        old_id = _rowid(key, int(old[0][0]))
        x.execute(q.SEARCH_DROP_TOKENS, (old_id,))
        x.execute(q.SEARCH_DROP_TEXT, (old_id,))
        x.execute(q.SEARCH_DROP_DOC, (old_id,))
    rowid, text = _rowid(key, seq), token_text(key, words)
    x.execute(q.SEARCH_PUT, (t, p, doc.fact_id, doc.source_id, seq, len(words), doc.terms))
    x.execute(q.SEARCH_ADD_DOC, (rowid, doc.fact_id, doc.source_id, len(words)))
    x.execute(q.SEARCH_ADD_TEXT, (rowid, text))
    x.execute(q.SEARCH_ADD_TOKENS, (rowid, text))
