"""The lexical tokenizer shared by every backend's search index (SPEC.md SRCH-2).

Text is lower-cased and split into runs of letters and digits. Runs of CJK characters are
split into overlapping bigrams, so a two-character word such as 서버 or 服务 is found inside
longer text without a dictionary; a lone CJK character stays a token of its own. Index and
query text go through the same function, so every store's index (SQLite, Durable Object SQL,
PostgreSQL and the in-memory store) sees identical terms.
"""

from __future__ import annotations

import re

_CJK = (
    "\u1100-\u11ff"  # Hangul Jamo
    "\u3040-\u30ff"  # Hiragana, Katakana
    "\u3130-\u318f"  # Hangul compatibility Jamo
    "\u3400-\u4dbf"  # CJK extension A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\uac00-\ud7af"  # Hangul syllables
    "\uf900-\ufaff"  # CJK compatibility ideographs
)
# A run is either CJK characters or other letters and digits: word characters that are
# neither "_" nor CJK (one negated class, so no lookahead runs per character).
_RUN_RE = re.compile(rf"[{_CJK}]+|[^\W_{_CJK}]+")
_CJK_RE = re.compile(rf"[{_CJK}]")

MAX_QUERY_TERMS = 32
"""A query's distinct terms beyond this many are dropped (SRCH-7): the first 32 in the order
they appear are searched, and the answer's `terms_dropped` counts the rest."""


def tokenize(text: str) -> list[str]:
    """Split `text` into index terms, in order, duplicates kept."""
    lowered = text.lower()
    if _CJK_RE.search(lowered) is None:
        return _RUN_RE.findall(lowered)  # no CJK: every run is a term
    terms: list[str] = []
    for run in _RUN_RE.findall(lowered):
        if _CJK_RE.match(run):
            if len(run) == 1:
                terms.append(run)
            else:
                terms.extend(run[i : i + 2] for i in range(len(run) - 1))
        else:
            terms.append(run)
    return terms


def index_terms(text: str) -> str:
    """The space-separated term string stored in a search index."""
    return " ".join(tokenize(text))


def query_terms(text: str) -> list[str]:
    """Distinct query terms in first-seen order, at most `MAX_QUERY_TERMS`."""
    return split_query(text)[0]


def split_query(text: str) -> tuple[list[str], int]:
    """`(terms, dropped)`: the first `MAX_QUERY_TERMS` distinct terms in first-seen order, and
    how many distinct terms came after them (SRCH-7)."""
    seen = list(dict.fromkeys(tokenize(text)))
    return seen[:MAX_QUERY_TERMS], max(0, len(seen) - MAX_QUERY_TERMS)
