"""The statements only the PostgreSQL store runs, and `DIALECT`, the shared ones in its style.

Placeholders are `%s` (DB-API `format` paramstyle), which psycopg 3 and pg8000 both accept,
so one text serves both drivers; the statements both SQL stores run alike are
`aidememo.stores.sql_common.statements`. No statement contains a literal percent sign. Every
statement is sent unprepared (psycopg `prepare_threshold=None`; pg8000 uses unnamed statements), so
nothing outlives a transaction behind a transaction-mode pool.
"""

from __future__ import annotations

import json
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
# Both timeouts, appended to a BEGIN sent as one simple query (psycopg); integers only.
SET_LOCAL_TIMEOUTS = "; SET LOCAL statement_timeout = {0}; SET LOCAL lock_timeout = {1}"
# SET LOCAL for both timeouts in one statement (set_config's third argument is is_local).
SET_TIMEOUTS = (
    "SELECT set_config('statement_timeout', %s, true), set_config('lock_timeout', %s, true)"
)

# -- the two server-side functions of a command ---------------------------------------------

BEGIN_COMMAND = "SELECT * FROM aidememo_begin_command(%s, %s, %s, %s, %s, %s, %s, %s)"
# The same for a cached caller (AUTH-7): a last column is 1 while the token binding still
# holds, else NULL. Parameters: digest, tenant, actor, then those of `BEGIN_COMMAND`.
BEGIN_COMMAND_TOKEN = (
    "SELECT f.*, (SELECT 1 FROM token_bindings AS b "
    "JOIN tenants AS t ON t.tenant_id = b.tenant_id "
    "JOIN actors AS a ON a.tenant_id = b.tenant_id AND a.actor_id = b.actor_id "
    "WHERE b.token_sha256 = %s AND b.active AND b.tenant_id = %s AND b.actor_id = %s) "
    "FROM aidememo_begin_command(%s, %s, %s, %s, %s, %s, %s, %s) AS f"
)
# The commit's notification rides in the same statement (no extra round trip); PostgreSQL
# delivers it to the channel's listeners when, and only if, the transaction commits (LIVE-9).
# It is sent only while a backend is registered as listening (`aidememo_listeners`): a
# notifying transaction holds the database's one notification lock until its commit is
# durable, which would make every notifying commit of the database wait for the one before.
COMMIT_CHANNEL = "aidememo_commits"
_LISTENED = "EXISTS (SELECT 1 FROM aidememo_listeners)"
COMMIT_MUTATION = (
    "SELECT aidememo_commit_mutation("
    "%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, "  # ledger rows
    "%s, %s, %s, %s, %s, %s, %s, "  # handoff index row (all NULL when absent)
    "%s, %s, %s), "  # search row (all NULL when absent)
    f"CASE WHEN {_LISTENED} THEN pg_notify('{COMMIT_CHANNEL}', %s) END"  # `commit_payload`
)
INDEX_FACTS = "SELECT aidememo_index_facts(%s, %s, %s, %s, %s)"


# A listener's registration (`origin.notify`), sent before its `LISTEN`: rows of backends that
# are gone (a process that died listening) are removed on the way.
REGISTER_LISTENER = (
    "WITH gone AS (DELETE FROM aidememo_listeners AS l WHERE NOT EXISTS "
    "(SELECT 1 FROM pg_stat_activity AS a WHERE a.pid = l.backend_pid)) "
    "INSERT INTO aidememo_listeners (backend_pid) VALUES (pg_backend_pid()) "
    "ON CONFLICT (backend_pid) DO UPDATE SET since = now()"
)
UNREGISTER_LISTENER = "DELETE FROM aidememo_listeners WHERE backend_pid = pg_backend_pid()"


def commit_payload(tenant_id: str, project_id: str, seq: int) -> str:
    """A commit notification's payload: JSON `[tenant_id, project_id, head_seq]`."""
    return json.dumps([tenant_id, project_id, seq], separators=(",", ":"))


