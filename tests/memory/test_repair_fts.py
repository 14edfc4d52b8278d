"""The guarded FTS repair (MEM-17): the repair itself and a fixture for every refusal."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from aidememo.agent_memory import repair_fts
from aidememo.agent_memory.errors import AgentMemoryError
from aidememo.agent_memory.errors import MemoryErrorCode as C
from aidememo.agent_memory.integrity import inspect_store
from aidememo.agent_memory.repair_fts import plan_repair, repair
from tests.memory.maint_support import (
    canonical,
    cli,
    drift_all,
    fts_rows,
    make_store,
    raw,
    rebuilt_fts,
)


@pytest.fixture
def drifted(store_path: Path) -> Path:
    drift_all(store_path, make_store(store_path))
    return store_path


def refused(code: C, call: Callable[[], Any]) -> AgentMemoryError:
    with pytest.raises(AgentMemoryError) as info:
        call()
    assert info.value.code is code, info.value.to_dict()
    return info.value


def test_mem17_repair_rebuilds_every_drift_class_after_a_validated_backup(drifted: Path) -> None:
    before, old_fts = canonical(drifted), fts_rows(drifted)
    backup = drifted.with_name("b.sqlite")
    result = repair(str(drifted), str(backup), confirm=True)
    assert result["repaired"] and result["backupPath"] == str(backup)
    assert result["after"].ok and result["before"].missing_fts_rows == 1
    # Canonical rows unchanged, FTS equal to the canonical rebuild.
    assert canonical(drifted) == before
    assert fts_rows(drifted) == rebuilt_fts(drifted) != old_fts
    # The backup: one self-contained 0600 DELETE-journal file, the pre-repair canonical rows,
    # its own FTS rebuilt, no temporary or sidecar files left.
    assert backup.stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in drifted.parent.iterdir()) == ["b.sqlite", "memories.sqlite"]
    conn = sqlite3.connect(str(backup))
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    conn.close()
    assert canonical(backup) == before and inspect_store(str(backup)).ok
    # The backup restores to a searchable store.
    restored = drifted.with_name("restored.sqlite")
    code = cli("--store", str(restored), "restore", str(backup))
    assert code.returncode == 0, code.stderr
    found = cli("--store", str(restored), "--scope", "project:demo", "recall", "pnpm")
    assert "pnpm" in found.stdout


def test_mem17_healthy_store_writes_nothing(store_path: Path) -> None:
    make_store(store_path)
    backup = store_path.with_name("b.sqlite")
    result = repair(str(store_path), str(backup), confirm=True)
    assert (result["repaired"], result["backupPath"]) == (False, None)
    assert not backup.exists()


def test_mem17_preview_is_read_only_and_content_free(drifted: Path) -> None:
    before, fts = canonical(drifted), fts_rows(drifted)
    names = sorted(os.listdir(drifted.parent))
    out = cli("--store", str(drifted), "integrity", "repair-fts", "--json")
    assert out.returncode == 1
    body = json.loads(out.stdout)
    assert (body["mode"], body["status"], body["repairable"]) == (
        "preview",
        "repair_required",
        True,
    )
    assert "pnpm" not in out.stdout and "stale text" not in out.stdout
    assert canonical(drifted) == before and fts_rows(drifted) == fts
    assert sorted(os.listdir(drifted.parent)) == names
    text = cli("--store", str(drifted), "integrity", "repair-fts", "--dry-run")
    assert text.returncode == 1 and text.stdout.startswith("FTS repair preview (no changes made)")


def test_mem17_cli_apply_json_and_usage_errors(drifted: Path) -> None:
    for flags in (["--dry-run", "--apply"], ["--yes"], ["--backup-path", "x.sqlite"]):
        out = cli("--store", str(drifted), "integrity", "repair-fts", *flags)
        assert out.returncode == 2, flags
    unconfirmed = cli("--store", str(drifted), "integrity", "repair-fts", "--apply")
    assert unconfirmed.returncode == 1
    assert unconfirmed.stderr.startswith("MEMORY_FTS_REPAIR_CONFIRMATION_REQUIRED: ")
    assert not Path(repair_fts.default_backup_path(str(drifted))).exists()
    done = cli("--store", str(drifted), "integrity", "repair-fts", "--apply", "--yes", "--json")
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    assert (body["status"], body["reindexed_rows"], body["after"]["ok"]) == ("repaired", 5, True)
    assert body["backup_path"] == repair_fts.default_backup_path(str(drifted))
    again = cli("--store", str(drifted), "integrity", "repair-fts", "--apply", "--yes")
    assert again.stdout.startswith("FTS index is already healthy: ")


# -- refusals --------------------------------------------------------------------------------


def test_mem17_refuses_without_confirmation(drifted: Path) -> None:
    refused(C.MEMORY_FTS_REPAIR_CONFIRMATION_REQUIRED, lambda: repair(str(drifted)))
    assert not Path(repair_fts.default_backup_path(str(drifted))).exists()


def test_mem17_refuses_overlapping_filesets(drifted: Path, tmp_path: Path) -> None:
    wal = Path(f"{drifted}-wal")
    refused(
        C.MEMORY_FTS_REPAIR_BACKUP_CONFLICT, lambda: repair(str(drifted), str(wal), confirm=True)
    )
    shm = Path(f"{drifted}-shm")
    refused(
        C.MEMORY_FTS_REPAIR_BACKUP_CONFLICT, lambda: repair(str(drifted), str(shm), confirm=True)
    )
    # A source named like a sidecar of the backup.
    odd = tmp_path / "odd" / "x.sqlite-wal"
    drift_all(odd, make_store(odd))
    backup = odd.with_name("x.sqlite")
    refused(
        C.MEMORY_FTS_REPAIR_BACKUP_CONFLICT, lambda: repair(str(odd), str(backup), confirm=True)
    )
    # The same file through a directory alias: real parent paths are compared.
    alias = tmp_path / "alias"
    alias.symlink_to(drifted.parent, target_is_directory=True)
    same = alias / drifted.name
    refused(
        C.MEMORY_FTS_REPAIR_BACKUP_CONFLICT, lambda: repair(str(drifted), str(same), confirm=True)
    )


def test_mem17_refuses_symlinked_or_non_file_leaves(drifted: Path, tmp_path: Path) -> None:
    link = tmp_path / "link.sqlite"
    link.symlink_to(drifted)
    assert plan_repair(str(link))["report"].integrity_check == "unsafe_symlink"
    refused(C.MEMORY_FTS_REPAIR_PATH_UNSAFE, lambda: repair(str(link), confirm=True))
    dangling = tmp_path / "dangling.sqlite"
    dangling.symlink_to(tmp_path / "nowhere.sqlite")
    refused(
        C.MEMORY_FTS_REPAIR_PATH_UNSAFE, lambda: repair(str(drifted), str(dangling), confirm=True)
    )
    assert not (tmp_path / "nowhere.sqlite").exists()
    folder = tmp_path / "folder.sqlite"
    folder.mkdir()
    refused(C.MEMORY_FTS_REPAIR_PATH_UNSAFE, lambda: repair(str(folder), confirm=True))


def test_mem17_allows_a_stable_directory_alias(drifted: Path, tmp_path: Path) -> None:
    alias = tmp_path / "alias"
    alias.symlink_to(drifted.parent, target_is_directory=True)
    result = repair(str(alias / drifted.name), str(alias / "b.sqlite"), confirm=True)
    assert result["repaired"] and inspect_store(str(drifted)).ok
    assert (drifted.parent / "b.sqlite").is_file()


def _alter(path: Path, *sql: str) -> None:
    conn = raw(path)
    conn.execute("PRAGMA foreign_keys = OFF")
    for statement in sql:
        conn.execute(statement)
    conn.close()


SOURCE_INVALID = {
    "unsupported_version": ("PRAGMA user_version = 6",),
    "newer_version": ("PRAGMA user_version = 8",),
    "invalid_tag_json": ("UPDATE memories SET tags = '{broken' WHERE kind = 'preference'",),
    "foreign_key_violation": (
        "INSERT INTO memory_relations (id, source_memory_id, target_memory_id, relation,"
        " created_at) VALUES ('rel_x', 'mem_none', 'mem_gone', 'related_to', 'now')",
    ),
    "events_replaced_by_a_view": (
        "ALTER TABLE memory_events RENAME TO memory_events_old",
        "CREATE VIEW memory_events AS SELECT * FROM memory_events_old",
    ),
    "fts_without_unindexed": (
        "DROP TABLE memories_fts",
        "CREATE VIRTUAL TABLE memories_fts USING fts5(id, scope, content, tags)",
    ),
    "fts_other_tokenizer": (
        "DROP TABLE memories_fts",
        "CREATE VIRTUAL TABLE memories_fts USING fts5(id UNINDEXED, scope UNINDEXED, content,"
        " tags, tokenize = 'porter')",
    ),
}


@pytest.mark.parametrize("case", sorted(SOURCE_INVALID))
def test_mem17_refuses_an_unrepairable_source(drifted: Path, case: str) -> None:
    _alter(drifted, *SOURCE_INVALID[case])
    before = canonical(drifted)
    assert plan_repair(str(drifted))["repairable"] is False
    error = refused(C.MEMORY_FTS_REPAIR_SOURCE_INVALID, lambda: repair(str(drifted), confirm=True))
    assert error.details["errors"] or case == "unsupported_version"
    assert canonical(drifted) == before
    assert not Path(repair_fts.default_backup_path(str(drifted))).exists()
    out = cli("--store", str(drifted), "integrity", "repair-fts", "--json")
    assert (out.returncode, json.loads(out.stdout)["status"]) == (1, "blocked")


@pytest.mark.parametrize("suffix", ["", "-wal", "-shm"])
def test_mem17_refuses_an_existing_backup_fileset(drifted: Path, suffix: str) -> None:
    backup = drifted.with_name("b.sqlite")
    Path(f"{backup}{suffix}").write_text("keep")
    refused(C.MEMORY_BACKUP_EXISTS, lambda: repair(str(drifted), str(backup), confirm=True))
    assert Path(f"{backup}{suffix}").read_text() == "keep"


def _hook_at(monkeypatch: pytest.MonkeyPatch, step: str, action: Callable[[], None]) -> None:
    real = repair_fts.reached

    def hook(name: str) -> None:
        if name == step:
            action()
        real(name)

    monkeypatch.setattr(repair_fts, "reached", hook)


def test_mem17_refuses_a_backup_path_that_appears_while_publishing(
    drifted: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backup = drifted.with_name("b.sqlite")
    before, fts = canonical(drifted), fts_rows(drifted)
    _hook_at(monkeypatch, "backup_rebuilt", lambda: backup.write_text("raced"))
    refused(C.MEMORY_BACKUP_EXISTS, lambda: repair(str(drifted), str(backup), confirm=True))
    assert backup.read_text() == "raced"
    assert canonical(drifted) == before and fts_rows(drifted) == fts
    assert sorted(p.name for p in drifted.parent.iterdir()) == ["b.sqlite", "memories.sqlite"]


def test_mem17_refuses_a_sidecar_that_appears_while_publishing(
    drifted: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backup = drifted.with_name("b.sqlite")
    real_link = os.link

    def link(src: Any, dst: Any, **kw: Any) -> None:
        real_link(src, dst, **kw)
        Path(f"{dst}-wal").write_text("raced")

    monkeypatch.setattr(repair_fts.os, "link", link)
    refused(C.MEMORY_BACKUP_EXISTS, lambda: repair(str(drifted), str(backup), confirm=True))
    assert not backup.exists()  # the published name is withdrawn


def test_mem17_refuses_a_source_replaced_while_running(
    drifted: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy = drifted.with_name("copy.sqlite")

    def replace() -> None:
        shutil.copyfile(drifted, copy)
        os.replace(copy, drifted)

    _hook_at(monkeypatch, "locked", replace)
    refused(
        C.MEMORY_FTS_REPAIR_SOURCE_CHANGED, lambda: repair(str(drifted), str(copy), confirm=True)
    )
    assert not copy.exists()


def _set_version(path: Path) -> None:
    conn = sqlite3.connect(str(path))
    conn.execute("PRAGMA user_version = 8")
    conn.close()


def test_mem17_refuses_a_snapshot_that_fails_validation(
    drifted: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backup = drifted.with_name("b.sqlite")
    before = canonical(drifted)

    def spoil() -> None:
        (temp,) = [p for p in drifted.parent.iterdir() if ".tmp-" in p.name]
        _set_version(temp)

    _hook_at(monkeypatch, "snapshot", spoil)
    refused(
        C.MEMORY_FTS_REPAIR_BACKUP_INVALID, lambda: repair(str(drifted), str(backup), confirm=True)
    )
    assert not backup.exists() and canonical(drifted) == before
    assert sorted(p.name for p in drifted.parent.iterdir()) == ["memories.sqlite"]


def test_mem17_refuses_a_published_backup_that_fails_validation(
    drifted: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backup = drifted.with_name("b.sqlite")
    _hook_at(monkeypatch, "published", lambda: _set_version(backup))
    refused(
        C.MEMORY_FTS_REPAIR_BACKUP_INVALID, lambda: repair(str(drifted), str(backup), confirm=True)
    )
    assert not backup.exists()


def test_mem17_failed_rebuild_rolls_back_and_keeps_the_validated_backup(
    drifted: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backup = drifted.with_name("b.sqlite")
    before, fts = canonical(drifted), fts_rows(drifted)
    monkeypatch.setenv("AIDEMEMO_TEST_FAIL_AT", "source_rebuilt")
    error = refused(
        C.MEMORY_FTS_REPAIR_FAILED, lambda: repair(str(drifted), str(backup), confirm=True)
    )
    assert error.details["backupPath"] == str(backup)
    assert canonical(drifted) == before and fts_rows(drifted) == fts
    assert inspect_store(str(backup)).ok and canonical(backup) == before


def test_mem17_rebuild_that_does_not_match_is_refused(
    drifted: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backup = drifted.with_name("b.sqlite")
    fts = fts_rows(drifted)
    calls: list[int] = []
    real = repair_fts.rebuild_in

    def short_rebuild(conn: sqlite3.Connection) -> None:
        real(conn)
        calls.append(1)
        if len(calls) == 2:  # the source's rebuild, not the backup's
            conn.execute(
                "DELETE FROM memories_fts WHERE rowid = (SELECT MIN(rowid) FROM memories_fts)"
            )

    monkeypatch.setattr(repair_fts, "rebuild_in", short_rebuild)
    error = refused(
        C.MEMORY_FTS_REPAIR_FAILED, lambda: repair(str(drifted), str(backup), confirm=True)
    )
    assert error.details == {"backupPath": str(backup), "causeCode": "MEMORY_FTS_REPAIR_FAILED"}
    assert fts_rows(drifted) == fts and inspect_store(str(backup)).ok


def test_mem17_a_store_repaired_meanwhile_is_left_alone(
    drifted: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backup = drifted.with_name("b.sqlite")
    real = repair_fts.plan_repair
    calls: list[str] = []

    def plan_then_fix(path: str) -> dict[str, Any]:
        plan = real(path)
        if not calls:
            # Another process rebuilds the index between the preview and the writer lock.
            conn = raw(drifted)
            conn.execute("BEGIN IMMEDIATE")
            repair_fts.rebuild_in(conn)
            conn.execute("COMMIT")
            conn.close()
        calls.append(path)
        return plan

    monkeypatch.setattr(repair_fts, "plan_repair", plan_then_fix)
    result = repair(str(drifted), str(backup), confirm=True)
    assert len(calls) == 2 and result["repaired"] is False and not backup.exists()
    assert inspect_store(str(drifted)).ok
