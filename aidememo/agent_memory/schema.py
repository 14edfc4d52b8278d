"""The memory store's SQLite schema, version 7, and its migrations (SPEC.md MEM-1).

Unlike the SSOT ledger, this store keeps its version in `PRAGMA user_version`, as the Nuzo 1.2
stores already on disk do. A new store gets the version 7 tables in one go; a store at an older
version is brought to 7 step by step (`user_version` written after each step, as Nuzo does); a
store from a newer version is refused with `MEMORY_SCHEMA_UNSUPPORTED` before anything changes.
"""

from __future__ import annotations

import sqlite3

from aidememo.agent_memory.errors import AgentMemoryError, MemoryErrorCode
from aidememo.agent_memory.jstext import collapse_spaces

SCHEMA_VERSION = 7
BUSY_TIMEOUT_MS = 5000

MEMORIES_DDL = """CREATE TABLE memories (
  id TEXT PRIMARY KEY,
  revision INTEGER NOT NULL DEFAULT 1,
  scope TEXT NOT NULL,
  kind TEXT NOT NULL,
  content TEXT NOT NULL,
  capture_key TEXT,
  tags TEXT NOT NULL DEFAULT '[]',
  source TEXT NOT NULL,
  confidence REAL NOT NULL DEFAULT 1.0,
  confidence_state TEXT,
  provenance TEXT,
  review_after TEXT,
  expires_at TEXT,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  last_used_at TEXT,
  archived_at TEXT
)"""

EVENTS_DDL = """CREATE TABLE memory_events (
  id TEXT PRIMARY KEY,
  memory_id TEXT,
  event_type TEXT NOT NULL,
  actor TEXT NOT NULL,
  payload TEXT NOT NULL,
  created_at TEXT NOT NULL
)"""

RELATIONS_DDL = """CREATE TABLE memory_relations (
  id TEXT PRIMARY KEY,
  source_memory_id TEXT NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
  target_memory_id TEXT NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
  relation TEXT NOT NULL,
  reason TEXT,
  created_at TEXT NOT NULL,
  UNIQUE(source_memory_id, target_memory_id, relation)
)"""

FTS_DDL = """CREATE VIRTUAL TABLE memories_fts USING fts5(
  id UNINDEXED,
  scope UNINDEXED,
  content,
  tags
)"""

CAPTURE_KEY_INDEX = """CREATE INDEX idx_memories_active_capture_key
  ON memories(scope, capture_key, id) WHERE archived_at IS NULL"""

INDEXES = (
    "CREATE INDEX idx_memories_scope ON memories(scope)",
    "CREATE INDEX idx_memories_archived_at ON memories(archived_at)",
    "CREATE INDEX idx_memory_events_memory_id ON memory_events(memory_id)",
    "CREATE INDEX idx_memories_review_after ON memories(review_after)",
    "CREATE INDEX idx_memories_expires_at ON memories(expires_at)",
    "CREATE INDEX idx_memory_relations_source ON memory_relations(source_memory_id)",
    "CREATE INDEX idx_memory_relations_target ON memory_relations(target_memory_id)",
    CAPTURE_KEY_INDEX,
)


def capture_key(content: str) -> str:
    """The exact-capture duplicate key: trimmed, whitespace collapsed, lower-cased (MEM-3)."""
    return collapse_spaces(content).lower()


def _exists(db: sqlite3.Connection, name: str) -> bool:
    row = db.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (name,)).fetchone()
    return row is not None


def _columns(db: sqlite3.Connection, table: str) -> set[str]:
    return {str(row[1]) for row in db.execute(f"PRAGMA table_info({table})")}


def _add_column(db: sqlite3.Connection, name: str, decl: str) -> None:
    if name not in _columns(db, "memories"):
        db.execute(f"ALTER TABLE memories ADD COLUMN {name} {decl}")


