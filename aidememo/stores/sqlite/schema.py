"""The canonical SQLite schema and its migrations, shared by the file store and Durable Objects.

The version lives in the `aidememo_schema` table, not in `PRAGMA user_version`: Durable Object
SQL refuses that pragma with SQLITE_AUTH (STORE-6). Every migration is a tuple of
statements applied, with the version bump, inside one write transaction, so a crash leaves
either the old schema or the new one.

Version 1 creates the whole layout (nothing was released before it). All tables are STRICT
and keyed by (tenant_id, project_id) first. Bodies are the canonical JSON bytes as committed
(BLOB) and are returned unchanged.

Version 2 adds `aidememo_import_staging`, where an import's verified rows wait, page by page,
until the whole archive verified (SPEC.md ARC-9).

Version 3 adds the session list's partial receipts index (READS-3). Version 4 adds the
session facts index (READS-4), the change log's index by resource (the paged snapshot's
reconstruction, SNAP-4) and `aidememo_store_keys` with the page token key (SNAP-3); the
indexes are built from the rows already there, in the migration's transaction.
Version 5 replaces the FTS5 index (one table for every tenant, whose BM25 statistics spanned
them all) with the project-scoped index of `aidememo.stores.sqlite.search` (SRCH-4, SRCH-5),
rebuilt from the FTS5 rows inside the migration's transaction.
Version 6 adds the artifact catalog (`aidememo.stores.sqlite.artifact_schema`, SPEC.md ART-*).
Version 7 moves the lexical index onto FTS5 (`aidememo.stores.sqlite.search_schema`).
Version 8 adds the derived semantic index (`aidememo.stores.sqlite.semantic_schema`, SEM-6).
"""

from __future__ import annotations

from aidememo.domain.errors import ErrorCode, fail
from aidememo.domain.ranking import MAX_TERM_BYTES
from aidememo.stores.sqlite.artifact_schema import V6
from aidememo.stores.sqlite.executor import SqlExecutor
from aidememo.stores.sqlite.search_schema import V7
from aidememo.stores.sqlite.semantic_schema import V8

SCHEMA_VERSION = 8
COMPONENT = "canonical_store"

CREATE_VERSION_TABLE = (
    "CREATE TABLE IF NOT EXISTS aidememo_schema ("
    "component TEXT PRIMARY KEY, version INTEGER NOT NULL) STRICT"
)
SELECT_VERSION = "SELECT version FROM aidememo_schema WHERE component = ?"
UPSERT_VERSION = (
    "INSERT INTO aidememo_schema (component, version) VALUES (?, ?) "
    "ON CONFLICT (component) DO UPDATE SET version = excluded.version"
)

