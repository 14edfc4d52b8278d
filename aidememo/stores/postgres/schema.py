"""The canonical PostgreSQL schema, its server-side functions and its migrations.

The tables and constraints follow the SQLite schema (`aidememo.stores.sqlite.schema`) with
PostgreSQL types (BIGINT, BYTEA, BOOLEAN) and `ON DELETE CASCADE` foreign keys from the tenant
down, so a tenant's deletion is one `DELETE FROM tenants` (ARC-4). Identifier columns are
`COLLATE "C"`: ids are ASCII, and byte order makes `ORDER BY` agree with SQLite and Python
whatever the database's default collation is.

Server-side functions, the same SQL text for psycopg 3 and pg8000, so a command costs one
round trip to read and one to write:
- `aidememo_begin_command` sets the transaction's timeouts, locks the project row
  (`FOR NO KEY UPDATE`: writers of one project queue behind each other; writers of other
  projects never wait; foreign-key checks of inserts, which take `KEY SHARE`, are not blocked)
  and returns project, membership, receipt and current resource as one row. The lock and
  the first three reads are `aidememo_lock_command`'s, which `aidememo_execute_raw` calls too.
- `aidememo_commit_mutation` moves the head by compare-and-swap and writes resource, change,
  audit row, receipt, the optional handoff index row and the optional search row.
- `aidememo_execute_raw`, the guarded write of a generic put or delete in one statement
  (`POST /v1/commands`, `Store.execute_raw`, SPEC.md STORE-9), sent alone on an autocommit
  connection, so the statement is its own transaction. It sets the timeouts, locks the
  project row, reads membership, receipt and current revision, runs the command checks on
  them (`aidememo_raw_verdict`, the SQL copy of `aidememo.domain.admission.raw_verdict`),
  writes through `aidememo_commit_mutation` only when they admit the command, and answers
  their verdict, from which the caller names any error (`aidememo.service.ledger`).
  `statement_timeout` set inside a statement cannot bound that statement (the server arms
  the timer when the statement starts); `lock_timeout` does bound every lock wait inside it,
  and lock waits are the only unbounded waits it has.
- `aidememo_search`, a search in one statement (`search_schema.py`, SPEC.md SRCH-6).

Tables beside the canonical ones: `aidememo_import_staging`, where an import's verified rows
wait, page by page, until the whole archive verified (ARC-9); `aidememo_store_keys` with the
page token key (SNAP-3, 32 bytes from two `gen_random_uuid()`, 244 random bits, no extension
needed); `aidememo_listeners`, the backends that `LISTEN` for commits (LIVE-9): a commit
notifies only while it has a row, because a notifying commit holds PostgreSQL's one
notification lock of the database from its notification until its commit is durable; the
lexical index (`search_schema.py`, SRCH-4, SRCH-5), the artifact catalog
(`artifact_schema.py`, ART-*) and the derived semantic index (`semantic_schema.py`, SEM-6).
Indexes serve the session list (READS-3), the session facts (READS-4, on the IMMUTABLE
`aidememo_fact_session`, derived without a jsonb cast, which fails on U+0000, ID-5) and the
change log by resource (the paged snapshot, SNAP-4). Each migration step (`MIGRATIONS`) adds
its part, building indexes from the rows already there in the migration's transaction.

The version lives in `aidememo_schema(component, version)`. `migrate` runs every pending step
in one transaction under `pg_advisory_xact_lock`, so concurrent start-ups never race on DDL,
and refuses a database newer than this code.
"""

from __future__ import annotations

from aidememo.stores.postgres.artifact_schema import V7
from aidememo.stores.postgres.search_schema import V6, V8, V9
from aidememo.stores.postgres.semantic_schema import V12

SCHEMA_VERSION = 15
COMPONENT = "canonical_store"

# "AideMemo" in ASCII: the advisory lock key that serializes migrations.
MIGRATION_LOCK_KEY = 0x4169_6465_4D65_6D6F

