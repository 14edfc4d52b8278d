"""Schema version 11: the derived semantic index's tables (SPEC.md SEM-6,
`aidememo.stores.sql_common.semantic_rows`), with the tenant's `ON DELETE CASCADE` like every
tenant table. Derived data: dropping both tables' rows and re-indexing gives the same answers."""

from __future__ import annotations

V11 = (
    """CREATE TABLE IF NOT EXISTS semantic_state (
        tenant_id TEXT NOT NULL REFERENCES tenants (tenant_id) ON DELETE CASCADE,
        project_id TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        project_epoch TEXT NOT NULL,
        applied_seq BIGINT NOT NULL CHECK (applied_seq >= 0),
        generation BIGINT NOT NULL,
        PRIMARY KEY (tenant_id, project_id)
    )""",
    """CREATE TABLE IF NOT EXISTS semantic_vectors (
        tenant_id TEXT NOT NULL REFERENCES tenants (tenant_id) ON DELETE CASCADE,
        project_id TEXT NOT NULL,
        fact_id TEXT NOT NULL,
        seq BIGINT NOT NULL,
        source_id TEXT,
        vector BYTEA NOT NULL,
        PRIMARY KEY (tenant_id, project_id, fact_id)
    )""",
    "CREATE INDEX IF NOT EXISTS semantic_vectors_by_seq "
    "ON semantic_vectors (tenant_id, project_id, seq)",
)
