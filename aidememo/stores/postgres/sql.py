"""The statements only the PostgreSQL store runs, and `DIALECT`, the shared ones in its style.

Placeholders are `%s` (DB-API `format` paramstyle), which psycopg 3 and pg8000 both accept,
so one text serves both drivers; the statements both SQL stores run alike are
`aidememo.stores.sql_common.statements`. No statement contains a literal percent sign. Every
statement is sent unprepared (psycopg `prepare_threshold=None`; pg8000 uses unnamed statements), so
nothing outlives a transaction behind a transaction-mode pool.
"""

from __future__ import annotations

from typing import Any

from aidememo.stores.sql_common.dialect import Dialect


def blob(value: Any) -> bytes | None:
    """A BYTEA value as `bytes`: pg8000 returns bytes, psycopg's binary loaders may return a
    memoryview, which is copied."""
    if value is None or isinstance(value, bytes):
        return value
    return bytes(value)


DIALECT = Dialect("postgres", "%s", flag=bool, blob=blob, no_limit=None)
"""Booleans bind as `boolean`; LIMIT NULL is no limit."""

# -- transaction framing --------------------------------------------------------------------

BEGIN_WRITE = "BEGIN ISOLATION LEVEL READ COMMITTED"
BEGIN_READ = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
COMMIT = "COMMIT"
ROLLBACK = "ROLLBACK"
# SET LOCAL for both timeouts in one statement (set_config's third argument is is_local).
SET_TIMEOUTS = (
    "SELECT set_config('statement_timeout', %s, true), set_config('lock_timeout', %s, true)"
)

# -- the two server-side functions of a command ---------------------------------------------

BEGIN_COMMAND = "SELECT * FROM aidememo_begin_command(%s, %s, %s, %s, %s, %s, %s, %s)"
COMMIT_MUTATION = (
    "SELECT aidememo_commit_mutation("
    "%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, "  # ledger rows
    "%s, %s, %s, %s, %s, %s, %s, "  # handoff index row (all NULL when absent)
    "%s, %s, %s)"  # search row (all NULL when absent)
)
INDEX_FACTS = "SELECT aidememo_index_facts(%s, %s, %s, %s, %s)"

# -- a generic put or delete in one round trip (CAP_RAW_FAST_PATH) ---------------------------

# Sent alone on an autocommit connection: the statement is the whole transaction.
EXECUTE_RAW = (
    "SELECT * FROM aidememo_execute_raw(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
)
# A connection that answers this after a failed statement is alive (the error was the
# statement's); one that does not is discarded.
PING = "SELECT 1"

# -- search (SRCH-4, SRCH-5) ------------------------------------------------------------------

# The project's statistics and the df of each query term, in one round trip; the terms travel
# space-separated (the tokenizer's terms hold no spaces). Parameters: tenant, project, tenant,
# project, terms.
SEARCH_STATS = """
SELECT '' AS term, docs, terms FROM fact_search_stats WHERE tenant_id = %s AND project_id = %s
UNION ALL
SELECT term, df, 0 FROM fact_search_terms
WHERE tenant_id = %s AND project_id = %s AND term = ANY (string_to_array(%s, ' '))
"""
SEARCH_CUTOFF = (
    "SELECT doc_seq FROM fact_search_postings "
    "WHERE tenant_id = %s AND project_id = %s AND term = %s "
    "ORDER BY doc_seq DESC LIMIT 1 OFFSET %s"
)
# One term's part is `w * tf / (tf + k + kb * dl)` truncated to an integer, exactly as
# `aidememo.domain.ranking.part` computes it (a bigint product, one float8 division); the
# parts sum as integers. Weights travel as decimal integers, k and kb as float8 parameters. A
# query with one present term needs no grouping (a fact holds a term once).
# Parameters: k, kb, terms, weights, tenant, project, min doc_seq, source_id, source_id, limit.
_PART = """trunc((w.weight * p.tf)::float8
                 / (p.tf + %s::float8 + %s::float8 * p.n_terms))::bigint"""
_FROM = """
FROM unnest(string_to_array(%s, ' '), string_to_array(%s, ' ')::bigint[]) AS w (term, weight)
JOIN fact_search_postings AS p
  ON p.tenant_id = %s AND p.project_id = %s AND p.term = w.term AND p.doc_seq >= %s
WHERE (%s::text IS NULL OR p.source_id = %s::text)
"""
SEARCH_TOP = {
    True: f"SELECT p.fact_id, sum({_PART})::bigint AS s{_FROM}"
    "GROUP BY p.fact_id ORDER BY s DESC, p.fact_id LIMIT %s",
    False: f"SELECT p.fact_id, {_PART} AS s{_FROM}ORDER BY s DESC, p.fact_id LIMIT %s",
}
"""(several terms) -> statement."""
