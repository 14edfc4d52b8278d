"""A memory store that cannot surprise a write (MEM-1, MEM-18): every opening refuses a link or
special file at the store or its sidecars and a schema integrity flags as unsafe for writes,
`restore` runs the same checks, and a damaged file is a structured error, never exit 70."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from aidememo.agent_memory import AgentMemory
from aidememo.agent_memory.backup import backup_store, restore_store
from aidememo.agent_memory.errors import AgentMemoryError
from aidememo.agent_memory.errors import MemoryErrorCode as C
from aidememo.agent_memory.integrity import inspect_store
from aidememo.agent_memory.schema import SCHEMA_VERSION


def _cli(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`aidememo memory` in a child with a deadline: a hang is a failure, not a stuck suite."""
    return subprocess.run(
        [sys.executable, "-m", "aidememo", "memory", "--store", str(store), *args],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def _seeded(path: Path) -> str:
    with AgentMemory.open(str(path), scope="project:demo") as store:
        return store.remember("Deploys go through staging.", kind="fact").id


def _refused(code: C, run: Callable[[], object]) -> AgentMemoryError:
    with pytest.raises(AgentMemoryError) as caught:
        run()
    assert caught.value.code == code, caught.value.to_dict()
    return caught.value


def test_mem1_a_fifo_at_the_store_path_is_refused_without_waiting(tmp_path: Path) -> None:
    fifo = tmp_path / "store.sqlite"
    os.mkfifo(fifo)
    for command in (["list"], ["remember", "x", "--kind", "note"], ["recall", "x"]):
        done = _cli(fifo, *command)
        assert (done.returncode, done.stderr.split(":")[0]) == (1, "MEMORY_STORE_PATH_UNSAFE")
    assert inspect_store(str(fifo)).integrity_check == "not_a_file"


@pytest.mark.parametrize("sidecar", ["-wal", "-shm"])
def test_mem1_a_symlinked_sidecar_is_refused_with_its_code(tmp_path: Path, sidecar: str) -> None:
    store = tmp_path / "store.sqlite"
    _seeded(store)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_bytes(b"")
    os.symlink(elsewhere, f"{store}{sidecar}")
    done = _cli(store, "list")
    assert (done.returncode, done.stderr.split(":")[0]) == (1, "MEMORY_STORE_PATH_UNSAFE")
    _refused(C.MEMORY_STORE_PATH_UNSAFE, lambda: AgentMemory.open(str(store)))
    assert elsewhere.read_bytes() == b""


@pytest.mark.parametrize(
    "fts",
    [
        "CREATE VIRTUAL TABLE memories_fts USING fts5(id UNINDEXED, scope UNINDEXED, content,"
        " tags, extra)",
        "CREATE TABLE memories_fts (id TEXT, scope TEXT, content TEXT, tags TEXT)",
        "CREATE VIRTUAL TABLE memories_fts USING fts5(id UNINDEXED, scope UNINDEXED, content,"
        " tags, tokenize = 'trigram')",
    ],
    ids=["extra_column", "plain_table", "other_tokenizer"],
)
def test_mem1_an_fts_table_integrity_flags_refuses_writes(tmp_path: Path, fts: str) -> None:
    store = tmp_path / "store.sqlite"
    _seeded(store)
    conn = sqlite3.connect(store)
    conn.executescript(f"DROP TABLE memories_fts; {fts};")
    conn.close()
    assert not inspect_store(str(store)).fts_schema_ok
    before = store.read_bytes()
    error = _refused(C.MEMORY_STORE_INTEGRITY_FAILED, lambda: AgentMemory.open(str(store)))
    assert "memories_fts schema is invalid" in error.details["errors"]
    done = _cli(store, "remember", "y", "--kind", "note")
    assert (done.returncode, done.stderr.split(":")[0]) == (1, "MEMORY_STORE_INTEGRITY_FAILED")
    assert store.read_bytes() == before


def test_mem1_a_planted_trigger_is_reported_and_refused(tmp_path: Path) -> None:
    store = tmp_path / "store.sqlite"
    _seeded(store)
    conn = sqlite3.connect(store)
    conn.execute(
        "CREATE TRIGGER spy AFTER INSERT ON memories BEGIN"
        " INSERT INTO memory_events (id, memory_id, event_type, actor, payload, created_at)"
        " VALUES ('evt_spy', NEW.id, 'spy', 'spy', '{}', '2026-01-01T00:00:00.000Z'); END"
    )
    conn.close()
    report = inspect_store(str(store))
    assert not report.ok and "unknown trigger(s) found: spy" in report.errors
    error = _refused(C.MEMORY_STORE_INTEGRITY_FAILED, lambda: AgentMemory.open(str(store)))
    assert error.details["errors"] == ["unknown trigger(s) found: spy"]


def test_mem1_garbage_in_fts_shadow_tables_is_a_structured_error(tmp_path: Path) -> None:
    store = tmp_path / "store.sqlite"
    _seeded(store)
    conn = sqlite3.connect(store)
    conn.execute("UPDATE memories_fts_data SET block = x'deadbeefdeadbeef' WHERE id > 1")
    conn.execute("UPDATE memories_fts_config SET v = 'garbage' WHERE k = 'version'")
    conn.commit()
    conn.close()
    for command in (["recall", "staging"], ["remember", "Staging is slow.", "--kind", "note"]):
        done = _cli(store, *command)
        assert done.returncode == 1, (command, done.stderr)
        assert done.stderr.split(":")[0] in (
            "MEMORY_STORE_DAMAGED",
            "MEMORY_STORE_INTEGRITY_FAILED",
        )
        assert "Unexpected CLI failure" not in done.stderr


def test_mem18_restore_onto_a_symlinked_store_keeps_the_link(tmp_path: Path) -> None:
    source = tmp_path / "source.sqlite"
    _seeded(source)
    backup = tmp_path / "backup.sqlite"
    backup_store(str(source), str(backup))
    real = tmp_path / "real.sqlite"
    _seeded(real)
    link = tmp_path / "link.sqlite"
    os.symlink(real, link)
    _refused(
        C.MEMORY_STORE_PATH_UNSAFE,
        lambda: restore_store(str(backup), str(link), overwrite=True),
    )
    assert link.is_symlink() and os.readlink(link) == str(real)


def test_mem18_restore_onto_a_newer_store_is_schema_unsupported(tmp_path: Path) -> None:
    source = tmp_path / "source.sqlite"
    _seeded(source)
    backup = tmp_path / "backup.sqlite"
    backup_store(str(source), str(backup))
    newer = tmp_path / "newer.sqlite"
    _seeded(newer)
    conn = sqlite3.connect(newer)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    before = newer.read_bytes()
    _refused(
        C.MEMORY_SCHEMA_UNSUPPORTED,
        lambda: restore_store(str(backup), str(newer), overwrite=True),
    )
    assert newer.read_bytes() == before
    done = _cli(newer, "restore", str(backup), "--yes")
    assert (done.returncode, done.stderr.split(":")[0]) == (1, "MEMORY_SCHEMA_UNSUPPORTED")
