"""Schema version 6 of the SQLite store: the artifact catalog (SPEC.md ART-*).

`artifact_reservations` is tenant data (in `TENANT_TABLES`, so counted and deleted with the
tenant, ARC-4); `artifact_gc_intents` is keyed by body-store key alone, outside tenant scope,
so a tenant's deletion leaves the intents that delete its bodies; `artifact_catalog` holds
the body-store identity the catalog is pinned to (ART-8). A publication is a resource of kind
`artifact`, so it needs no table of its own. Durable Object SQL runs the same statements.
"""

from __future__ import annotations

V6 = (
    """CREATE TABLE artifact_reservations (
        tenant_id TEXT NOT NULL,
        project_id TEXT NOT NULL,
        reservation_id TEXT NOT NULL,
        command_id TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        actor_id TEXT NOT NULL,
        path TEXT NOT NULL,
        artifact_id TEXT NOT NULL,
        generation TEXT NOT NULL UNIQUE,
        size_bytes INTEGER NOT NULL CHECK (size_bytes >= 0),
        content_type TEXT NOT NULL,
        sha256 TEXT,
        base_revision INTEGER NOT NULL CHECK (base_revision >= 0),
        state TEXT NOT NULL CHECK (state IN
            ('reserved', 'uploaded', 'published', 'aborted', 'expired', 'failed')),
        created_at_ms INTEGER NOT NULL,
        expires_at_ms INTEGER NOT NULL,
        settled_at_ms INTEGER,
        PRIMARY KEY (tenant_id, project_id, reservation_id),
        UNIQUE (tenant_id, project_id, command_id)
    ) STRICT, WITHOUT ROWID""",
    """CREATE INDEX artifact_reservations_live
        ON artifact_reservations (tenant_id, project_id, artifact_id)
        WHERE state IN ('reserved', 'uploaded')""",
    """CREATE INDEX artifact_reservations_expiry
        ON artifact_reservations (expires_at_ms) WHERE state IN ('reserved', 'uploaded')""",
    """CREATE INDEX artifact_reservations_settled
        ON artifact_reservations (settled_at_ms) WHERE settled_at_ms IS NOT NULL""",
    """CREATE TABLE artifact_gc_intents (
        body_key TEXT PRIMARY KEY,
        tenant_id TEXT NOT NULL,
        project_id TEXT NOT NULL,
        artifact_id TEXT NOT NULL,
        reason TEXT NOT NULL,
        not_before_ms INTEGER NOT NULL,
        attempts INTEGER NOT NULL CHECK (attempts >= 0),
        last_error TEXT,
        leased_until_ms INTEGER NOT NULL,
        created_at_ms INTEGER NOT NULL
    ) STRICT, WITHOUT ROWID""",
    "CREATE INDEX artifact_gc_intents_due ON artifact_gc_intents (not_before_ms)",
    """CREATE TABLE artifact_catalog (
        name TEXT PRIMARY KEY,
        value TEXT NOT NULL
    ) STRICT, WITHOUT ROWID""",
)
