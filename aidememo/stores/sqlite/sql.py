"""Every statement the SQLite store runs, as module constants.

Precomputed strings keep the hot path free of string building and let both executors reuse
prepared statements (the stdlib `sqlite3` statement cache is keyed by the SQL text).
Placeholders are positional `?`, which both `sqlite3` and Durable Object SQL accept.
"""

from __future__ import annotations

from aidememo.domain.visibility import PARTICIPANT_KINDS

# Kind names are identifiers (no quotes possible), so they can be SQL literals.
_PARTICIPANT_KINDS = ", ".join(f"'{kind}'" for kind in sorted(PARTICIPANT_KINDS))

# -- identity -------------------------------------------------------------------------------

GET_PROJECT = "SELECT project_epoch, head_seq FROM projects WHERE tenant_id = ? AND project_id = ?"
GET_ACTOR = "SELECT kind FROM actors WHERE tenant_id = ? AND actor_id = ?"
GET_MEMBERSHIP = (
    "SELECT role, status FROM memberships WHERE tenant_id = ? AND project_id = ? AND actor_id = ?"
)
GET_TOKEN = (
    "SELECT tenant_id, actor_id, active, created_at_ms FROM token_bindings WHERE token_sha256 = ?"
)
TENANT_EXISTS = "SELECT 1 FROM tenants WHERE tenant_id = ?"
# Authentication in one statement: an active binding whose tenant and actor both exist.
AUTHENTICATE_TOKEN = (
    "SELECT b.tenant_id, b.actor_id, b.created_at_ms FROM token_bindings AS b "
    "JOIN tenants AS t ON t.tenant_id = b.tenant_id "
    "JOIN actors AS a ON a.tenant_id = b.tenant_id AND a.actor_id = b.actor_id "
    "WHERE b.token_sha256 = ? AND b.active <> 0"
)
# The project and the caller's membership in one statement (no membership: NULL role).
GET_ACCESS = (
    "SELECT p.project_epoch, p.head_seq, m.role, m.status FROM projects AS p "
    "LEFT JOIN memberships AS m ON m.tenant_id = p.tenant_id "
    "AND m.project_id = p.project_id AND m.actor_id = ? "
    "WHERE p.tenant_id = ? AND p.project_id = ?"
)

# Inserts are upserts, like the reference store's: provisioning twice leaves one row.
INSERT_TENANT = (
    "INSERT INTO tenants (tenant_id, created_at_ms) VALUES (?, ?) "
    "ON CONFLICT (tenant_id) DO UPDATE SET created_at_ms = excluded.created_at_ms"
)
INSERT_PROJECT = (
    "INSERT INTO projects (tenant_id, project_id, project_epoch, head_seq, created_at_ms) "
    "VALUES (?, ?, ?, ?, ?) ON CONFLICT (tenant_id, project_id) DO UPDATE SET "
    "project_epoch = excluded.project_epoch, head_seq = excluded.head_seq"
)
INSERT_ACTOR = (
    "INSERT INTO actors (tenant_id, actor_id, kind, created_at_ms) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (tenant_id, actor_id) DO UPDATE SET kind = excluded.kind"
)
PUT_MEMBERSHIP = (
    "INSERT INTO memberships (tenant_id, project_id, actor_id, role, status, updated_at_ms) "
    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (tenant_id, project_id, actor_id) DO UPDATE SET "
    "role = excluded.role, status = excluded.status, updated_at_ms = excluded.updated_at_ms"
)
INSERT_TOKEN = (
    "INSERT INTO token_bindings (token_sha256, tenant_id, actor_id, active, created_at_ms) "
    "VALUES (?, ?, ?, ?, ?) ON CONFLICT (token_sha256) DO UPDATE SET "
    "tenant_id = excluded.tenant_id, actor_id = excluded.actor_id, active = excluded.active, "
    "created_at_ms = excluded.created_at_ms"
)
SET_TOKEN_ACTIVE = "UPDATE token_bindings SET active = ? WHERE token_sha256 = ?"

# -- ledger reads ---------------------------------------------------------------------------