CREATE_VERSION_TABLE = (
    "CREATE TABLE IF NOT EXISTS aidememo_schema (component TEXT PRIMARY KEY, version INT NOT NULL)"
)
SELECT_VERSION = "SELECT version FROM aidememo_schema WHERE component = %s"
TABLE_EXISTS = "SELECT to_regclass('aidememo_schema') IS NOT NULL"
UPSERT_VERSION = (
    "INSERT INTO aidememo_schema (component, version) VALUES (%s, %s) "
    "ON CONFLICT (component) DO UPDATE SET version = excluded.version"
)
LOCK = f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK_KEY})"

_ID = 'TEXT COLLATE "C" NOT NULL'

_TABLES = (
    f"""CREATE TABLE tenants (
        tenant_id {_ID} PRIMARY KEY,
        status TEXT NOT NULL DEFAULT 'active'
            CHECK (status IN ('active', 'suspended', 'archived')),
        created_at_ms BIGINT NOT NULL
    )""",
    # search_docs and search_terms are the BM25 statistics of the project's lexical index
    # (document count and total term count), kept by the functions below.
    f"""CREATE TABLE projects (
        tenant_id {_ID} REFERENCES tenants (tenant_id) ON DELETE CASCADE,
        project_id {_ID},
        project_epoch {_ID},
        head_seq BIGINT NOT NULL CHECK (head_seq >= 0),
        status TEXT NOT NULL DEFAULT 'active'
            CHECK (status IN ('active', 'suspended', 'archived')),
        created_at_ms BIGINT NOT NULL,
        search_docs BIGINT NOT NULL DEFAULT 0 CHECK (search_docs >= 0),
        search_terms BIGINT NOT NULL DEFAULT 0 CHECK (search_terms >= 0),
        PRIMARY KEY (tenant_id, project_id)
    )""",
    f"""CREATE TABLE actors (
        tenant_id {_ID} REFERENCES tenants (tenant_id) ON DELETE CASCADE,
        actor_id {_ID},
        kind TEXT NOT NULL CHECK (kind IN ('human', 'agent', 'service')),
        status TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'suspended')),
        created_at_ms BIGINT NOT NULL,
        PRIMARY KEY (tenant_id, actor_id)
    )""",
    f"""CREATE TABLE memberships (
        tenant_id {_ID},
        project_id {_ID},
        actor_id {_ID},
        role TEXT NOT NULL CHECK (role IN ('owner', 'admin', 'writer', 'reader')),
        status TEXT NOT NULL CHECK (status IN ('active', 'suspended')),
        updated_at_ms BIGINT NOT NULL,
        PRIMARY KEY (tenant_id, project_id, actor_id),
        FOREIGN KEY (tenant_id, project_id)
            REFERENCES projects (tenant_id, project_id) ON DELETE CASCADE,
        FOREIGN KEY (tenant_id, actor_id)
            REFERENCES actors (tenant_id, actor_id) ON DELETE CASCADE
    )""",
    "CREATE INDEX memberships_actor_idx ON memberships (tenant_id, actor_id)",
    f"""CREATE TABLE token_bindings (
        token_sha256 BYTEA PRIMARY KEY CHECK (octet_length(token_sha256) = 32),
        tenant_id {_ID},
        actor_id {_ID},
        active BOOLEAN NOT NULL,
        created_at_ms BIGINT NOT NULL,
        FOREIGN KEY (tenant_id, actor_id)
            REFERENCES actors (tenant_id, actor_id) ON DELETE CASCADE
    )""",
    "CREATE INDEX token_bindings_actor_idx ON token_bindings (tenant_id, actor_id)",
    f"""CREATE TABLE resources (
        tenant_id {_ID},
        project_id {_ID},
        kind {_ID},
        resource_id {_ID},
        revision BIGINT NOT NULL CHECK (revision > 0),
        body BYTEA,
        PRIMARY KEY (tenant_id, project_id, kind, resource_id),
        FOREIGN KEY (tenant_id, project_id)
            REFERENCES projects (tenant_id, project_id) ON DELETE CASCADE
    )""",
    f"""CREATE TABLE receipts (
        tenant_id {_ID},
        project_id {_ID},
        command_id {_ID},
        fingerprint TEXT NOT NULL,
        actor_id {_ID},
        project_seq BIGINT NOT NULL CHECK (project_seq > 0),
        kind {_ID},
        resource_id {_ID},
        revision BIGINT NOT NULL CHECK (revision > 0),
        committed_at_ms BIGINT NOT NULL,
        PRIMARY KEY (tenant_id, project_id, command_id),
        UNIQUE (tenant_id, project_id, project_seq),
        FOREIGN KEY (tenant_id, project_id)
            REFERENCES projects (tenant_id, project_id) ON DELETE CASCADE
    )""",
    f"""CREATE TABLE changes (
        tenant_id {_ID},
        project_id {_ID},
        seq BIGINT NOT NULL CHECK (seq > 0),
        project_epoch {_ID},
        kind {_ID},
        resource_id {_ID},
        op TEXT NOT NULL CHECK (op IN ('upsert', 'delete')),
        revision BIGINT NOT NULL CHECK (revision > 0),
        actor_id {_ID},
        committed_at_ms BIGINT NOT NULL,
        body BYTEA,
        PRIMARY KEY (tenant_id, project_id, seq),
        CHECK ((op = 'upsert') = (body IS NOT NULL)),
        FOREIGN KEY (tenant_id, project_id)
            REFERENCES projects (tenant_id, project_id) ON DELETE CASCADE
    )""",
    f"""CREATE TABLE audit (
        tenant_id {_ID},
        project_id {_ID},
        project_seq BIGINT NOT NULL CHECK (project_seq > 0),
        command_id {_ID},
        operation TEXT NOT NULL,
        kind {_ID},
        resource_id {_ID},
        actor_id {_ID},
        committed_at_ms BIGINT NOT NULL,
        PRIMARY KEY (tenant_id, project_id, project_seq),
        UNIQUE (tenant_id, project_id, command_id),
        FOREIGN KEY (tenant_id, project_id)
            REFERENCES projects (tenant_id, project_id) ON DELETE CASCADE
    )""",
    f"""CREATE TABLE handoff_index (
        tenant_id {_ID},
        project_id {_ID},
        handoff_id {_ID},
        from_actor {_ID},
        to_actor {_ID},
        source_id {_ID},
        status TEXT NOT NULL,
        revision BIGINT NOT NULL CHECK (revision > 0),
        updated_seq BIGINT NOT NULL CHECK (updated_seq > 0),
        PRIMARY KEY (tenant_id, project_id, handoff_id),
        FOREIGN KEY (tenant_id, project_id)
            REFERENCES projects (tenant_id, project_id) ON DELETE CASCADE
    )""",
    """CREATE INDEX handoff_inbox_idx
        ON handoff_index (tenant_id, project_id, to_actor, updated_seq DESC)""",
    """CREATE INDEX handoff_outbox_idx
        ON handoff_index (tenant_id, project_id, from_actor, updated_seq DESC)""",
    # `terms` is the tokenizer's output (aidememo.domain.tokenize), in order, duplicates kept:
    # BM25's term frequencies come from it. `doc` holds the same terms as exact lexemes
    # (array_to_tsvector: no parser, stemmer or locale touches them), for the GIN index.
    f"""CREATE TABLE fact_search (
        tenant_id {_ID},
        project_id {_ID},
        fact_id {_ID},
        source_id {_ID},
        terms TEXT[] NOT NULL,
        n_terms INT NOT NULL CHECK (n_terms >= 0),
        doc TSVECTOR NOT NULL,
        PRIMARY KEY (tenant_id, project_id, fact_id),
        FOREIGN KEY (tenant_id, project_id)
            REFERENCES projects (tenant_id, project_id) ON DELETE CASCADE
    )""",
    "CREATE INDEX fact_search_doc_idx ON fact_search USING GIN (doc)",
)

