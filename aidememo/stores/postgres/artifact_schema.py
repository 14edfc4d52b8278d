"""Schema version 7 of the PostgreSQL store: the artifact catalog (SPEC.md ART-*).

The tables of the SQLite store's version 6 (`aidememo.stores.sqlite.artifact_schema`) with
PostgreSQL types. `artifact_reservations` cascades from its project, so a tenant's deletion
removes it (ARC-4); `artifact_gc_intents` and `artifact_catalog` have no tenant foreign key:
intents outlive the tenant whose bodies they delete.
"""

from __future__ import annotations

_ID = 'TEXT COLLATE "C" NOT NULL'

V7 = (
    f"""CREATE TABLE artifact_reservations (
        tenant_id {_ID},
        project_id {_ID},
        reservation_id {_ID},
        command_id {_ID},
        fingerprint TEXT NOT NULL,
        actor_id {_ID},
        path {_ID},
        artifact_id {_ID},
        generation {_ID} UNIQUE,
        size_bytes BIGINT NOT NULL CHECK (size_bytes >= 0),
        content_type TEXT NOT NULL,
        sha256 TEXT,
        base_revision BIGINT NOT NULL CHECK (base_revision >= 0),
        state TEXT NOT NULL CHECK (state IN
            ('reserved', 'uploaded', 'published', 'aborted', 'expired', 'failed')),
        created_at_ms BIGINT NOT NULL,
        expires_at_ms BIGINT NOT NULL,
        settled_at_ms BIGINT,
        PRIMARY KEY (tenant_id, project_id, reservation_id),
        UNIQUE (tenant_id, project_id, command_id),
        FOREIGN KEY (tenant_id, project_id)
            REFERENCES projects (tenant_id, project_id) ON DELETE CASCADE
    )""",
    """CREATE INDEX artifact_reservations_live
        ON artifact_reservations (tenant_id, project_id, artifact_id)
        WHERE state IN ('reserved', 'uploaded')""",
    """CREATE INDEX artifact_reservations_expiry
        ON artifact_reservations (expires_at_ms) WHERE state IN ('reserved', 'uploaded')""",
    """CREATE INDEX artifact_reservations_settled
        ON artifact_reservations (settled_at_ms) WHERE settled_at_ms IS NOT NULL""",
    f"""CREATE TABLE artifact_gc_intents (
        body_key TEXT COLLATE "C" PRIMARY KEY,
        tenant_id {_ID},
        project_id {_ID},
        artifact_id {_ID},
        reason TEXT NOT NULL,
        not_before_ms BIGINT NOT NULL,
        attempts INT NOT NULL CHECK (attempts >= 0),
        last_error TEXT,
        leased_until_ms BIGINT NOT NULL,
        created_at_ms BIGINT NOT NULL
    )""",
    "CREATE INDEX artifact_gc_intents_due ON artifact_gc_intents (not_before_ms)",
    """CREATE TABLE artifact_catalog (
        name TEXT COLLATE "C" PRIMARY KEY,
        value TEXT NOT NULL
    )""",
)