def _if_not_exists(ddl: str) -> str:
    for word in ("TABLE", "INDEX"):
        ddl = ddl.replace(f"CREATE {word} ", f"CREATE {word} IF NOT EXISTS ", 1)
    return ddl.replace("CREATE VIRTUAL TABLE ", "CREATE VIRTUAL TABLE IF NOT EXISTS ", 1)


def _v1(db: sqlite3.Connection) -> None:
    db.executescript(
        """
        CREATE TABLE IF NOT EXISTS memories (
          id TEXT PRIMARY KEY,
          revision INTEGER NOT NULL DEFAULT 1,
          scope TEXT NOT NULL,
          kind TEXT NOT NULL,
          content TEXT NOT NULL,
          tags TEXT NOT NULL DEFAULT '[]',
          source TEXT NOT NULL,
          confidence REAL NOT NULL DEFAULT 1.0,
          created_at TEXT NOT NULL,
          updated_at TEXT NOT NULL,
          last_used_at TEXT,
          archived_at TEXT
        );
        """
        + _if_not_exists(EVENTS_DDL)
        + ";\n"
        + _if_not_exists(FTS_DDL)
        + ";\n"
        + ";\n".join(_if_not_exists(ddl) for ddl in INDEXES[:3])
        + ";"
    )


def _v2(db: sqlite3.Connection) -> None:
    _add_column(db, "revision", "INTEGER NOT NULL DEFAULT 1")


def _v3(db: sqlite3.Connection) -> None:
    _add_column(db, "provenance", "TEXT")


def _v4(db: sqlite3.Connection) -> None:
    _add_column(db, "confidence_state", "TEXT")


def _v5(db: sqlite3.Connection) -> None:
    _add_column(db, "review_after", "TEXT")
    _add_column(db, "expires_at", "TEXT")
    for ddl in INDEXES[3:5]:
        db.execute(_if_not_exists(ddl))


def _v6(db: sqlite3.Connection) -> None:
    db.execute(_if_not_exists(RELATIONS_DDL))
    for ddl in INDEXES[5:7]:
        db.execute(_if_not_exists(ddl))


def _v7(db: sqlite3.Connection) -> None:
    _add_column(db, "capture_key", "TEXT")
    rows = db.execute("SELECT id, content FROM memories WHERE capture_key IS NULL").fetchall()
    db.executemany(
        "UPDATE memories SET capture_key = ? WHERE id = ?",
        [(capture_key(str(content)), memory_id) for memory_id, content in rows],
    )
    db.execute(_if_not_exists(CAPTURE_KEY_INDEX))


STEPS = (_v1, _v2, _v3, _v4, _v5, _v6, _v7)


def user_version(db: sqlite3.Connection) -> int:
    return int(db.execute("PRAGMA user_version").fetchone()[0])


def check_version(version: int) -> None:
    if version > SCHEMA_VERSION:
        raise AgentMemoryError(
            MemoryErrorCode.MEMORY_SCHEMA_UNSUPPORTED,
            "SQLite memory schema is newer than this aidememo version supports.",
            {"currentVersion": version, "supportedVersion": SCHEMA_VERSION},
        )


def migrate(db: sqlite3.Connection) -> int:
    """Refuse a newer store, set WAL, the busy timeout and foreign keys, then bring the store
    to version 7.

    Returns the version the store had. `db` is in autocommit mode (`isolation_level=None`).
    """
    db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    version = user_version(db)
    check_version(version)  # before WAL is set: a newer store is left byte for byte as it was
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA foreign_keys = ON")
    if version == SCHEMA_VERSION:
        return version
    if version == 0 and not _exists(db, "memories"):
        db.execute("BEGIN IMMEDIATE")
        try:
            if user_version(db) == 0 and not _exists(db, "memories"):  # another process won?
                for ddl in (MEMORIES_DDL, EVENTS_DDL, RELATIONS_DDL, FTS_DDL, *INDEXES):
                    db.execute(ddl)
                db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return version
    for step, run in enumerate(STEPS, start=1):
        if version < step:
            run(db)
            db.execute(f"PRAGMA user_version = {step}")
    return version