# A tsvector lexeme is at most 2046 bytes; a longer term (a 2 KiB run of letters) cannot be
# indexed and is left out of `doc` (it still counts in `terms`, so BM25 lengths stay exact).
MAX_LEXEME_BYTES = 2046

_INDEX_FACT = f"""
CREATE OR REPLACE FUNCTION aidememo_index_fact(
    p_tenant TEXT, p_project TEXT, p_fact TEXT, p_source TEXT, p_terms TEXT
) RETURNS void LANGUAGE plpgsql AS $fn$
DECLARE
    v_terms TEXT[] := CASE WHEN p_terms = '' THEN '{{}}'::TEXT[]
                           ELSE string_to_array(p_terms, ' ') END;
    v_old INT;
BEGIN
    DELETE FROM fact_search
        WHERE tenant_id = p_tenant AND project_id = p_project AND fact_id = p_fact
        RETURNING n_terms INTO v_old;
    INSERT INTO fact_search (tenant_id, project_id, fact_id, source_id, terms, n_terms, doc)
    VALUES (
        p_tenant, p_project, p_fact, p_source, v_terms, cardinality(v_terms),
        array_to_tsvector(ARRAY(
            SELECT DISTINCT t FROM unnest(v_terms) AS t
            WHERE t <> '' AND octet_length(t) <= {MAX_LEXEME_BYTES}
        ))
    );
    UPDATE projects SET
        search_docs = search_docs + CASE WHEN v_old IS NULL THEN 1 ELSE 0 END,
        search_terms = search_terms + cardinality(v_terms) - coalesce(v_old, 0)
    WHERE tenant_id = p_tenant AND project_id = p_project;
END
$fn$"""

