"""Recall: FTS5 BM25 with tag and term boosts over one or more scopes (SPEC.md MEM-6).

The ranking is Nuzo 1.2's, so a store gives the same memories in the same order under both:
query terms are the query's letter/digit/underscore runs (lower-cased, longer than one UTF-16
unit, minus a fixed stop-word list), OR-ed as quoted FTS5 phrases; up to `min(8 x limit, 200)`
candidates come back in `bm25(memories_fts, 0, 0, 1, 5)` order; each is re-scored
`-bm25 + 1000 x matched tags + 10 x matched terms`, filtered for noise, and sorted by score.
The searched scopes (the active scope, `user:default` when `include_global`, a configured team
scope) are ranked together, ties in the index's order whatever their scope, as Nuzo ranks them;
each result's `memory.scope` names the scope that produced it.
"""

from __future__ import annotations

import hashlib
import operator
import re
from collections.abc import Sequence
from typing import Any

from aidememo.agent_memory.db import COLUMNS, MemoryDatabase, memory_from_row
from aidememo.agent_memory.jstext import js_trim
from aidememo.agent_memory.model import GLOBAL_SCOPE, RecallResult

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
_FIRST = operator.itemgetter(0)

_SELECT = ", ".join(f"m.{column.strip()}" for column in COLUMNS.split(","))


def tokenize(text: str) -> list[str]:
    """The recall terms of `text`, in order (repeats kept)."""
    return [
        term
        for term in _SPLIT.split(js_trim(text).lower())
        if (len(term) > 1 or (term and ord(term) > 0xFFFF)) and term not in STOP_WORDS
    ]


def fts_query(text: str) -> str:
    """The FTS5 query: every term as a quoted phrase, joined with OR ("" when no term)."""
    return match_text(tokenize(text))


def match_text(terms: list[str]) -> str:
    """The FTS5 query of recall terms: each a quoted phrase, joined with OR."""
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)


def query_hash(query: str) -> str:
    """SHA-256 of the query text (UTF-8), hex: all a usage-recording recall keeps of it."""
    return hashlib.sha256(query.encode("utf-8")).hexdigest()


_TAG_PARTS_SEEN: dict[str, tuple[tuple[str, frozenset[str]], ...]] = {}
_TAG_PARTS_MAX = 4096


def tag_parts(tags_text: str) -> tuple[tuple[str, frozenset[str]], ...]:
    """Each tag of an index row's tag text with the names it matches by: itself and its
    `.`/`_`/`-`-separated parts. A tag matches when one of those is a query term. Remembered
    per tag text (a store has few distinct tag sets), at most `_TAG_PARTS_MAX` of them."""
    parts = _TAG_PARTS_SEEN.get(tags_text)
    if parts is None:
        if len(_TAG_PARTS_SEEN) >= _TAG_PARTS_MAX:
            _TAG_PARTS_SEEN.clear()
        parts = _TAG_PARTS_SEEN[tags_text] = tuple(
            (tag, frozenset([tag, *(part for part in _TAG_PARTS.split(tag) if part)]))
            for tag in tags_text.split()
        )
    return parts


def has_token(text: str, term: str) -> bool:
    """Whether `term` is a whole token of the lower-cased `text` (a maximal run of letters,
    digits and `_`), without tokenizing `text`."""
    at = text.find(term)
    if at < 0:
        return False
    size, width = len(text), len(term)
    while at >= 0:
        end = at + width
        if (at == 0 or not (text[at - 1].isalnum() or text[at - 1] == "_")) and (
            end == size or not (text[end].isalnum() or text[end] == "_")
        ):
            return True
        at = text.find(term, at + 1)
    return False


# One candidate: memory id, scope, content, tags (the index's space-separated text), -bm25;
# a canonical candidate also carries its `Memory`.
Candidate = tuple[Any, ...]

_BM25 = "bm25(memories_fts, 0.0, 0.0, 1.0, 5.0)"
_STATEMENTS: dict[tuple[str, int], str] = {}


def _statement(kind: str, marks_count: int) -> str:
    """The `ranked` (index alone) or `canonical` (joined) statement for `marks_count` scopes, or
    the `rows` statement for that many ids, built once, so the connection's statement cache finds
    it by the same text."""
    sql = _STATEMENTS.get((kind, marks_count))
    if sql is None:
        marks = ",".join("?" * marks_count)
        if kind == "rows":  # the winners' canonical rows, by id
            sql = f"SELECT {COLUMNS} FROM memories WHERE id IN ({marks})"
        elif kind == "ranked":
            sql = (
                f"SELECT id, scope, content, tags, {_BM25} * -1 FROM memories_fts"
                f" WHERE memories_fts MATCH ? AND scope IN ({marks}) ORDER BY {_BM25} LIMIT ?"
            )
        else:
            sql = (
                f"SELECT {_SELECT}, {_BM25} * -1 AS score"
                " FROM memories_fts JOIN memories m ON m.id = memories_fts.id"
                f" WHERE memories_fts MATCH ? AND m.archived_at IS NULL AND m.scope IN ({marks})"
                f" ORDER BY {_BM25} LIMIT ?"
            )
        _STATEMENTS[(kind, marks_count)] = sql
    return sql