_V1 = (
    """CREATE TABLE tenants (
        tenant_id TEXT PRIMARY KEY,
        status TEXT NOT NULL DEFAULT 'active'
            CHECK (status IN ('active', 'suspended', 'archived')),
        created_at_ms INTEGER NOT NULL
    ) STRICT, WITHOUT ROWID""",
    """CREATE TABLE projects (
        tenant_id TEXT NOT NULL REFERENCES tenants (tenant_id),
        project_id TEXT NOT NULL,
        project_epoch TEXT NOT NULL,
        head_seq INTEGER NOT NULL CHECK (head_seq >= 0),
        status TEXT NOT NULL DEFAULT 'active'
            CHECK (status IN ('active', 'suspended', 'archived')),
        created_at_ms INTEGER NOT NULL,
        PRIMARY KEY (tenant_id, project_id)
    ) STRICT, WITHOUT ROWID""",
    """CREATE TABLE actors (
        tenant_id TEXT NOT NULL REFERENCES tenants (tenant_id),
        actor_id TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('human', 'agent', 'service')),
        status TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'suspended')),
        created_at_ms INTEGER NOT NULL,
        PRIMARY KEY (tenant_id, actor_id)
    ) STRICT, WITHOUT ROWID""",
    """CREATE TABLE memberships (
        tenant_id TEXT NOT NULL,
        project_id TEXT NOT NULL,
        actor_id TEXT NOT NULL,
        role TEXT NOT NULL CHECK (role IN ('owner', 'admin', 'writer', 'reader')),
        status TEXT NOT NULL CHECK (status IN ('active', 'suspended')),
        updated_at_ms INTEGER NOT NULL,
        PRIMARY KEY (tenant_id, project_id, actor_id),
        FOREIGN KEY (tenant_id, project_id) REFERENCES projects (tenant_id, project_id),
        FOREIGN KEY (tenant_id, actor_id) REFERENCES actors (tenant_id, actor_id)
    ) STRICT, WITHOUT ROWID""",
    """CREATE TABLE token_bindings (
        token_sha256 BLOB PRIMARY KEY CHECK (length(token_sha256) = 32),
        tenant_id TEXT NOT NULL,
        actor_id TEXT NOT NULL,
        active INTEGER NOT NULL CHECK (active IN (0, 1)),
        created_at_ms INTEGER NOT NULL,
        FOREIGN KEY (tenant_id, actor_id) REFERENCES actors (tenant_id, actor_id)
    ) STRICT, WITHOUT ROWID""",
    """CREATE TABLE resources (
        tenant_id TEXT NOT NULL,
        project_id TEXT NOT NULL,
        kind TEXT NOT NULL,
        resource_id TEXT NOT NULL,
        revision INTEGER NOT NULL CHECK (revision > 0),
        body BLOB,
        PRIMARY KEY (tenant_id, project_id, kind, resource_id),
        FOREIGN KEY (tenant_id, project_id) REFERENCES projects (tenant_id, project_id)
    ) STRICT""",
    """CREATE TABLE receipts (
        tenant_id TEXT NOT NULL,
        project_id TEXT NOT NULL,
        command_id TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        actor_id TEXT NOT NULL,
        project_seq INTEGER NOT NULL CHECK (project_seq > 0),
        kind TEXT NOT NULL,
        resource_id TEXT NOT NULL,
        revision INTEGER NOT NULL CHECK (revision > 0),
        committed_at_ms INTEGER NOT NULL,
        PRIMARY KEY (tenant_id, project_id, command_id),
        UNIQUE (tenant_id, project_id, project_seq)
    ) STRICT, WITHOUT ROWID""",
    """CREATE TABLE changes (
        tenant_id TEXT NOT NULL,
        project_id TEXT NOT NULL,
        seq INTEGER NOT NULL CHECK (seq > 0),
        project_epoch TEXT NOT NULL,
        kind TEXT NOT NULL,
        resource_id TEXT NOT NULL,
        op TEXT NOT NULL CHECK (op IN ('upsert', 'delete')),
        revision INTEGER NOT NULL CHECK (revision > 0),
        actor_id TEXT NOT NULL,
        committed_at_ms INTEGER NOT NULL,
        body BLOB,
        PRIMARY KEY (tenant_id, project_id, seq),
        CHECK ((op = 'upsert') = (body IS NOT NULL))
    ) STRICT""",
    """CREATE TABLE audit (
        tenant_id TEXT NOT NULL,
        project_id TEXT NOT NULL,
        project_seq INTEGER NOT NULL CHECK (project_seq > 0),
        command_id TEXT NOT NULL,
        operation TEXT NOT NULL,
        kind TEXT NOT NULL,
        resource_id TEXT NOT NULL,
        actor_id TEXT NOT NULL,
        committed_at_ms INTEGER NOT NULL,
        PRIMARY KEY (tenant_id, project_id, project_seq),
        UNIQUE (tenant_id, project_id, command_id)
    ) STRICT, WITHOUT ROWID""",
    """CREATE TABLE handoff_index (
        tenant_id TEXT NOT NULL,
        project_id TEXT NOT NULL,
        handoff_id TEXT NOT NULL,
        from_actor TEXT NOT NULL,
        to_actor TEXT NOT NULL,
        source_id TEXT NOT NULL,
        status TEXT NOT NULL,
        revision INTEGER NOT NULL CHECK (revision > 0),
        updated_seq INTEGER NOT NULL CHECK (updated_seq > 0),
        PRIMARY KEY (tenant_id, project_id, handoff_id)
    ) STRICT, WITHOUT ROWID""",
    """CREATE INDEX handoff_inbox_idx
        ON handoff_index (tenant_id, project_id, to_actor, updated_seq DESC)""",
    """CREATE INDEX handoff_outbox_idx
        ON handoff_index (tenant_id, project_id, from_actor, updated_seq DESC)""",
    # The rowid of a fact's FTS row, found by key: FTS5 UNINDEXED columns are not indexed,
    # so replacing a fact's entry by (tenant, project, fact_id) alone would scan the table.
    """CREATE TABLE fact_search_keys (
        doc_rowid INTEGER PRIMARY KEY,
        tenant_id TEXT NOT NULL,
        project_id TEXT NOT NULL,
        fact_id TEXT NOT NULL,
        UNIQUE (tenant_id, project_id, fact_id)
    ) STRICT""",
    # `terms` is already tokenized by Python (lowercase, CJK bigrams), space-separated.
    """CREATE VIRTUAL TABLE fact_search USING fts5 (
        terms,
        tenant_id UNINDEXED,
        project_id UNINDEXED,
        fact_id UNINDEXED,
        source_id UNINDEXED,
        tokenize = "unicode61 remove_diacritics 0"
    )""",
)