# What every command reads first, with the project row locked (CMD-5): the project, the
# caller's membership and the command id's receipt. `aidememo_begin_command` and
# `aidememo_execute_raw` add the resource, each in its own way (the raw write skips the body).
_LOCK_COMMAND = """
CREATE OR REPLACE FUNCTION aidememo_lock_command(
    p_statement_timeout TEXT, p_lock_timeout TEXT,
    p_tenant TEXT, p_project TEXT, p_actor TEXT, p_command TEXT,
    OUT project_epoch TEXT, OUT head_seq BIGINT,
    OUT member_role TEXT, OUT member_status TEXT,
    OUT r_fingerprint TEXT, OUT r_actor TEXT, OUT r_seq BIGINT, OUT r_kind TEXT,
    OUT r_resource TEXT, OUT r_revision BIGINT, OUT r_at BIGINT
) LANGUAGE plpgsql AS $fn$
BEGIN
    -- SET LOCAL equivalents: they last until the transaction ends, and a transaction-mode
    -- pool (PgBouncer, Hyperdrive) never carries them to another client.
    -- NULL means an earlier statement of the transaction already set them.
    IF p_statement_timeout IS NOT NULL THEN
        PERFORM set_config('statement_timeout', p_statement_timeout, true),
                set_config('lock_timeout', p_lock_timeout, true);
    END IF;
    SELECT p.project_epoch, p.head_seq INTO project_epoch, head_seq
        FROM projects p
        WHERE p.tenant_id = p_tenant AND p.project_id = p_project
        FOR NO KEY UPDATE;
    SELECT m.role, m.status INTO member_role, member_status
        FROM memberships m
        WHERE m.tenant_id = p_tenant AND m.project_id = p_project AND m.actor_id = p_actor;
    SELECT r.fingerprint, r.actor_id, r.project_seq, r.kind, r.resource_id, r.revision,
           r.committed_at_ms
        INTO r_fingerprint, r_actor, r_seq, r_kind, r_resource, r_revision, r_at
        FROM receipts r
        WHERE r.tenant_id = p_tenant AND r.project_id = p_project AND r.command_id = p_command;
END
$fn$"""