def _ranked(db: MemoryDatabase, match: str, scopes: list[str], count: int) -> list[Candidate]:
    """The top `count` FTS rows of `scopes` in bm25 order, read from the index alone."""
    return db.conn.execute(_statement("ranked", len(scopes)), (match, *scopes, count)).fetchall()


def _canonical(db: MemoryDatabase, match: str, scopes: list[str], count: int) -> list[Candidate]:
    """The same ranking joined with the canonical rows (Nuzo's statement)."""
    rows = db.conn.execute(_statement("canonical", len(scopes)), (match, *scopes, count)).fetchall()
    out: list[Candidate] = []
    for row in rows:
        memory = memory_from_row(row)
        out.append(
            (memory.id, memory.scope, memory.content, " ".join(memory.tags), row[16], memory)
        )
    return out


def _rank(
    candidates: list[Candidate], query_terms: list[str], match: str, limit: int
) -> list[tuple[Candidate, float, str]]:
    """Re-score, drop noise and sort (MEM-6): `(candidate, score, reason)`, best first."""
    distinct = list(dict.fromkeys(query_terms))
    term_set = set(query_terms)
    minimum = 1 if len(query_terms) <= 1 else 2
    any_weak = any(term in WEAK_TERMS for term in distinct)
    scored = []
    strong_frequency: dict[str, int] = {}
    for candidate in candidates:
        tags_text = candidate[3]
        matched_tags = (
            [tag for tag, names in tag_parts(tags_text) if not term_set.isdisjoint(names)]
            if tags_text
            else []
        )
        # Whitespace only separates tokens, so the index's tag text tokenizes as the tags do.
        text = f"{candidate[2]} {tags_text}".lower()
        terms = [term for term in distinct if term in text and has_token(text, term)]
        strong = [term for term in terms if term not in WEAK_TERMS] if any_weak else terms
        for term in strong:
            strong_frequency[term] = strong_frequency.get(term, 0) + 1
        scored.append((candidate, matched_tags, terms, strong))
    kept = []
    for candidate, matched_tags, terms, strong in scored:
        if (
            (strong and (len(terms) >= minimum or any(strong_frequency[t] == 1 for t in strong)))
            or len(matched_tags) >= 2
            or (matched_tags and matched_tags[0] not in WEAK_TERMS)
        ):
            score = candidate[4] + len(matched_tags) * 1000 + len(terms) * 10
            kept.append((-score, candidate, score, matched_tags, terms))
    # Stable: equal scores keep the index's bm25 order, whatever their scopes (MEM-6).
    kept.sort(key=_FIRST)
    best = []
    for _, candidate, score, matched_tags, terms in kept[:limit]:
        parts = [
            f"Matched tags: {', '.join(matched_tags)}" if matched_tags else None,
            f"Matched terms: {', '.join(terms)}" if terms else None,
            f"FTS query: {match}",
        ]
        best.append((candidate, score, "; ".join(part for part in parts if part)))
    return best


def search(db: MemoryDatabase, query: str, scopes: Sequence[str], limit: int) -> list[RecallResult]:
    """The ranked, noise-filtered recall of `query` over `scopes` (MEM-6).

    Candidates are ranked and scored from the FTS index alone (its rows are exactly the active
    memories with their scopes, content and tags), and only the winners' rows are read. When a
    winner's row disagrees with its index row (a drifted index), the canonical join answers.
    """
    query_terms = tokenize(query)
    if not query_terms:
        return []
    match = match_text(query_terms)
    wanted = list(dict.fromkeys(scopes))
    count = min(max(limit * 8, limit), CANDIDATE_MAX)
    best = _rank(_ranked(db, match, wanted, count), query_terms, match, limit)
    if not best:
        return []
    ids = list(dict.fromkeys(candidate[0] for candidate, _, _ in best))
    rows = {row[0]: row for row in db.conn.execute(_statement("rows", len(ids)), ids).fetchall()}
    results = []
    for (memory_id, scope, content, tags, _), score, reason in best:
        row = rows.get(memory_id)
        if row is None:
            break
        memory = memory_from_row(row)
        if (
            memory.archived_at is not None
            or memory.scope != scope
            or memory.content != content
            or memory.tags != tags.split()
        ):
            break
        results.append(RecallResult(memory, score, reason))
    else:
        if len(rows) == len(best):
            return results
    fallback = _canonical(db, match, wanted, count)
    return [
        RecallResult(candidate[5], score, reason)
        for candidate, score, reason in _rank(fallback, query_terms, match, limit)
    ]


def recall_scopes(scope: str, include_global: bool, team_scope: str | None) -> list[str]:
    """The searched scopes in search order: the scope, `user:default`, the team scope."""
    scopes = [scope]
    if include_global:
        scopes.append(GLOBAL_SCOPE)
    if team_scope is not None:
        scopes.append(team_scope)
    return list(dict.fromkeys(scopes))