GET_RESOURCE = (
    "SELECT revision, body FROM resources "
    "WHERE tenant_id = ? AND project_id = ? AND kind = ? AND resource_id = ?"
)
GET_RECEIPT = (
    "SELECT fingerprint, actor_id, project_seq, kind, resource_id, revision, committed_at_ms "
    "FROM receipts WHERE tenant_id = ? AND project_id = ? AND command_id = ?"
)
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
LIST_CHANGES = (
    "SELECT seq, project_epoch, kind, resource_id, op, revision, actor_id, committed_at_ms, body "
    "FROM changes WHERE tenant_id = ? AND project_id = ? AND seq > ? ORDER BY seq LIMIT ?"
)
# The metadata feed: bodies only where visibility needs them, so large bodies (overflow
# pages) are never read for it.
LIST_CHANGE_HEADS = (
    "SELECT seq, project_epoch, kind, resource_id, op, revision, actor_id, committed_at_ms, "
    f"CASE WHEN kind IN ({_PARTICIPANT_KINDS}) THEN body END "
    "FROM changes WHERE tenant_id = ? AND project_id = ? AND seq > ? ORDER BY seq LIMIT ?"
)
LIST_RESOURCES = (
    "SELECT kind, resource_id, revision, body FROM resources "
    "WHERE tenant_id = ? AND project_id = ? ORDER BY kind, resource_id LIMIT ?"
)
# Keyset paging of the resources: the next page starts after the last (kind, id) seen; the
# row value comparison is a range on the primary key index.
LIST_RESOURCES_AFTER = (
    "SELECT kind, resource_id, revision, body FROM resources "
    "WHERE tenant_id = ? AND project_id = ? AND (kind, resource_id) > (?, ?) "
    "ORDER BY kind, resource_id LIMIT ?"
)
# A negative LIMIT is no limit in SQLite.
LIST_AUDIT = (
    "SELECT project_seq, command_id, operation, kind, resource_id, actor_id, committed_at_ms "
    "FROM audit WHERE tenant_id = ? AND project_id = ? AND project_seq > ? "
    "ORDER BY project_seq LIMIT ?"
)

# -- the commit -----------------------------------------------------------------------------

# Compare-and-swap of the head, run with `execute_count`: exactly one row must move. (The
# Durable Object executor counts with `RETURNING 1`, as it has no `changes()` that survives
# across `exec` calls reliably; `sqlite3` reads the cursor's count, which spares RETURNING's
# ephemeral table on every commit.)
ADVANCE_HEAD = (
    "UPDATE projects SET head_seq = ? WHERE tenant_id = ? AND project_id = ? AND head_seq = ?"
)
UPSERT_RESOURCE = (
    "INSERT INTO resources (tenant_id, project_id, kind, resource_id, revision, body) "
    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (tenant_id, project_id, kind, resource_id) "
    "DO UPDATE SET revision = excluded.revision, body = excluded.body"
)
INSERT_CHANGE = (
    "INSERT INTO changes (tenant_id, project_id, seq, project_epoch, kind, resource_id, op, "
    "revision, actor_id, committed_at_ms, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
INSERT_AUDIT = (
    "INSERT INTO audit (tenant_id, project_id, project_seq, command_id, operation, kind, "
    "resource_id, actor_id, committed_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
INSERT_RECEIPT = (
    "INSERT INTO receipts (tenant_id, project_id, command_id, fingerprint, actor_id, "
    "project_seq, kind, resource_id, revision, committed_at_ms) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
UPSERT_HANDOFF = (
    "INSERT INTO handoff_index (tenant_id, project_id, handoff_id, from_actor, to_actor, "
    "source_id, status, revision, updated_seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (tenant_id, project_id, handoff_id) DO UPDATE SET "
    "from_actor = excluded.from_actor, to_actor = excluded.to_actor, "
    "source_id = excluded.source_id, status = excluded.status, "
    "revision = excluded.revision, updated_seq = excluded.updated_seq"
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

# -- mailbox --------------------------------------------------------------------------------

_MAILBOX_COLUMNS = (
    "SELECT handoff_id, from_actor, to_actor, source_id, status, revision, updated_seq "
    "FROM handoff_index WHERE tenant_id = ? AND project_id = ? AND "
)


def mailbox_sql(inbox: bool, by_source: bool, include_completed: bool, paged: bool) -> str:
    """One of sixteen fixed mailbox queries; each uses the inbox or outbox index directly.

    Parameters bind in this order: tenant, project, actor, [source], [before_seq], limit.
    """
    sql = _MAILBOX_COLUMNS + ("to_actor = ?" if inbox else "from_actor = ?")
    if by_source:
        sql += " AND source_id = ?"
    if not include_completed:
        sql += " AND status <> 'completed'"
    if paged:
        sql += " AND updated_seq < ?"
    return sql + " ORDER BY updated_seq DESC LIMIT ?"


MAILBOX = {
    (inbox, by_source, completed, paged): mailbox_sql(inbox, by_source, completed, paged)
    for inbox in (True, False)
    for by_source in (True, False)
    for completed in (True, False)
    for paged in (True, False)
}