_BEGIN_COMMAND = """
CREATE OR REPLACE FUNCTION aidememo_begin_command(
    p_statement_timeout TEXT, p_lock_timeout TEXT,
    p_tenant TEXT, p_project TEXT, p_actor TEXT, p_command TEXT, p_kind TEXT, p_resource TEXT,
    OUT project_epoch TEXT, OUT head_seq BIGINT,
    OUT member_role TEXT, OUT member_status TEXT,
    OUT r_fingerprint TEXT, OUT r_actor TEXT, OUT r_seq BIGINT, OUT r_kind TEXT,
    OUT r_resource TEXT, OUT r_revision BIGINT, OUT r_at BIGINT,
    OUT found_resource BOOLEAN, OUT res_revision BIGINT, OUT res_body BYTEA
) LANGUAGE plpgsql AS $fn$
BEGIN
    SELECT c.* INTO project_epoch, head_seq, member_role, member_status,
                    r_fingerprint, r_actor, r_seq, r_kind, r_resource, r_revision, r_at
        FROM aidememo_lock_command(p_statement_timeout, p_lock_timeout,
                                   p_tenant, p_project, p_actor, p_command) c;
    SELECT true, s.revision, s.body INTO found_resource, res_revision, res_body
        FROM resources s
        WHERE s.tenant_id = p_tenant AND s.project_id = p_project
          AND s.kind = p_kind AND s.resource_id = p_resource;
    found_resource := coalesce(found_resource, false);
END
$fn$"""

_COMMIT_MUTATION = """
CREATE OR REPLACE FUNCTION aidememo_commit_mutation(
    p_tenant TEXT, p_project TEXT, p_seq BIGINT, p_epoch TEXT,
    p_command TEXT, p_fingerprint TEXT, p_actor TEXT, p_kind TEXT, p_resource TEXT,
    p_revision BIGINT, p_at BIGINT, p_operation TEXT, p_op TEXT, p_body BYTEA,
    p_h_id TEXT, p_h_from TEXT, p_h_to TEXT, p_h_source TEXT, p_h_status TEXT,
    p_h_revision BIGINT, p_h_seq BIGINT,
    p_s_fact TEXT, p_s_source TEXT, p_s_terms TEXT
) RETURNS void LANGUAGE plpgsql AS $fn$
BEGIN
    UPDATE projects SET head_seq = p_seq
        WHERE tenant_id = p_tenant AND project_id = p_project AND head_seq = p_seq - 1;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'project head moved during the command'
            USING ERRCODE = 'serialization_failure';
    END IF;
    INSERT INTO resources (tenant_id, project_id, kind, resource_id, revision, body)
        VALUES (p_tenant, p_project, p_kind, p_resource, p_revision, p_body)
        ON CONFLICT (tenant_id, project_id, kind, resource_id)
        DO UPDATE SET revision = excluded.revision, body = excluded.body;
    INSERT INTO changes (tenant_id, project_id, seq, project_epoch, kind, resource_id, op,
                         revision, actor_id, committed_at_ms, body)
        VALUES (p_tenant, p_project, p_seq, p_epoch, p_kind, p_resource, p_op,
                p_revision, p_actor, p_at, p_body);
    INSERT INTO audit (tenant_id, project_id, project_seq, command_id, operation, kind,
                       resource_id, actor_id, committed_at_ms)
        VALUES (p_tenant, p_project, p_seq, p_command, p_operation, p_kind,
                p_resource, p_actor, p_at);
    INSERT INTO receipts (tenant_id, project_id, command_id, fingerprint, actor_id,
                          project_seq, kind, resource_id, revision, committed_at_ms)
        VALUES (p_tenant, p_project, p_command, p_fingerprint, p_actor,
                p_seq, p_kind, p_resource, p_revision, p_at);
    IF p_h_id IS NOT NULL THEN
        INSERT INTO handoff_index (tenant_id, project_id, handoff_id, from_actor, to_actor,
                                   source_id, status, revision, updated_seq)
            VALUES (p_tenant, p_project, p_h_id, p_h_from, p_h_to,
                    p_h_source, p_h_status, p_h_revision, p_h_seq)
            ON CONFLICT (tenant_id, project_id, handoff_id) DO UPDATE SET
                from_actor = excluded.from_actor, to_actor = excluded.to_actor,
                source_id = excluded.source_id, status = excluded.status,
                revision = excluded.revision, updated_seq = excluded.updated_seq;
    END IF;
    IF p_s_fact IS NOT NULL THEN
        PERFORM aidememo_index_fact(p_tenant, p_project, p_s_fact, p_s_source, p_s_terms);
    END IF;
END
$fn$"""

