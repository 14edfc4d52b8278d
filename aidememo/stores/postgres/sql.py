"""Every statement the PostgreSQL store runs, as module constants.

Placeholders are `%s` (DB-API `format` paramstyle), which psycopg 3 and pg8000 both accept,
so one text serves both drivers. No statement contains a literal percent sign. Every statement
is sent unprepared (psycopg `prepare_threshold=None`; pg8000 uses unnamed statements), so
nothing outlives a transaction behind a transaction-mode pool.
"""

from __future__ import annotations

from aidememo.domain.model import ChangeOp
from aidememo.domain.visibility import PARTICIPANT_KINDS

# Kind names are identifiers (no quotes possible), so they can be SQL literals.
_PARTICIPANT_KINDS = ", ".join(f"'{kind}'" for kind in sorted(PARTICIPANT_KINDS))

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
INDEX_FACT = "SELECT aidememo_index_fact(%s, %s, %s, %s, %s)"

# -- a generic put or delete in one round trip (CAP_RAW_FAST_PATH) ---------------------------

# Sent alone on an autocommit connection: the statement is the whole transaction.
EXECUTE_RAW = (
    "SELECT * FROM aidememo_execute_raw(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
)
# A connection that answers this after a failed statement is alive (the error was the
# statement's); one that does not is discarded.
PING = "SELECT 1"

# -- identity -------------------------------------------------------------------------------

GET_PROJECT = (
    "SELECT project_epoch, head_seq FROM projects WHERE tenant_id = %s AND project_id = %s"
)
GET_ACTOR = "SELECT kind FROM actors WHERE tenant_id = %s AND actor_id = %s"
GET_MEMBERSHIP = (
    "SELECT role, status FROM memberships "
    "WHERE tenant_id = %s AND project_id = %s AND actor_id = %s"
)
GET_TOKEN = (
    "SELECT tenant_id, actor_id, active, created_at_ms FROM token_bindings WHERE token_sha256 = %s"
)
TENANT_EXISTS = "SELECT 1 FROM tenants WHERE tenant_id = %s"
# Authentication in one round trip: an active binding whose tenant and actor both exist.
AUTHENTICATE_TOKEN = (
    "SELECT b.tenant_id, b.actor_id, b.created_at_ms FROM token_bindings AS b "
    "JOIN tenants AS t ON t.tenant_id = b.tenant_id "
    "JOIN actors AS a ON a.tenant_id = b.tenant_id AND a.actor_id = b.actor_id "
    "WHERE b.token_sha256 = %s AND b.active"
)
# The project and the caller's membership in one round trip (no membership: NULL role).
GET_ACCESS = (
    "SELECT p.project_epoch, p.head_seq, m.role, m.status FROM projects AS p "
    "LEFT JOIN memberships AS m ON m.tenant_id = p.tenant_id "
    "AND m.project_id = p.project_id AND m.actor_id = %s "
    "WHERE p.tenant_id = %s AND p.project_id = %s"
)

# Inserts are upserts, like the reference store's: provisioning twice leaves one row.
INSERT_TENANT = (
    "INSERT INTO tenants (tenant_id, created_at_ms) VALUES (%s, %s) "
    "ON CONFLICT (tenant_id) DO UPDATE SET created_at_ms = excluded.created_at_ms"
)
INSERT_PROJECT = (
    "INSERT INTO projects (tenant_id, project_id, project_epoch, head_seq, created_at_ms) "
    "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (tenant_id, project_id) DO UPDATE SET "
    "project_epoch = excluded.project_epoch, head_seq = excluded.head_seq"
)
INSERT_ACTOR = (
    "INSERT INTO actors (tenant_id, actor_id, kind, created_at_ms) VALUES (%s, %s, %s, %s) "
    "ON CONFLICT (tenant_id, actor_id) DO UPDATE SET kind = excluded.kind"
)
PUT_MEMBERSHIP = (
    "INSERT INTO memberships (tenant_id, project_id, actor_id, role, status, updated_at_ms) "
    "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (tenant_id, project_id, actor_id) DO UPDATE "
    "SET role = excluded.role, status = excluded.status, updated_at_ms = excluded.updated_at_ms"
)
INSERT_TOKEN = (
    "INSERT INTO token_bindings (token_sha256, tenant_id, actor_id, active, created_at_ms) "
    "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (token_sha256) DO UPDATE SET "
    "tenant_id = excluded.tenant_id, actor_id = excluded.actor_id, active = excluded.active, "
    "created_at_ms = excluded.created_at_ms"
)
SET_TOKEN_ACTIVE = "UPDATE token_bindings SET active = %s WHERE token_sha256 = %s"

# -- ledger reads ---------------------------------------------------------------------------

GET_RESOURCE = (
    "SELECT revision, body FROM resources "
    "WHERE tenant_id = %s AND project_id = %s AND kind = %s AND resource_id = %s"
)
GET_RECEIPT = (
    "SELECT fingerprint, actor_id, project_seq, kind, resource_id, revision, committed_at_ms "
    "FROM receipts WHERE tenant_id = %s AND project_id = %s AND command_id = %s"
)
LIST_CHANGES = (
    "SELECT seq, project_epoch, kind, resource_id, op, revision, actor_id, committed_at_ms, body "
    "FROM changes WHERE tenant_id = %s AND project_id = %s AND seq > %s ORDER BY seq LIMIT %s"
)
# The metadata feed: bodies only where visibility needs them (TOASTed bodies stay unread).
LIST_CHANGE_HEADS = (
    "SELECT seq, project_epoch, kind, resource_id, op, revision, actor_id, committed_at_ms, "
    f"CASE WHEN kind IN ({_PARTICIPANT_KINDS}) THEN body END "
    "FROM changes WHERE tenant_id = %s AND project_id = %s AND seq > %s ORDER BY seq LIMIT %s"
)
LIST_RESOURCES = (
    "SELECT kind, resource_id, revision, body FROM resources "
    "WHERE tenant_id = %s AND project_id = %s ORDER BY kind, resource_id LIMIT %s"
)
# Keyset paging of the resources: a row value range on the primary key index.
LIST_RESOURCES_AFTER = (
    "SELECT kind, resource_id, revision, body FROM resources "
    "WHERE tenant_id = %s AND project_id = %s AND (kind, resource_id) > (%s, %s) "
    "ORDER BY kind, resource_id LIMIT %s"
)
# LIMIT NULL is no limit.
LIST_AUDIT = (
    "SELECT project_seq, command_id, operation, kind, resource_id, actor_id, committed_at_ms "
    "FROM audit WHERE tenant_id = %s AND project_id = %s AND project_seq > %s "
    "ORDER BY project_seq LIMIT %s"
)

