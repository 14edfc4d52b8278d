"""Recall: FTS5 BM25 with tag and term boosts over one or more scopes (SPEC.md MEM-6).

The ranking is Nuzo 1.2's, so a store gives the same memories in the same order under both:
query terms are the query's letter/digit/underscore runs (lower-cased, longer than one UTF-16
unit, minus a fixed stop-word list), OR-ed as quoted FTS5 phrases; up to `min(8 x limit, 200)`
candidates come back in `bm25(memories_fts, 0, 0, 1, 5)` order; each is re-scored
`-bm25 + 1000 x matched tags + 10 x matched terms`, filtered for noise, and sorted by score.
The searched scopes (the active scope, `user:default` when `include_global`, a configured team
scope) are ranked together; each result's `memory.scope` names the scope that produced it.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Sequence

from aidememo.memory.db import COLUMNS, MemoryDatabase, memory_from_row
from aidememo.memory.jstext import js_trim, utf16_len
from aidememo.memory.model import GLOBAL_SCOPE, Memory, RecallResult

STOP_WORDS = frozenset(
    "a an and as at be by all applies before change changes command commands for from how in is"
    " it of on or package packages require required requires release releases should the to what"
    " when where which who with validate validates qual quais como de da do das dos em para por"
    " que".split()
)
WEAK_TERMS = frozenset(
    "ci docs errors privacy release review routing security storage testing workflow".split()
)
# JavaScript's /[^\p{L}\p{N}_]+/u: Python's `\w` is letters, digits (all numeric) and `_`.
_SPLIT = re.compile(r"[^\w]+")
_TAG_PARTS = re.compile(r"[._-]+")
CANDIDATE_MAX = 200

_SELECT = ", ".join(f"m.{column.strip()}" for column in COLUMNS.split(","))


def tokenize(text: str) -> list[str]:
    """The recall terms of `text`, in order (repeats kept)."""
    return [
        term
        for term in _SPLIT.split(js_trim(text).lower())
        if utf16_len(term) > 1 and term not in STOP_WORDS
    ]


def fts_query(text: str) -> str:
    """The FTS5 query: every term as a quoted phrase, joined with OR ("" when no term)."""
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in tokenize(text))


def query_hash(query: str) -> str:
    """SHA-256 of the query text (UTF-8), hex: all a usage-recording recall keeps of it."""
    return hashlib.sha256(query.encode("utf-8")).hexdigest()


def _matched_tags(terms: set[str], tags: Sequence[str]) -> list[str]:
    return [
        tag
        for tag in tags
        if tag in terms or any(part in terms for part in _TAG_PARTS.split(tag) if part)
    ]


def _matched_terms(query_terms: Sequence[str], memory: Memory) -> list[str]:
    present = set(tokenize(f"{memory.content} {' '.join(memory.tags)}"))
    return list(dict.fromkeys(term for term in query_terms if term in present))


def _candidates(
    db: MemoryDatabase, match: str, scopes: list[str], count: int
) -> list[tuple[Memory, float]]:
    """The top `count` active memories of `scopes` in bm25 order, with their scores.

    Ranks inside FTS first (the index holds exactly the active memories, with their scopes) and
    reads only the winners' rows; when the index disagrees with a winner's row (a drifted index),
    it answers with the canonical join instead, so the result never depends on the drift.
    """
    marks = ",".join("?" * len(scopes))
    ranked = db.conn.execute(
        "SELECT id, scope, bm25(memories_fts, 0.0, 0.0, 1.0, 5.0) * -1 FROM memories_fts"
        f" WHERE memories_fts MATCH ? AND scope IN ({marks})"
        " ORDER BY bm25(memories_fts, 0.0, 0.0, 1.0, 5.0) LIMIT ?",
        (match, *scopes, count),
    ).fetchall()
    found = db.find_many([row[0] for row in ranked])
    out = []
    for memory_id, scope, score in ranked:
        memory = found.get(memory_id)
        if memory is None or memory.archived_at is not None or memory.scope != scope:
            break
        out.append((memory, float(score)))
    else:
        if len({m.id for m, _ in out}) == len(out):
            return out
    rows = db.conn.execute(
        f"SELECT {_SELECT}, bm25(memories_fts, 0.0, 0.0, 1.0, 5.0) * -1 AS score"
        " FROM memories_fts JOIN memories m ON m.id = memories_fts.id"
        f" WHERE memories_fts MATCH ? AND m.archived_at IS NULL AND m.scope IN ({marks})"
        " ORDER BY bm25(memories_fts, 0.0, 0.0, 1.0, 5.0) LIMIT ?",
        (match, *scopes, count),
    ).fetchall()
    return [(memory_from_row(row), float(row[16])) for row in rows]


def search(db: MemoryDatabase, query: str, scopes: Sequence[str], limit: int) -> list[RecallResult]:
    """The ranked, noise-filtered recall of `query` over `scopes` (MEM-6)."""
    match = fts_query(query)
    if not match:
        return []
    wanted = list(dict.fromkeys(scopes))
    rows = _candidates(db, match, wanted, min(max(limit * 8, limit), CANDIDATE_MAX))
    query_terms = tokenize(query)
    term_set = set(query_terms)
    minimum = 1 if len(query_terms) <= 1 else 2
    candidates = []
    strong_frequency: Counter[str] = Counter()
    for memory, bm25_score in rows:
        tags = _matched_tags(term_set, memory.tags)
        terms = _matched_terms(query_terms, memory)
        strong_terms = [term for term in terms if term not in WEAK_TERMS]
        strong_frequency.update(set(strong_terms))
        score = bm25_score + len(tags) * 1000 + len(terms) * 10
        parts = [
            f"Matched tags: {', '.join(tags)}" if tags else None,
            f"Matched terms: {', '.join(terms)}" if terms else None,
            f"FTS query: {match}",
        ]
        reason = "; ".join(part for part in parts if part)
        candidates.append((memory, tags, terms, strong_terms, score, reason))
    kept = [
        (memory, score, reason)
        for memory, tags, terms, strong_terms, score, reason in candidates
        if (len(terms) >= minimum and strong_terms)
        or any(strong_frequency[term] == 1 for term in strong_terms)
        or len(tags) >= 2
        or any(tag not in WEAK_TERMS for tag in tags)
    ]
    order = {scope: rank for rank, scope in enumerate(wanted)}
    # Stable: equal scores keep the FTS order within a scope; across scopes the earlier-searched
    # scope (project, then user:default, then team) comes first (MEM-6).
    kept.sort(key=lambda item: (-item[1], order.get(item[0].scope, len(order))))
    return [RecallResult(memory, score, reason) for memory, score, reason in kept[:limit]]


def recall_scopes(scope: str, include_global: bool, team_scope: str | None) -> list[str]:
    """The searched scopes in search order: the scope, `user:default`, the team scope."""
    scopes = [scope]
    if include_global:
        scopes.append(GLOBAL_SCOPE)
    if team_scope is not None:
        scopes.append(team_scope)
    return list(dict.fromkeys(scopes))