# The command checks of a generic put or delete (SPEC.md CMD-5, STORE-9) on the rows read with
# the project locked: the copy in SQL of `aidememo.domain.admission.raw_verdict`, answering a
# value of `aidememo.domain.model.Verdict`. It runs inside the database so the guarded write
# below stays one statement; tests/stores/test_postgres_raw_verdict.py runs every combination
# of its inputs through both and requires the same verdict. `p_writers` holds the roles that
# write, space-separated; `r_*` are the command id's receipt (NULL: none); `p_current` is the
# resource's revision (NULL: never written).
_RAW_VERDICT = """
CREATE OR REPLACE FUNCTION aidememo_raw_verdict(
    p_project_found BOOLEAN, p_member_role TEXT, p_member_status TEXT, p_writers TEXT,
    p_actor TEXT, p_fingerprint TEXT, p_kind TEXT, p_resource TEXT,
    r_actor TEXT, r_fingerprint TEXT, r_kind TEXT, r_resource TEXT,
    p_secret BOOLEAN, p_expected BIGINT, p_current BIGINT, p_delete BOOLEAN
) RETURNS TEXT LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
SELECT CASE
    WHEN NOT p_project_found OR p_member_status IS DISTINCT FROM 'active' THEN 'no_membership'
    WHEN p_member_role <> ALL (string_to_array(p_writers, ' ')) THEN 'read_only'
    WHEN r_fingerprint IS NOT NULL THEN
        CASE WHEN r_actor = p_actor AND r_fingerprint = p_fingerprint
                  AND r_kind = p_kind AND r_resource = p_resource
             THEN 'replay' ELSE 'command_conflict' END
    WHEN p_secret THEN 'secret'
    WHEN p_expected IS NOT NULL AND p_current IS NULL THEN 'not_found'
    WHEN p_expected IS NOT NULL AND p_current <> p_expected THEN 'stale_revision'
    WHEN p_delete AND p_current IS NULL THEN 'delete_missing'
    ELSE 'admitted'
END
$fn$"""

