"""The statements only the SQLite store runs, and `DIALECT`, the shared ones in its style.

Precomputed strings keep the hot path free of string building and let both executors reuse
prepared statements (the stdlib `sqlite3` statement cache is keyed by the SQL text).
Placeholders are positional `?`, which both `sqlite3` and Durable Object SQL accept. The
statements both SQL stores run alike are `aidememo.stores.sql_common.statements`.
"""

from __future__ import annotations

from typing import Any

from aidememo.stores.sql_common.dialect import Dialect
from aidememo.stores.sqlite.schema import FACT_SESSION


def _same(value: Any) -> Any:
    # Both executors return a BLOB as `bytes` already.
    return value


DIALECT = Dialect("sqlite", "?", flag=int, blob=_same, no_limit=-1)
"""Booleans bind as 0 or 1; a negative LIMIT is no limit in SQLite."""

# -- a command -----------------------------------------------------------------------------

# CMD-5's four point reads in one statement: the project row, the caller's membership, the
# receipt of the command id and the resource's current state, each a primary-key lookup
# LEFT JOINed to one constant row, so a missing row reads as NULLs rather than no row.
# Parameters: tenant, project, tenant, project, actor, tenant, project, command id, tenant,
# project, kind, resource id (positional `?` only, which every executor binds alike).
BEGIN_COMMAND = (
    "SELECT p.project_epoch, p.head_seq, m.role, m.status, r.fingerprint, r.actor_id, "
    "r.project_seq, r.kind, r.resource_id, r.revision, r.committed_at_ms, s.revision, s.body "
    "FROM (SELECT 1) AS one "
    "LEFT JOIN projects AS p ON p.tenant_id = ? AND p.project_id = ? "
    "LEFT JOIN memberships AS m ON m.tenant_id = ? AND m.project_id = ? AND m.actor_id = ? "
    "LEFT JOIN receipts AS r ON r.tenant_id = ? AND r.project_id = ? AND r.command_id = ? "
    "LEFT JOIN resources AS s ON s.tenant_id = ? AND s.project_id = ? AND s.kind = ? "
    "AND s.resource_id = ?"
)
# The same for a cached caller (AUTH-7): a fourteenth column is 1 while the token binding still
# holds, else NULL. Parameters: digest, tenant, actor, then those of `BEGIN_COMMAND`.
BEGIN_COMMAND_TOKEN = BEGIN_COMMAND.replace(
    " FROM (SELECT 1) AS one ",
    ", (SELECT 1 FROM token_bindings AS b JOIN tenants AS t ON t.tenant_id = b.tenant_id "
    "JOIN actors AS a ON a.tenant_id = b.tenant_id AND a.actor_id = b.actor_id "
    "WHERE b.token_sha256 = ? AND b.active AND b.tenant_id = ? AND b.actor_id = ?) "
    "FROM (SELECT 1) AS one ",
    1,
)
# Compare-and-swap of the head, run with `execute_count`: exactly one row must move. (The
# Durable Object executor counts with `RETURNING 1`, as it has no `changes()` that survives
# across `exec` calls reliably; `sqlite3` reads the cursor's count, which spares RETURNING's
# ephemeral table on every commit.)
ADVANCE_HEAD = (
    "UPDATE projects SET head_seq = ? WHERE tenant_id = ? AND project_id = ? AND head_seq = ?"
)

# -- search (SRCH-4, SRCH-5) ------------------------------------------------------------------

