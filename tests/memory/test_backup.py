"""WAL-safe backup and validated restore (MEM-18), with Nuzo's refusals."""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from aidememo.agent_memory import AgentMemory
from aidememo.agent_memory.backup import backup_store, restore_store
from aidememo.agent_memory.errors import AgentMemoryError
from aidememo.agent_memory.errors import MemoryErrorCode as C
from aidememo.agent_memory.integrity import inspect_store
from tests.memory.maint_support import canonical, cli, drift_all, make_store


def refused(code: C, call: Callable[[], Any]) -> AgentMemoryError:
    with pytest.raises(AgentMemoryError) as info:
        call()
    assert info.value.code is code, info.value.to_dict()
    return info.value


def test_mem18_backup_captures_uncheckpointed_wal_rows(store_path: Path) -> None:
    make_store(store_path)
    with AgentMemory.open(str(store_path), scope="project:demo") as live:
        live.db.conn.execute("PRAGMA wal_autocheckpoint = 0")
        late = live.remember("Written while the store is open.", kind="note").id
        assert Path(f"{store_path}-wal").stat().st_size > 0
        backup = store_path.with_name("b.sqlite")
        result = backup_store(str(store_path), str(backup))
        assert result["integrity"]["ok"] and result["remaining_pages"] == 0
        assert backup.stat().st_mode & 0o777 == 0o600
        assert not Path(f"{backup}-wal").exists()
        conn = sqlite3.connect(str(backup))
        assert conn.execute("SELECT 1 FROM memories WHERE id = ?", (late,)).fetchone()
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
        conn.close()
        # Restore from the live store itself (through its -wal) to a new path.
        target = store_path.with_name("restored.sqlite")
        restore_store(str(store_path), str(target))
        assert canonical(target) == canonical(store_path)
    assert target.stat().st_mode & 0o777 == 0o600


def test_mem18_restore_replaces_only_with_confirmation(store_path: Path) -> None:
    make_store(store_path)
    backup = store_path.with_name("b.sqlite")
    backup_store(str(store_path), str(backup))
    saved = canonical(store_path)
    with AgentMemory.open(str(store_path), scope="project:demo") as store:
        store.remember("After the backup.", kind="note")
    refused(
        C.MEMORY_RESTORE_CONFIRMATION_REQUIRED, lambda: restore_store(str(backup), str(store_path))
    )
    assert canonical(store_path) != saved
    result = restore_store(str(backup), str(store_path), overwrite=True)
    assert result["integrity"]["ok"] and canonical(store_path) == saved
    assert [p.name for p in store_path.parent.iterdir() if ".restore-" in p.name] == []


def test_mem18_backup_refusals(store_path: Path, tmp_path: Path) -> None:
    ids = make_store(store_path)
    same = str(store_path)
    refused(C.MEMORY_BACKUP_TARGET_CONFLICT, lambda: backup_store(same, same))
    missing = str(tmp_path / "none.sqlite")
    refused(C.MEMORY_BACKUP_SOURCE_MISSING, lambda: backup_store(missing, str(tmp_path / "b")))
    existing = tmp_path / "exists.sqlite"
    existing.write_text("keep")
    refused(C.MEMORY_BACKUP_EXISTS, lambda: backup_store(same, str(existing)))
    assert existing.read_text() == "keep"
    assert backup_store(same, str(existing), overwrite=True)["integrity"]["ok"]
    drift_all(store_path, ids)
    spoiled = tmp_path / "spoiled.sqlite"
    error = refused(C.MEMORY_BACKUP_INVALID, lambda: backup_store(same, str(spoiled)))
    assert error.details["errors"] and not spoiled.exists()


def test_mem18_restore_refusals(store_path: Path, tmp_path: Path) -> None:
    ids = make_store(store_path)
    same = str(store_path)
    refused(C.MEMORY_RESTORE_TARGET_CONFLICT, lambda: restore_store(same, same))
    missing = str(tmp_path / "none.sqlite")
    refused(C.MEMORY_RESTORE_SOURCE_MISSING, lambda: restore_store(missing, str(tmp_path / "t")))
    drift_all(store_path, ids)
    target = tmp_path / "target.sqlite"
    refused(C.MEMORY_RESTORE_SOURCE_INVALID, lambda: restore_store(same, str(target)))
    assert not target.exists()


def test_mem18_restore_copy_failures_leave_the_target(
    store_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_store(store_path)
    target = tmp_path / "target.sqlite"
    make_store(target)
    before = canonical(target)
    from aidememo.agent_memory import backup as module

    real = module.inspect_store
    calls: list[str] = []

    def copy_fails(path: str) -> Any:
        calls.append(path)
        report = real(path)
        if ".restore-" in path:
            report.ok = False
        return report

    monkeypatch.setattr(module, "inspect_store", copy_fails)
    refused(
        C.MEMORY_RESTORE_COPY_INVALID,
        lambda: restore_store(str(store_path), str(target), overwrite=True),
    )
    monkeypatch.setattr(module, "inspect_store", real)
    monkeypatch.setattr(module.os, "replace", lambda *a: (_ for _ in ()).throw(OSError("disk")))
    error = refused(
        C.MEMORY_RESTORE_FAILED, lambda: restore_store(str(store_path), str(target), overwrite=True)
    )
    assert error.details == {"cause": "disk"}
    monkeypatch.undo()
    assert canonical(target) == before and inspect_store(str(target)).ok
    assert [p.name for p in tmp_path.iterdir() if ".restore-" in p.name] == []


def test_mem18_cli_backup_and_restore(store_path: Path, tmp_path: Path) -> None:
    make_store(store_path)
    backup = tmp_path / "dir" / "b.sqlite"
    out = cli("--store", str(store_path), "backup", "--path", str(backup))
    assert out.returncode == 0, out.stderr
    assert out.stdout == f"Backed up 6 memories to {backup}\nIntegrity: ok\n"
    assert (backup.parent.stat().st_mode & 0o777) == 0o700
    again = cli("--store", str(store_path), "backup", "--path", str(backup), "--json")
    assert again.returncode == 1 and again.stderr.startswith("MEMORY_BACKUP_EXISTS: ")
    over = cli("--store", str(store_path), "backup", "--path", str(backup), "--overwrite", "--json")
    assert list(json.loads(over.stdout)) == [
        "source_path",
        "backup_path",
        "pages",
        "remaining_pages",
        "integrity",
    ]
    target = tmp_path / "new" / "m.sqlite"
    done = cli("--store", str(target), "restore", str(backup), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["integrity"]["memory_count"] == 6
    refusal = cli("--store", str(target), "restore", str(backup))
    assert refusal.returncode == 1
    assert refusal.stderr.startswith("MEMORY_RESTORE_CONFIRMATION_REQUIRED: ")
    assert os.stat(target).st_mode & 0o777 == 0o600


def test_mem18_backup_and_restore_leave_the_source_directory_as_it_was(
    store_path: Path, tmp_path: Path
) -> None:
    make_store(store_path)
    names = sorted(os.listdir(store_path.parent))
    before = canonical(store_path)
    backup_store(str(store_path), str(tmp_path / "b.sqlite"))
    restore_store(str(store_path), str(tmp_path / "r.sqlite"))
    assert sorted(os.listdir(store_path.parent)) == names
    assert canonical(store_path) == before