# The guarded write of a generic put or delete (`Store.execute_raw`, SPEC.md STORE-9). It locks
# the project row, reads what `aidememo_begin_command` reads (the resource's revision, not its
# body), asks `aidememo_raw_verdict`, and writes through `aidememo_commit_mutation` only when
# the verdict is 'admitted'. It answers the verdict, with the new receipt's sequence, revision
# and time when admitted, the stored receipt's on a replay (NULL otherwise), and the resource's
# revision before the write. A row of `resources` whose body is NULL is a tombstone: it exists
# (a delete of it writes a new tombstone), so the revision is read whatever the body.
# The commit's notification is sent only while a backend listens (LIVE-9).
_EXECUTE_RAW = """
CREATE OR REPLACE FUNCTION aidememo_execute_raw(
    p_statement_timeout TEXT, p_lock_timeout TEXT,
    p_tenant TEXT, p_project TEXT, p_actor TEXT, p_command TEXT, p_fingerprint TEXT,
    p_kind TEXT, p_resource TEXT, p_writers TEXT, p_secret BOOLEAN, p_expected BIGINT,
    p_operation TEXT, p_op TEXT, p_body BYTEA, p_at BIGINT,
    OUT verdict TEXT, OUT seq BIGINT, OUT revision BIGINT, OUT committed_at_ms BIGINT,
    OUT current_revision BIGINT
) LANGUAGE plpgsql AS $fn$
DECLARE
    v_epoch TEXT; v_head BIGINT; v_role TEXT; v_status TEXT;
    v_fingerprint TEXT; v_actor TEXT; v_seq BIGINT; v_kind TEXT; v_resource TEXT;
    v_revision BIGINT; v_at BIGINT;
BEGIN
    -- On an autocommit connection this statement is the transaction its timeouts last for.
    SELECT c.* INTO v_epoch, v_head, v_role, v_status,
                    v_fingerprint, v_actor, v_seq, v_kind, v_resource, v_revision, v_at
        FROM aidememo_lock_command(p_statement_timeout, p_lock_timeout,
                                   p_tenant, p_project, p_actor, p_command) c;
    SELECT s.revision INTO current_revision
        FROM resources s
        WHERE s.tenant_id = p_tenant AND s.project_id = p_project
          AND s.kind = p_kind AND s.resource_id = p_resource;
    verdict := aidememo_raw_verdict(
        v_epoch IS NOT NULL, v_role, v_status, p_writers,
        p_actor, p_fingerprint, p_kind, p_resource,
        v_actor, v_fingerprint, v_kind, v_resource,
        p_secret, p_expected, current_revision, p_op = 'delete');
    IF verdict = 'replay' THEN
        seq := v_seq;
        revision := v_revision;
        committed_at_ms := v_at;
    END IF;
    IF verdict <> 'admitted' THEN
        RETURN;
    END IF;
    seq := v_head + 1;
    revision := coalesce(current_revision, 0) + 1;
    committed_at_ms := p_at;
    PERFORM aidememo_commit_mutation(
        p_tenant, p_project, seq, v_epoch,
        p_command, p_fingerprint, p_actor, p_kind, p_resource,
        revision, p_at, p_operation, p_op, p_body,
        NULL, NULL, NULL, NULL, NULL, NULL, NULL,
        NULL, NULL, NULL);
    IF EXISTS (SELECT 1 FROM aidememo_listeners) THEN
        PERFORM pg_notify('aidememo_commits', json_build_array(p_tenant, p_project, seq)::text);
    END IF;
END
$fn$"""

# An import's verified rows wait here, page by page, until the whole archive verified
# (SPEC.md ARC-9); not tenant data (no foreign key, not in `TENANT_TABLES`).
_IMPORT_STAGING = f"""CREATE TABLE IF NOT EXISTS aidememo_import_staging (
    import_id {_ID},
    project_id {_ID},
    seq BIGINT NOT NULL CHECK (seq >= 0),
    created_at_ms BIGINT NOT NULL,
    body BYTEA NOT NULL,
    PRIMARY KEY (import_id, project_id, seq)
)"""

_V1 = (*_TABLES, _INDEX_FACT, _LOCK_COMMAND, _BEGIN_COMMAND, _COMMIT_MUTATION)
_V3 = (_IMPORT_STAGING,)
# The session list reads sessions newest first by their creation receipt (SPEC.md READS-3).
# A partial index: only session creates are in it, so no other commit pays for it.
_V4 = (
    "CREATE INDEX IF NOT EXISTS receipts_session_idx "
    "ON receipts (tenant_id, project_id, project_seq) WHERE kind = 'session'",
)