# The index's layout is `aidememo.stores.sqlite.search_schema`'s. Lists travel as one JSON text
# read by `json_each` (a Durable Object binds at most 100 parameters); no float is ever parsed
# from JSON, so every double in the arithmetic is one the caller bound.
SEARCH_PROJECT = (
    "SELECT docs, terms, fts_key FROM fact_search_stats WHERE tenant_id = ? AND project_id = ?"
)
# The hits' fact bodies in hit order (NULL where there is none), in one statement: a search
# reads no fact on its own (on a Durable Object every statement crosses into JavaScript).
SEARCH_BODIES = (
    "SELECT r.body FROM json_each(?) AS h LEFT JOIN resources AS r "
    "ON r.tenant_id = ? AND r.project_id = ? AND r.kind = 'fact' AND r.resource_id = h.value "
    "ORDER BY h.key"
)
# A term's tokens and their document counts: one key range of the vocabulary, from
# `k<key>·<term>·` up to the character after the digits.
SEARCH_TOKENS = "SELECT term, doc FROM fact_search_vocab WHERE term >= ? AND term < ?"
# The rowid of the rank-th newest fact holding a term (its tokens OR'ed), rank from 1.
SEARCH_CUTOFF = (
    "SELECT rowid FROM fact_search_fts WHERE fact_search_fts MATCH ? "
    "ORDER BY rowid DESC LIMIT 1 OFFSET ?"
)
# One term's part is `w * tf / (tf + k + kb * dl)` truncated to an integer, exactly as
# `aidememo.domain.ranking.part` computes it; the parts sum as integers. `q` holds one
# [match, tf, weight] per token of a present term; each token is one FTS5 lookup from the
# window's first rowid. A query with one present term needs no grouping (a fact holds one token
# of a term). Parameters: the tokens' JSON, k, kb, the first rowid, [source_id], limit.
_TOKENS = (
    "WITH q (m, tf, w) AS MATERIALIZED (SELECT value ->> 0, value ->> 1, value ->> 2 "
    "FROM json_each(?)) "
)
_PART = "CAST(q.w * q.tf / (q.tf + ? + ? * d.n_terms) AS INTEGER)"
_FROM = (
    " FROM q CROSS JOIN fact_search_fts AS f JOIN fact_search_docs AS d ON d.id = f.rowid "
    "WHERE f.fact_search_fts MATCH q.m AND f.rowid >= ?"
)
_IN_SOURCE = " AND d.source_id = ?"
_GROUPED = f"{_TOKENS}SELECT d.fact_id, sum({_PART}) AS s{_FROM}"
_GROUPED_TAIL = " GROUP BY f.rowid ORDER BY s DESC, d.fact_id LIMIT ?"
_SINGLE = f"{_TOKENS}SELECT d.fact_id, {_PART} AS s{_FROM}"
_SINGLE_TAIL = " ORDER BY s DESC, d.fact_id LIMIT ?"
# (several terms, by source) -> statement
SEARCH_TOP = {
    (True, False): _GROUPED + _GROUPED_TAIL,
    (True, True): _GROUPED + _IN_SOURCE + _GROUPED_TAIL,
    (False, False): _SINGLE + _SINGLE_TAIL,
    (False, True): _SINGLE + _IN_SOURCE + _SINGLE_TAIL,
}


# Two present terms: the best of three short lists (`aidememo.domain.ranking`, two terms), so
# no candidate is grouped: `a` and `b` are each term's best facts by its part alone, `ab` the
# best facts holding both (one FTS5 `AND` per pair of the two terms' tokens). A fact in several
# lists keeps its largest score, which is its full one. Parameters: the JSON of a's tokens, of
# b's, of the pairs ([match, tf a, weight a, tf b, weight b]); (k, kb, first rowid, [source_id,]
# limit) for a and for b; (k, kb, k, kb, first rowid, [source_id,] limit) for ab; limit.
def _pair(source: bool) -> str:
    part = "CAST({w} * {tf} / ({tf} + ? + ? * d.n_terms) AS INTEGER)"
    within = (
        " FROM {q} CROSS JOIN fact_search_fts AS f JOIN fact_search_docs AS d ON d.id = f.rowid "
        "WHERE f.fact_search_fts MATCH {q}.m AND f.rowid >= ?" + (_IN_SOURCE if source else "")
    )
    alone = (
        "SELECT d.fact_id, "
        + part.format(w="{q}.w", tf="{q}.tf")
        + " AS s"
        + within
        + " ORDER BY s DESC, d.fact_id LIMIT ?"
    )
    both = (
        "SELECT d.fact_id, "
        + part.format(w="qab.wa", tf="qab.tfa")
        + " + "
        + part.format(w="qab.wb", tf="qab.tfb")
        + " AS s"
        + within.format(q="qab")
        + " ORDER BY s DESC, d.fact_id LIMIT ?"
    )
    lists = (
        "qa (m, tf, w) AS MATERIALIZED (SELECT value ->> 0, value ->> 1, value ->> 2 "
        "FROM json_each(?)), "
        "qb (m, tf, w) AS MATERIALIZED (SELECT value ->> 0, value ->> 1, value ->> 2 "
        "FROM json_each(?)), "
        "qab (m, tfa, wa, tfb, wb) AS MATERIALIZED (SELECT value ->> 0, value ->> 1, "
        "value ->> 2, value ->> 3, value ->> 4 FROM json_each(?)), "
    )
    return (
        f"WITH {lists}a AS ({alone.format(q='qa')}), b AS ({alone.format(q='qb')}), "
        f"ab AS ({both}) "
        "SELECT fact_id, max(s) AS s FROM "
        "(SELECT * FROM a UNION ALL SELECT * FROM b UNION ALL SELECT * FROM ab) "
        "GROUP BY fact_id ORDER BY s DESC, fact_id LIMIT ?"
    )