# -- rows written one by one (imports; a command writes them in aidememo_commit_mutation) ----

UPSERT_RESOURCE = (
    "INSERT INTO resources (tenant_id, project_id, kind, resource_id, revision, body) "
    "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (tenant_id, project_id, kind, resource_id) "
    "DO UPDATE SET revision = excluded.revision, body = excluded.body"
)
INSERT_CHANGE = (
    "INSERT INTO changes (tenant_id, project_id, seq, project_epoch, kind, resource_id, op, "
    "revision, actor_id, committed_at_ms, body) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
)
INSERT_AUDIT = (
    "INSERT INTO audit (tenant_id, project_id, project_seq, command_id, operation, kind, "
    "resource_id, actor_id, committed_at_ms) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)"
)
INSERT_RECEIPT = (
    "INSERT INTO receipts (tenant_id, project_id, command_id, fingerprint, actor_id, "
    "project_seq, kind, resource_id, revision, committed_at_ms) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
)
UPSERT_HANDOFF = (
    "INSERT INTO handoff_index (tenant_id, project_id, handoff_id, from_actor, to_actor, "
    "source_id, status, revision, updated_seq) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) "
    "ON CONFLICT (tenant_id, project_id, handoff_id) DO UPDATE SET "
    "from_actor = excluded.from_actor, to_actor = excluded.to_actor, "
    "source_id = excluded.source_id, status = excluded.status, "
    "revision = excluded.revision, updated_seq = excluded.updated_seq"
)

# -- search ---------------------------------------------------------------------------------

# BM25 exactly as SQLite FTS5 and the reference store compute it (k1 = 1.2, b = 0.75,
# idf = max(ln((N - n + 0.5) / (n + 0.5)), 1e-6)), with N and the average length taken over
# the project's facts (kept in `projects.search_docs/search_terms`) and n over the facts
# matching each term; the tf of a term is its count in the stored term array. The arithmetic
# is written in the reference store's order so equal inputs give equal doubles.
# Parameters: terms (space-separated), tsquery, tenant, project, tenant, project, source_id,
# source_id, limit.
SEARCH = """
WITH q AS (
    SELECT t AS term FROM unnest(string_to_array(%s, ' ')) AS t
), m AS (
    SELECT fact_id, source_id, terms, n_terms FROM fact_search
    WHERE doc @@ %s::tsquery AND tenant_id = %s AND project_id = %s
), stats AS (
    SELECT search_docs::float8 AS n, search_terms::float8 / search_docs::float8 AS avgdl
    FROM projects WHERE tenant_id = %s AND project_id = %s AND search_docs > 0
), tf AS (
    SELECT m.fact_id, m.source_id, m.n_terms, q.term,
           cardinality(array_positions(m.terms, q.term))::float8 AS tf
    FROM m CROSS JOIN q
), df AS (
    SELECT term, count(*)::float8 AS df FROM tf WHERE tf > 0 GROUP BY term
)
SELECT tf.fact_id,
       sum(greatest(ln((stats.n - df.df + 0.5::float8) / (df.df + 0.5::float8)), 1e-6::float8)
           * tf.tf * 2.2::float8
           / (tf.tf + 1.2::float8 * (1::float8 - 0.75::float8
                                     + 0.75::float8 * tf.n_terms / stats.avgdl))) AS score
FROM tf JOIN df ON df.term = tf.term CROSS JOIN stats
WHERE tf.tf > 0 AND (%s::text IS NULL OR tf.source_id = %s::text)
GROUP BY tf.fact_id
ORDER BY score DESC, tf.fact_id
LIMIT %s
"""

# -- mailbox --------------------------------------------------------------------------------

_MAILBOX_COLUMNS = (
    "SELECT handoff_id, from_actor, to_actor, source_id, status, revision, updated_seq "
    "FROM handoff_index WHERE tenant_id = %s AND project_id = %s AND "
)


def mailbox_sql(inbox: bool, by_source: bool, include_completed: bool, paged: bool) -> str:
    """One of sixteen fixed mailbox queries; each uses the inbox or outbox index directly.

    Parameters bind in this order: tenant, project, actor, [source], [before_seq], limit.
    """
    sql = _MAILBOX_COLUMNS + ("to_actor = %s" if inbox else "from_actor = %s")
    if by_source:
        sql += " AND source_id = %s"
    if not include_completed:
        sql += " AND status <> 'completed'"
    if paged:
        sql += " AND updated_seq < %s"
    return sql + " ORDER BY updated_seq DESC LIMIT %s"


MAILBOX = {
    (inbox, by_source, completed, paged): mailbox_sql(inbox, by_source, completed, paged)
    for inbox in (True, False)
    for by_source in (True, False)
    for completed in (True, False)
    for paged in (True, False)
}

OPS = {op.value: op for op in ChangeOp}