_V5 = (
    """CREATE OR REPLACE FUNCTION aidememo_fact_session(p_body BYTEA) RETURNS TEXT
        LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
        AS $fn$ SELECT convert_from(p_body, 'UTF8')::jsonb ->> 'session_id' $fn$""",
    # A session's facts in commit order (READS-4); facts are create-only, so their one
    # change is their state. Partial: no other commit pays for it.
    "CREATE INDEX IF NOT EXISTS changes_fact_session_idx ON changes "
    "(tenant_id, project_id, aidememo_fact_session(body), seq) WHERE kind = 'fact'",
    # A resource's changes by sequence: its state as of any sequence (SNAP-4).
    "CREATE INDEX IF NOT EXISTS changes_resource_idx "
    "ON changes (tenant_id, project_id, kind, resource_id, seq)",
    # Keys of the store itself, not tenant data (never exported, counted or deleted).
    """CREATE TABLE IF NOT EXISTS aidememo_store_keys (
        name TEXT PRIMARY KEY,
        key BYTEA NOT NULL CHECK (octet_length(key) = 32)
    )""",
    "INSERT INTO aidememo_store_keys (name, key) VALUES ('snapshot_page', "
    "decode(replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''), 'hex')) "
    "ON CONFLICT (name) DO NOTHING",
)

# The backends listening for commits (LIVE-9), one row each, kept by `origin.notify`; not tenant
# data (never exported, counted or deleted with a tenant).
V10 = (
    """CREATE TABLE IF NOT EXISTS aidememo_listeners (
        backend_pid INTEGER PRIMARY KEY,
        since TIMESTAMPTZ NOT NULL DEFAULT now()
    )""",
)

# The session of a fact without a jsonb cast: jsonb cannot hold U+0000, so the cast failed on
# a fact whose text held one (ID-5). A fact body is canonical JSON (CJ-1) of flat fields: a
# string's own quotes are escaped, so `"session_id":"` occurs only as that key, and an id
# (ID-1) needs no escape. Same results as version 5's for every row it could store, so the
# index is rebuilt only to keep it exact by construction.
V11 = (
    """CREATE OR REPLACE FUNCTION aidememo_fact_session(p_body BYTEA) RETURNS TEXT
        LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
        AS $fn$ SELECT substring(convert_from(p_body, 'UTF8')
                                 FROM '"session_id":"([^"\\\\]*)"') $fn$""",
    "REINDEX INDEX changes_fact_session_idx",
)

# Versions 2 and 10 created an earlier form of `aidememo_execute_raw`; version 13 drops it.
V13 = (
    "DROP FUNCTION IF EXISTS aidememo_execute_raw(TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, "
    "TEXT, TEXT, BIGINT, TEXT, TEXT, BYTEA, BIGINT)",
)

# Both command-starting functions read the project, membership and receipt through
# `aidememo_lock_command`.
V14 = (_LOCK_COMMAND, _BEGIN_COMMAND)

# The guarded write answers the command checks' verdict (`aidememo_raw_verdict`); versions 13
# and 14 created a form that answered only whether it wrote, which is dropped.
V15 = (
    "DROP FUNCTION IF EXISTS aidememo_execute_raw(TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, "
    "TEXT, TEXT, TEXT, BIGINT, BOOLEAN, TEXT, TEXT, BYTEA, BIGINT)",
    _RAW_VERDICT,
    _EXECUTE_RAW,
)

MIGRATIONS: list[tuple[int, tuple[str, ...]]] = [
    (1, _V1),
    (2, ()),
    (3, _V3),
    (4, _V4),
    (5, _V5),
    (6, V6),
    (7, V7),
    (8, V8),
    (9, V9),
    (10, V10),
    (11, V11),
    (12, V12),
    (13, V13),
    (14, V14),
    (15, V15),
]
"""Ordered (version, statements); applying version N moves the database from N-1 to N."""
