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

# -- search ---------------------------------------------------------------------------------

# The upsert returns the fact's stable FTS rowid whether the key is new or not.
SEARCH_KEY = (
    "INSERT INTO fact_search_keys (tenant_id, project_id, fact_id) VALUES (?, ?, ?) "
    "ON CONFLICT (tenant_id, project_id, fact_id) DO UPDATE SET fact_id = excluded.fact_id "
    "RETURNING doc_rowid"
)
SEARCH_DELETE = "DELETE FROM fact_search WHERE rowid = ?"
SEARCH_INSERT = (
    "INSERT INTO fact_search (rowid, terms, tenant_id, project_id, fact_id, source_id) "
    "VALUES (?, ?, ?, ?, ?, ?)"
)
_SEARCH_HEAD = (
    "SELECT fact_id, bm25(fact_search) AS score FROM fact_search "
    "WHERE fact_search MATCH ? AND tenant_id = ? AND project_id = ?"
)
_SEARCH_TAIL = " ORDER BY score, fact_id LIMIT ?"
SEARCH = _SEARCH_HEAD + _SEARCH_TAIL
SEARCH_IN_SOURCE = _SEARCH_HEAD + " AND source_id = ?" + _SEARCH_TAIL

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