# An import's verified rows wait here, page by page, until the whole archive verified
# (SPEC.md ARC-9); not tenant data (not in `TENANT_TABLES`, no tenant column).
_V2 = (
    """CREATE TABLE IF NOT EXISTS aidememo_import_staging (
        import_id TEXT NOT NULL,
        project_id TEXT NOT NULL,
        seq INTEGER NOT NULL CHECK (seq >= 0),
        created_at_ms INTEGER NOT NULL,
        body BLOB NOT NULL,
        PRIMARY KEY (import_id, project_id, seq)
    ) STRICT""",
)

# The session list reads sessions newest first by their creation receipt (SPEC.md READS-3).
# A partial index: only session creates are in it, so no other commit pays for it.
_V3 = (
    """CREATE INDEX IF NOT EXISTS receipts_session_idx
        ON receipts (tenant_id, project_id, project_seq) WHERE kind = 'session'""",
)

# The expression the session facts index (READS-4) is on and the query repeats word for word,
# so the planner uses the index: a fact's `session_id` from its body (a BLOB of canonical
# JSON, read as text: the JSON functions would take a BLOB for JSONB).
FACT_SESSION = "json_extract(CAST(body AS TEXT), '$.session_id')"

_V4 = (
    # A session's facts in commit order (READS-4); facts are create-only, so their one
    # change is their state. Partial: no other commit pays for it.
    f"""CREATE INDEX IF NOT EXISTS changes_fact_session_idx
        ON changes (tenant_id, project_id, {FACT_SESSION}, seq) WHERE kind = 'fact'""",
    # A resource's changes by sequence: its state as of any sequence (SNAP-4).
    """CREATE INDEX IF NOT EXISTS changes_resource_idx
        ON changes (tenant_id, project_id, kind, resource_id, seq)""",
    # Keys of the store itself, not tenant data (never exported, counted or deleted).
    """CREATE TABLE IF NOT EXISTS aidememo_store_keys (
        name TEXT PRIMARY KEY,
        key BLOB NOT NULL CHECK (length(key) = 32)
    ) STRICT""",
    """INSERT INTO aidememo_store_keys (name, key) VALUES ('snapshot_page', randomblob(32))
        ON CONFLICT (name) DO NOTHING""",
)

