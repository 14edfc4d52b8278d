"""The statements the SQLite and PostgreSQL stores share, written once.

Each is the same SQL in both dialects but for its placeholders, so it is written here with
`?` and `SharedSql(placeholder)` renders every one for a dialect once, when the dialect's
module is imported (the hot path builds no strings, and the stdlib `sqlite3` statement cache,
keyed by the text, keeps working). No statement contains a `?` other than a placeholder, nor a
literal percent sign (PostgreSQL's `%s` style would read it as one). What differs between the
dialects (a command's begin and commit, search, the schema, tenant deletion) stays in
`sqlite/sql.py` and `postgres/sql.py`.
"""

from __future__ import annotations

from aidememo.domain.visibility import PARTICIPANT_KINDS

# Kind names are identifiers (no quotes possible), so they can be SQL literals.
_PARTICIPANT_KINDS = ", ".join(f"'{kind}'" for kind in sorted(PARTICIPANT_KINDS))

# Every table a tenant owns but the search rows (which each dialect keeps its own way),
# children first, so foreign keys hold at every step of a deletion that follows this order.
TENANT_TABLES_BUT_SEARCH = (
    "artifact_reservations",
    "handoff_index",
    "audit",
    "changes",
    "receipts",
    "resources",
    "memberships",
    "token_bindings",
    "projects",
    "actors",
    "tenants",
)

# The pieces of the access reads (AUTH-3..5, AUTH-7, READS-5): a token binding's check, the
# caller's membership beside the project row, and one resource beside it.
_TOKEN_VALID = (
    "SELECT 1 FROM token_bindings AS b "
    "JOIN tenants AS t ON t.tenant_id = b.tenant_id "
    "JOIN actors AS a ON a.tenant_id = b.tenant_id AND a.actor_id = b.actor_id "
    "WHERE b.token_sha256 = ? AND b.active AND b.tenant_id = ? AND b.actor_id = ?"
)
_MEMBERSHIP_JOIN = (
    "LEFT JOIN memberships AS m ON m.tenant_id = p.tenant_id "
    "AND m.project_id = p.project_id AND m.actor_id = ? "
)
# Always one row, the project's columns NULL when there is no such project.
_ACCESS_FROM_ONE = (
    "FROM (SELECT 1) AS one LEFT JOIN projects AS p ON p.tenant_id = ? AND p.project_id = ? "
    + _MEMBERSHIP_JOIN
)
_RESOURCE_JOIN = (
    "LEFT JOIN resources AS r ON r.tenant_id = p.tenant_id "
    "AND r.project_id = p.project_id AND r.kind = ? AND r.resource_id = ? "
)

MailboxKey = tuple[bool, bool, bool, bool]
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


_MAILBOX = {
    (inbox, by_source, completed, paged): mailbox_sql(inbox, by_source, completed, paged)
    for inbox in (True, False)
    for by_source in (True, False)
    for completed in (True, False)
    for paged in (True, False)
}