# (by source) -> statement
SEARCH_TOP_PAIR = {False: _pair(False), True: _pair(True)}


# Indexing one fact (a command's commit, an import): the old entry goes first, then the
# project's statistics move and hand out the fact's doc_seq (and, the first time, the
# project's key: the next free one).
SEARCH_OLD = (
    "SELECT doc_seq, terms FROM fact_search WHERE tenant_id = ? AND project_id = ? AND fact_id = ?"
)
# Parameters: tenant, project, the new length, then the deltas of docs and terms.
SEARCH_BUMP = (
    "INSERT INTO fact_search_stats (tenant_id, project_id, docs, terms, last_doc, fts_key) "
    "VALUES (?, ?, 1, ?, 1, (SELECT coalesce(max(fts_key), 0) + 1 FROM fact_search_stats)) "
    "ON CONFLICT (tenant_id, project_id) DO UPDATE SET "
    "docs = docs + ?, terms = terms + ?, last_doc = last_doc + 1 RETURNING last_doc, fts_key"
)
SEARCH_PUT = (
    "INSERT INTO fact_search (tenant_id, project_id, fact_id, source_id, doc_seq, n_terms, terms) "
    "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (tenant_id, project_id, fact_id) DO UPDATE SET "
    "source_id = excluded.source_id, doc_seq = excluded.doc_seq, n_terms = excluded.n_terms, "
    "terms = excluded.terms"
)
SEARCH_ADD_DOC = (
    "INSERT INTO fact_search_docs (id, fact_id, source_id, n_terms) VALUES (?, ?, ?, ?)"
)
SEARCH_ADD_TEXT = "INSERT INTO fact_search_text (id, t) VALUES (?, ?)"
SEARCH_ADD_TOKENS = "INSERT INTO fact_search_fts (rowid, t) VALUES (?, ?)"
# The FTS5 table forgets a row given the text it was indexed with (its content row's), before
# that row goes.
SEARCH_DROP_TOKENS = (
    "INSERT INTO fact_search_fts (fact_search_fts, rowid, t) "
    "SELECT 'delete', id, t FROM fact_search_text WHERE id = ?"
)
SEARCH_DROP_TEXT = "DELETE FROM fact_search_text WHERE id = ?"
SEARCH_DROP_DOC = "DELETE FROM fact_search_docs WHERE id = ?"

# -- session facts (READS-4) ---------------------------------------------------------------

# On `changes_fact_session_idx`: the index's predicate and expression, then seq in order.
SESSION_FACTS = (
    "SELECT seq, resource_id, revision, body FROM changes "
    f"WHERE tenant_id = ? AND project_id = ? AND kind = 'fact' AND {FACT_SESSION} = ? "
    "AND seq > ? ORDER BY seq LIMIT ?"
)

# -- the snapshot as of a sequence (SNAP-4) -------------------------------------------------

# Each resource at its last change up to the sequence, found through `changes_resource_idx`
# by a correlated subquery (SQLite runs joins as nested loops in the outer table's order, so
# the keyset range on the resources' primary key stops after `limit` rows); a resource first
# written later has no such change and drops out of the join. Parameters: at_seq, tenant,
# project, [kind, id,] limit.
_AT = (
    "SELECT c.kind, c.resource_id, c.revision, c.body FROM resources AS r "
    "JOIN changes AS c ON c.tenant_id = r.tenant_id AND c.project_id = r.project_id "
    "AND c.seq = (SELECT max(h.seq) FROM changes AS h WHERE h.tenant_id = r.tenant_id "
    "AND h.project_id = r.project_id AND h.kind = r.kind "
    "AND h.resource_id = r.resource_id AND h.seq <= ?) "
    "WHERE r.tenant_id = ? AND r.project_id = ? "
)
RESOURCES_AT = _AT + "ORDER BY r.kind, r.resource_id LIMIT ?"
RESOURCES_AT_AFTER = (
    _AT + "AND (r.kind, r.resource_id) > (?, ?) ORDER BY r.kind, r.resource_id LIMIT ?"
)