def parse_commit_payload(payload: str) -> tuple[str, str, int] | None:
    """The tenant, project and head of a commit notification; None for any other payload."""
    try:
        tenant, project, seq = json.loads(payload)
    except (ValueError, TypeError):
        return None
    if isinstance(tenant, str) and isinstance(project, str) and type(seq) is int:
        return tenant, project, seq
    return None


_EXECUTE_RAW_CALL = (
    "aidememo_execute_raw(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
)

# -- the guarded write of a generic put or delete (`Store.execute_raw`) -----------------------

# Sent alone on an autocommit connection: the statement is the whole transaction; the function
# notifies its commit itself (LIVE-9). Parameters: the function's.
EXECUTE_RAW = f"SELECT * FROM {_EXECUTE_RAW_CALL}"
# The same for a caller from the origin's token cache (AUTH-7): the binding is checked first, in
# the same statement, and the write runs only when it holds. `OFFSET 0` keeps the subquery
# from being pulled up, so `tok.ok` is a one-time filter above the function's scan: a revoked
# token answers one row of NULLs and the function never runs. Parameters: digest, tenant and
# actor of the binding, then those of `EXECUTE_RAW`.
EXECUTE_RAW_TOKEN = (
    "SELECT r.* FROM (SELECT EXISTS (SELECT 1 FROM token_bindings AS b "
    "JOIN tenants AS t ON t.tenant_id = b.tenant_id "
    "JOIN actors AS a ON a.tenant_id = b.tenant_id AND a.actor_id = b.actor_id "
    "WHERE b.token_sha256 = %s AND b.active AND b.tenant_id = %s AND b.actor_id = %s) AS ok) "
    f"AS tok LEFT JOIN LATERAL (SELECT * FROM {_EXECUTE_RAW_CALL} WHERE tok.ok OFFSET 0) AS r "
    "ON true"
)
# A connection that answers this after a failed statement is alive (the error was the
# statement's); one that does not is discarded.
PING = "SELECT 1"

# -- search (SRCH-4..6) ---------------------------------------------------------------------

# The whole search in one statement (`search_schema.py`, schema versions 8 and 9): tenant, project,
# the terms space-separated (the tokenizer's terms hold no spaces), source_id, limit, window,
# then `ranking`'s constants k, k1 * b, k1 + 1 and the unit scale.
SEARCH = (
    "SELECT fact_ids, units, exhaustive, bodies "
    "FROM aidememo_search(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
)

# -- session facts (READS-4) ---------------------------------------------------------------

# On `changes_fact_session_idx`: the index's predicate and expression, then seq in order.
SESSION_FACTS = (
    "SELECT seq, resource_id, revision, body FROM changes "
    "WHERE tenant_id = %s AND project_id = %s AND kind = 'fact' "
    "AND aidememo_fact_session(body) = %s AND seq > %s ORDER BY seq LIMIT %s"
)

# -- the snapshot as of a sequence (SNAP-4) -------------------------------------------------

# Each resource at its last change up to the sequence: a LATERAL lookup per resource, one
# backward step on `changes_resource_idx`, so the plan is a nested loop in the resources'
# primary-key order that stops after `limit` rows whatever the table statistics say (a
# correlated join lets the planner hash the whole change log); a resource first written
# later has no such change and drops out. Parameters: at_seq, tenant, project, [kind, id,]
# limit.
_AT = (
    "SELECT r.kind, r.resource_id, c.revision, c.body FROM resources AS r "
    "CROSS JOIN LATERAL (SELECT h.revision, h.body FROM changes AS h "
    "WHERE h.tenant_id = r.tenant_id AND h.project_id = r.project_id AND h.kind = r.kind "
    "AND h.resource_id = r.resource_id AND h.seq <= %s ORDER BY h.seq DESC LIMIT 1) AS c "
    "WHERE r.tenant_id = %s AND r.project_id = %s "
)
RESOURCES_AT = _AT + "ORDER BY r.kind, r.resource_id LIMIT %s"
RESOURCES_AT_AFTER = (
    _AT + "AND (r.kind, r.resource_id) > (%s, %s) ORDER BY r.kind, r.resource_id LIMIT %s"
)
