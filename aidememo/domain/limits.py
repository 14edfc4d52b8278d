"""Hard limits of the contract (SPEC.md ID-3), in one place so every layer agrees."""

from __future__ import annotations

ID_MAX_BYTES = 128
NAME_MAX_BYTES = 96
MAX_REQUEST_BODY_BYTES = 1024 * 1024
MAX_ARCHIVE_BYTES = 256 * 1024 * 1024  # export and import bodies (ADM-4)
MAX_JSON_DEPTH = 64
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
# The largest integer any store binds into SQL. Pyodide hands an integer whose magnitude is
# at least JavaScript's Number.MAX_SAFE_INTEGER (2^53 - 1) to JavaScript as a BigInt, and
# Durable Object SQL (workerd's `sql.exec`) refuses BigInt bindings. A sequence never gets near
# it (2^53 commits), so a cursor beyond it selects exactly the rows this bound does:
# `seq_bound` clamps cursors before they are bound, on every store.
SQL_INT_MAX = 2**53 - 2
TOPIC_MAX_BYTES = 512
CONTENT_MAX_BYTES = 65_536
FOCUS_MAX_BYTES = 4_096
MAILBOX_LIMIT_MAX = 100
MAILBOX_LIMIT_DEFAULT = 20
SESSIONS_LIMIT_MAX = 100
SESSIONS_LIMIT_DEFAULT = 20
CHANGES_LIMIT_DEFAULT = 100
CHANGES_LIMIT_MAX = 10_000
SNAPSHOT_MAX_RESOURCES = 10_000
# A snapshot page (SNAP-2): 1-10,000 resources (default 1,000), and it ends once its bodies
# reach 4 MiB; a page token is valid for 10 minutes after the page that carried it (SNAP-3).
SNAPSHOT_LIMIT_DEFAULT = 1_000
SNAPSHOT_LIMIT_MAX = 10_000
SNAPSHOT_PAGE_MAX_BYTES = 4 << 20
SNAPSHOT_TOKEN_TTL_MS = 10 * 60 * 1000
SESSION_FACTS_LIMIT_MAX = 100
SESSION_FACTS_LIMIT_DEFAULT = 20
SEARCH_QUERY_MAX_BYTES = 4_096
SEARCH_LIMIT_MAX = 100
SEARCH_LIMIT_DEFAULT = 20
BEARER_MAX_BYTES = 4_096
HANDOFF_LEASE_MS_DEFAULT = 120_000
HANDOFF_LEASE_MS_MAX = 24 * 60 * 60 * 1000
TOKEN_DIGEST_BYTES = 32
# A store's file system with fewer free bytes than this counts as full (READY-1, ERR-4).
STORAGE_FULL_FLOOR_BYTES = 1 << 20
# Data pending for one live-feed subscriber before it is closed as too slow (LIVE-6).
LIVE_PENDING_MAX_BYTES = 8 << 20
# The largest WebSocket frame a client may send (LIVE-6: clients send nothing needed).
LIVE_INBOUND_MAX_BYTES = 64 << 10


def seq_bound(seq: int) -> int:
    """A sequence cursor as bound into SQL: clamped to `SQL_INT_MAX` (same rows selected)."""
    return seq if seq <= SQL_INT_MAX else SQL_INT_MAX