# The project-scoped lexical index (aidememo.stores.sqlite.search), rebuilt from the FTS5
# rows: a fact's doc_seq follows its FTS5 key's rowid (the order facts were first indexed);
# the terms are the tokenizer's (letters and digits only), so joining them with '","' makes a
# JSON array of strings.
_V5 = (
    """CREATE TABLE fact_search_v5 (
        tenant_id TEXT NOT NULL,
        project_id TEXT NOT NULL,
        fact_id TEXT NOT NULL,
        source_id TEXT NOT NULL,
        doc_seq INTEGER NOT NULL CHECK (doc_seq > 0),
        n_terms INTEGER NOT NULL CHECK (n_terms >= 0),
        terms TEXT NOT NULL,
        PRIMARY KEY (tenant_id, project_id, fact_id)
    ) STRICT, WITHOUT ROWID""",
    """INSERT INTO fact_search_v5
        SELECT k.tenant_id, k.project_id, k.fact_id, s.source_id,
               row_number() OVER (PARTITION BY k.tenant_id, k.project_id ORDER BY k.doc_rowid),
               CASE WHEN s.terms = '' THEN 0
                    ELSE length(s.terms) - length(replace(s.terms, ' ', '')) + 1 END,
               s.terms
        FROM fact_search_keys AS k JOIN fact_search AS s ON s.rowid = k.doc_rowid""",
    "DROP TABLE fact_search",
    "DROP TABLE fact_search_keys",
    "ALTER TABLE fact_search_v5 RENAME TO fact_search",
    """CREATE TABLE fact_search_postings (
        tenant_id TEXT NOT NULL,
        project_id TEXT NOT NULL,
        term TEXT NOT NULL,
        doc_seq INTEGER NOT NULL,
        fact_id TEXT NOT NULL,
        source_id TEXT NOT NULL,
        tf INTEGER NOT NULL CHECK (tf > 0),
        n_terms INTEGER NOT NULL CHECK (n_terms > 0),
        PRIMARY KEY (tenant_id, project_id, term, doc_seq)
    ) STRICT, WITHOUT ROWID""",
    """CREATE TABLE fact_search_terms (
        tenant_id TEXT NOT NULL,
        project_id TEXT NOT NULL,
        term TEXT NOT NULL,
        df INTEGER NOT NULL CHECK (df >= 0),
        PRIMARY KEY (tenant_id, project_id, term)
    ) STRICT, WITHOUT ROWID""",
    """CREATE TABLE fact_search_stats (
        tenant_id TEXT NOT NULL,
        project_id TEXT NOT NULL,
        docs INTEGER NOT NULL CHECK (docs >= 0),
        terms INTEGER NOT NULL CHECK (terms >= 0),
        last_doc INTEGER NOT NULL CHECK (last_doc >= 0),
        PRIMARY KEY (tenant_id, project_id)
    ) STRICT, WITHOUT ROWID""",
    f"""INSERT INTO fact_search_postings
        SELECT d.tenant_id, d.project_id, j.value, d.doc_seq, d.fact_id, d.source_id,
               count(*), d.n_terms
        FROM fact_search AS d, json_each('["' || replace(d.terms, ' ', '","') || '"]') AS j
        WHERE d.terms <> '' AND length(CAST(j.value AS BLOB)) <= {MAX_TERM_BYTES}
        GROUP BY d.tenant_id, d.project_id, d.doc_seq, j.value""",
    """INSERT INTO fact_search_terms
        SELECT tenant_id, project_id, term, count(*) FROM fact_search_postings
        GROUP BY tenant_id, project_id, term""",
    """INSERT INTO fact_search_stats
        SELECT tenant_id, project_id, count(*), sum(n_terms), max(doc_seq) FROM fact_search
        GROUP BY tenant_id, project_id""",
)

MIGRATIONS: list[tuple[int, tuple[str, ...]]] = list(
    enumerate((_V1, _V2, _V3, _V4, _V5, V6, V7, V8), start=1)
)
"""Ordered (version, statements), numbered from 1; applying version N moves the database from
N-1 to N."""


def read_version(executor: SqlExecutor) -> int:
    """The recorded schema version (0 for a database this code never touched)."""
    rows = executor.execute(
        "SELECT name FROM sqlite_schema WHERE type = 'table' AND name = 'aidememo_schema'"
    )
    if not rows:
        return 0
    rows = executor.execute(SELECT_VERSION, (COMPONENT,))
    return int(rows[0][0]) if rows else 0  # type: ignore[arg-type]


def migrate(executor: SqlExecutor) -> int:
    """Bring the database to `SCHEMA_VERSION` in one write transaction; return the version.

    Idempotent: an up-to-date database is only read, so opening it takes no write lock. A
    database newer than this code is refused with `storage_failure` rather than
    half-understood.
    """
    current = executor.read(lambda: read_version(executor))
    _refuse_newer(current)
    if current == SCHEMA_VERSION:
        return current

    def run() -> int:
        executor.execute(CREATE_VERSION_TABLE)
        current = read_version(executor)  # another process may have migrated meanwhile
        _refuse_newer(current)
        for version, statements in MIGRATIONS:
            if version > current:
                executor.execute_script(statements)
                executor.execute(UPSERT_VERSION, (COMPONENT, version))
                current = version
        return current

    return executor.transaction(run)


def _refuse_newer(version: int) -> None:
    if version > SCHEMA_VERSION:
        raise fail(
            ErrorCode.STORAGE_FAILURE,
            f"database schema {version} is newer than this code's {SCHEMA_VERSION}",
        )
