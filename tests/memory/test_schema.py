"""Schema version 7, migrations and refusal of newer stores; store file safety (MEM-1, MEM-9)."""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path

import pytest

from aidememo.agent_memory import AgentMemory, AgentMemoryError, MemoryErrorCode
from aidememo.agent_memory.schema import STEPS

EXPECTED = [
    ("idx_memories_active_capture_key", "index"),
    ("idx_memories_archived_at", "index"),
    ("idx_memories_expires_at", "index"),
    ("idx_memories_review_after", "index"),
    ("idx_memories_scope", "index"),
    ("idx_memory_events_memory_id", "index"),
    ("idx_memory_relations_source", "index"),
    ("idx_memory_relations_target", "index"),
    ("memories", "table"),
    ("memories_fts", "table"),
    ("memory_events", "table"),
    ("memory_relations", "table"),
]


def _objects(conn: sqlite3.Connection) -> list[tuple[str, str]]:
    rows = conn.execute(
        "SELECT name, type FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'"
        " AND name NOT LIKE 'memories_fts_%' ORDER BY name"
    )
    return [(str(name), str(kind)) for name, kind in rows]


def test_mem1_fresh_store_has_the_complete_version_7_schema(store: AgentMemory) -> None:
    conn = store.db.conn
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 7
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 5000
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert _objects(conn) == EXPECTED
    index_sql = conn.execute(
        "SELECT sql FROM sqlite_master WHERE name = 'idx_memories_active_capture_key'"
    ).fetchone()[0]
    assert "WHERE archived_at IS NULL" in index_sql
    fts = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'memories_fts'").fetchone()[0]
    assert " ".join(fts.split()) == (
        "CREATE VIRTUAL TABLE memories_fts USING fts5( id UNINDEXED, scope UNINDEXED, content,"
        " tags )"
    )


def _store_at(path: Path, version: int) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    for step, run in enumerate(STEPS[:version], start=1):
        run(conn)
        conn.execute(f"PRAGMA user_version = {step}")
    conn.execute(
        "INSERT INTO memories (id, scope, kind, content, tags, source, created_at, updated_at)"
        " VALUES ('mem_old', 'user:default', 'fact', '  Run   strict capture validation.  ',"
        " '[]', 'nuzo:cli', '2026-07-01T00:00:00.000Z', '2026-07-01T00:00:00.000Z')"
    )
    conn.execute(
        "INSERT INTO memories_fts (id, scope, content, tags)"
        " VALUES ('mem_old', 'user:default', '  Run   strict capture validation.  ', '')"
    )
    conn.close()


@pytest.mark.parametrize("version", [1, 2, 3, 4, 5, 6])
def test_mem1_older_stores_migrate_to_7_and_backfill_capture_keys(
    tmp_path: Path, version: int
) -> None:
    path = tmp_path / "old.sqlite"
    _store_at(path, version)
    with AgentMemory.open(str(path)) as store:
        conn = store.db.conn
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 7
        assert conn.execute("SELECT capture_key FROM memories").fetchone()[0] == (
            "run strict capture validation."
        )
        assert {name for name, _ in _objects(conn)} >= {name for name, _ in EXPECTED}
        memory = store.get("mem_old")
        assert memory.revision == 1 and memory.confidence_state is None
        assert [r.memory.id for r in store.recall("strict capture", scope="user:default")] == [
            "mem_old"
        ]


def test_mem1_newer_schema_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "future.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 8")
    conn.close()
    before = path.read_bytes()
    with pytest.raises(AgentMemoryError) as caught:
        AgentMemory.open(str(path))
    assert caught.value.code == MemoryErrorCode.MEMORY_SCHEMA_UNSUPPORTED
    assert caught.value.details == {"currentVersion": 8, "supportedVersion": 7}
    assert path.read_bytes() == before


def test_mem9_store_files_are_private_under_a_permissive_umask(tmp_path: Path) -> None:
    path = tmp_path / "private.sqlite"
    old = os.umask(0o022)
    try:
        store = AgentMemory.open(str(path))
        store.remember("A private note.", kind="note")
        for candidate in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
            if candidate.exists():
                assert stat.S_IMODE(candidate.stat().st_mode) == 0o600, candidate
        store.close()
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    finally:
        os.umask(old)


def test_mem9_a_symlinked_store_path_is_refused_and_its_target_untouched(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.txt"
    target.write_text("do not touch")
    link = tmp_path / "memories.sqlite"
    link.symlink_to(target)
    with pytest.raises(AgentMemoryError) as caught:
        AgentMemory.open(str(link))
    assert caught.value.code == MemoryErrorCode.MEMORY_STORE_PATH_UNSAFE
    assert target.read_text() == "do not touch"


def test_mem1_read_only_opens_never_migrate_or_create_sidecars(tmp_path: Path) -> None:
    from aidememo.agent_memory.db import MemoryDatabase

    (tmp_path / "ro").mkdir()
    path = tmp_path / "ro" / "ro.sqlite"
    with AgentMemory.open(str(path)) as writer:
        writer.remember("Readable without sidecars.", kind="note")
    assert sorted(p.name for p in path.parent.iterdir()) == ["ro.sqlite"]
    reader = AgentMemory(MemoryDatabase(str(path), readonly=True))
    assert [r.memory.content for r in reader.recall("sidecars")] == ["Readable without sidecars."]
    with pytest.raises(AgentMemoryError):
        reader.remember("No writes here.", kind="note")
    reader.close()
    assert sorted(p.name for p in path.parent.iterdir()) == ["ro.sqlite"]
    old = tmp_path / "v6.sqlite"
    _store_at(old, 6)
    AgentMemory(MemoryDatabase(str(old), readonly=True)).close()
    with sqlite3.connect(old) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 6