class SharedSql:
    """The shared statements as attributes; an instance holds them in one placeholder style.

    The class attributes are the `?` templates (the mailbox's are `_MAILBOX`), so
    `SharedSql("?")` holds them as they are and `SharedSql("%s")` the PostgreSQL text.
    """

    # -- identity ---------------------------------------------------------------------------

    GET_PROJECT = (
        "SELECT project_epoch, head_seq FROM projects WHERE tenant_id = ? AND project_id = ?"
    )
    GET_ACTOR = "SELECT kind FROM actors WHERE tenant_id = ? AND actor_id = ?"
    GET_MEMBERSHIP = (
        "SELECT role, status FROM memberships "
        "WHERE tenant_id = ? AND project_id = ? AND actor_id = ?"
    )
    GET_TOKEN = (
        "SELECT tenant_id, actor_id, active, created_at_ms FROM token_bindings "
        "WHERE token_sha256 = ?"
    )
    TENANT_EXISTS = "SELECT 1 FROM tenants WHERE tenant_id = ?"
    # Authentication in one statement: an active binding whose tenant and actor both exist.
    # `active` is a boolean in PostgreSQL and 0 or 1 in SQLite: a condition in both.
    AUTHENTICATE_TOKEN = (
        "SELECT b.tenant_id, b.actor_id, b.created_at_ms FROM token_bindings AS b "
        "JOIN tenants AS t ON t.tenant_id = b.tenant_id "
        "JOIN actors AS a ON a.tenant_id = b.tenant_id AND a.actor_id = b.actor_id "
        "WHERE b.token_sha256 = ? AND b.active"
    )
    # A cached caller's binding, re-checked inside the transaction it guards (AUTH-7).
    TOKEN_VALID = _TOKEN_VALID
    # The same for a cached caller (AUTH-7): the binding's check is the fifth column (1, or
    # NULL when it no longer holds), and there is always one row.
    GET_ACCESS_TOKEN = (
        f"SELECT p.project_epoch, p.head_seq, m.role, m.status, ({_TOKEN_VALID}) {_ACCESS_FROM_ONE}"
    )
    # The project and the caller's membership in one statement (no membership: NULL role).
    GET_ACCESS = (
        "SELECT p.project_epoch, p.head_seq, m.role, m.status FROM projects AS p "
        f"{_MEMBERSHIP_JOIN}WHERE p.tenant_id = ? AND p.project_id = ?"
    )
    # The same with one resource's revision and body (a resource read's whole read, READS-5):
    # parameters actor, kind, resource id, tenant, project; with the token check first.
    GET_ACCESS_RESOURCE = (
        "SELECT p.project_epoch, p.head_seq, m.role, m.status, r.revision, r.body "
        f"FROM projects AS p {_MEMBERSHIP_JOIN}{_RESOURCE_JOIN}"
        "WHERE p.tenant_id = ? AND p.project_id = ?"
    )
    GET_ACCESS_RESOURCE_TOKEN = (
        "SELECT p.project_epoch, p.head_seq, m.role, m.status, r.revision, r.body, "
        f"({_TOKEN_VALID}) {_ACCESS_FROM_ONE}{_RESOURCE_JOIN}"
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

    # -- ledger reads -----------------------------------------------------------------------

    GET_RESOURCE = (
        "SELECT revision, body FROM resources "
        "WHERE tenant_id = ? AND project_id = ? AND kind = ? AND resource_id = ?"
    )
    GET_RECEIPT = (
        "SELECT fingerprint, actor_id, project_seq, kind, resource_id, revision, committed_at_ms "
        "FROM receipts WHERE tenant_id = ? AND project_id = ? AND command_id = ?"
    )
    LIST_CHANGES = (
        "SELECT seq, project_epoch, kind, resource_id, op, revision, actor_id, committed_at_ms, "
        "body FROM changes WHERE tenant_id = ? AND project_id = ? AND seq > ? ORDER BY seq "
        "LIMIT ?"
    )
    # The metadata feed: bodies only where visibility needs them, so large bodies (SQLite
    # overflow pages, TOASTed PostgreSQL values) are never read for it.
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
    GET_STORE_KEY = "SELECT key FROM aidememo_store_keys WHERE name = ?"
    # The dialect's `no_limit` (SQLite -1, PostgreSQL NULL) binds the LIMIT of a whole read.
    LIST_AUDIT = (
        "SELECT project_seq, command_id, operation, kind, resource_id, actor_id, committed_at_ms "
        "FROM audit WHERE tenant_id = ? AND project_id = ? AND project_seq > ? "
        "ORDER BY project_seq LIMIT ?"
    )

    # -- rows written one by one (every SQLite commit; PostgreSQL imports) -----------------

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

    # -- whole-tenant reads (export, ARC-*) ------------------------------------------------

    LIST_PROJECTS = (
        "SELECT project_id, project_epoch, head_seq FROM projects WHERE tenant_id = ? "
        "ORDER BY project_id"
    )
    LIST_ACTORS = "SELECT actor_id, kind FROM actors WHERE tenant_id = ? ORDER BY actor_id"
    LIST_MEMBERSHIPS = (
        "SELECT project_id, actor_id, role, status FROM memberships WHERE tenant_id = ? "
        "ORDER BY project_id, actor_id"
    )
    LIST_SESSIONS = (
        "SELECT project_seq, resource_id FROM receipts WHERE tenant_id = ? AND project_id = ? "
        "AND kind = 'session' AND project_seq < ? ORDER BY project_seq DESC LIMIT ?"
    )
    LIST_MEMBERS = (
        "SELECT m.actor_id, a.kind, m.role, m.status FROM memberships AS m "
        "JOIN actors AS a ON a.tenant_id = m.tenant_id AND a.actor_id = m.actor_id "
        "WHERE m.tenant_id = ? AND m.project_id = ? ORDER BY m.actor_id"
    )
    LIST_TOKENS = (
        "SELECT token_sha256, actor_id, active, created_at_ms FROM token_bindings "
        "WHERE tenant_id = ? ORDER BY token_sha256"
    )
    LIST_RECEIPTS = (
        "SELECT command_id, fingerprint, actor_id, project_seq, kind, resource_id, revision, "
        "committed_at_ms FROM receipts WHERE tenant_id = ? AND project_id = ? "
        "AND project_seq > ? ORDER BY project_seq LIMIT ?"
    )

    # -- an import's staged pages (ARC-9), outside the tenant data ------------------------

    STAGE_IMPORT_PAGE = (
        "INSERT INTO aidememo_import_staging (import_id, project_id, seq, created_at_ms, body) "
        "VALUES (?, ?, ?, ?, ?)"
    )
    STAGED_IMPORT_PAGE = (
        "SELECT body FROM aidememo_import_staging "
        "WHERE import_id = ? AND project_id = ? AND seq = ?"
    )
    DROP_IMPORT_STAGE = "DELETE FROM aidememo_import_staging WHERE import_id = ?"
    DROP_IMPORT_STAGES_BEFORE = "DELETE FROM aidememo_import_staging WHERE created_at_ms <= ?"

    # -- mailbox ----------------------------------------------------------------------------

    MAILBOX: dict[MailboxKey, str]
    """The sixteen mailbox queries by (inbox, by source, include completed, paged)."""

    def __init__(self, placeholder: str) -> None:
        for name, template in vars(SharedSql).items():
            if isinstance(template, str) and name.isupper():
                setattr(self, name, template.replace("?", placeholder))
        self.MAILBOX = {
            key: template.replace("?", placeholder) for key, template in _MAILBOX.items()
        }
