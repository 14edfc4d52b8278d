"""Schema version 8: the derived semantic index's tables (SPEC.md SEM-6,
`aidememo.stores.sql_common.semantic_rows`). Derived data: dropping both tables' rows and
re-indexing gives the same answers."""

from __future__ import annotations

V8 = (
    """CREATE TABLE IF NOT EXISTS semantic_state (
        tenant_id TEXT NOT NULL,
        project_id TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        project_epoch TEXT NOT NULL,
        applied_seq INTEGER NOT NULL CHECK (applied_seq >= 0),
        generation INTEGER NOT NULL,
        PRIMARY KEY (tenant_id, project_id)
    ) STRICT, WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS semantic_vectors (
        tenant_id TEXT NOT NULL,
        project_id TEXT NOT NULL,
        fact_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        source_id TEXT,
        vector BLOB NOT NULL,
        PRIMARY KEY (tenant_id, project_id, fact_id)
    ) STRICT""",
    "CREATE INDEX IF NOT EXISTS semantic_vectors_by_seq "
    "ON semantic_vectors (tenant_id, project_id, seq)",
)
