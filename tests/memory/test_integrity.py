"""The read-only integrity report (MEM-16)."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

from aidememo.agent_memory.integrity import inspect_store
from tests.memory.maint_support import canonical, cli, drift_all, fts_rows, make_store, raw


def test_mem16_healthy_store_reports_ok(store_path: Path) -> None:
    make_store(store_path)
    report = inspect_store(str(store_path))
    assert report.ok and report.canonical_ok and report.fts_ok and report.fts_schema_ok
    assert (report.memory_count, report.active_memory_count, report.fts_row_count) == (6, 5, 5)
    assert report.errors == [] and report.integrity_check == "ok"
    assert report.schema_version == 7


def test_mem16_each_drift_class_is_counted_apart(store_path: Path) -> None:
    ids = make_store(store_path)
    drift_all(store_path, ids)
    report = inspect_store(str(store_path))
    assert not report.ok and report.canonical_ok and not report.fts_ok
    assert (
        report.missing_fts_rows,
        report.duplicate_fts_rows,
        report.mismatched_fts_rows,
        report.orphan_fts_rows,
    ) == (1, 1, 1, 1)
    assert report.errors == [
        "1 active memory row(s) are missing from FTS",
        "1 orphan or archived FTS row(s) found",
        "1 duplicate FTS row(s) found",
        "1 stale FTS row(s) found",
    ]


def test_mem16_scope_and_tag_text_drift_are_mismatches(store_path: Path) -> None:
    ids = make_store(store_path)
    conn = raw(store_path)
    conn.execute("UPDATE memories_fts SET scope = 'project:else' WHERE id = ?", (ids["a"],))
    conn.execute("UPDATE memories_fts SET tags = 'web tooling' WHERE id = ?", (ids["b"],))
    conn.close()
    assert inspect_store(str(store_path)).mismatched_fts_rows == 2


def test_mem16_report_is_read_only_and_makes_no_sidecars(store_path: Path) -> None:
    ids = make_store(store_path)
    drift_all(store_path, ids)
    os.chmod(store_path, 0o644)
    before, fts = canonical(store_path), fts_rows(store_path)
    names = sorted(os.listdir(store_path.parent))
    inspect_store(str(store_path))
    assert canonical(store_path) == before and fts_rows(store_path) == fts
    assert sorted(os.listdir(store_path.parent)) == names
    assert store_path.stat().st_mode & 0o777 == 0o644  # diagnostics never repair modes


def test_mem16_missing_symlink_and_non_file_are_reported_not_opened(tmp_path: Path) -> None:
    missing = inspect_store(str(tmp_path / "none.sqlite"))
    assert (missing.integrity_check, missing.errors) == (
        "missing",
        ["memory store does not exist"],
    )
    target = tmp_path / "real.sqlite"
    make_store(target)
    link = tmp_path / "link.sqlite"
    link.symlink_to(target)
    assert inspect_store(str(link)).integrity_check == "unsafe_symlink"
    assert inspect_store(str(tmp_path)).integrity_check == "not_a_file"


def test_mem16_invalid_tags_foreign_keys_and_altered_schemas_fail_canonical(
    tmp_path: Path,
) -> None:
    tags = tmp_path / "tags.sqlite"
    ids = make_store(tags)
    conn = raw(tags)
    conn.execute("UPDATE memories SET tags = '{bad' WHERE id = ?", (ids["a"],))
    conn.close()
    report = inspect_store(str(tags))
    assert not report.canonical_ok and "1 canonical memory row(s) are invalid" in report.errors

    keys = tmp_path / "keys.sqlite"
    make_store(keys)
    conn = raw(keys)
    conn.execute("PRAGMA foreign_keys = OFF")
    conn.execute(
        "INSERT INTO memory_relations (id, source_memory_id, target_memory_id, relation,"
        " created_at) VALUES ('rel_x', 'mem_none', 'mem_gone', 'related_to', 'now')"
    )
    conn.close()
    report = inspect_store(str(keys))
    assert report.foreign_key_violations == 2 and not report.canonical_ok

    fts = tmp_path / "fts.sqlite"
    make_store(fts)
    conn = raw(fts)
    conn.execute("DROP TABLE memories_fts")
    conn.execute("CREATE VIRTUAL TABLE memories_fts USING fts5(id, scope, content, tags)")
    conn.close()
    report = inspect_store(str(fts))
    assert report.canonical_ok and not report.fts_schema_ok
    assert "memories_fts schema is invalid" in report.errors


def test_mem16_cli_text_json_and_exit_status(store_path: Path) -> None:
    ids = make_store(store_path)
    ok = cli("--store", str(store_path), "integrity")
    assert ok.returncode == 0 and ok.stdout.splitlines()[1] == "Status: ok"
    drift_all(store_path, ids)
    failed = cli("--store", str(store_path), "integrity", "--json")
    assert failed.returncode == 1
    body = json.loads(failed.stdout)
    assert list(body)[:4] == ["ok", "canonical_ok", "fts_ok", "fts_schema_ok"]
    assert body["missing_fts_rows"] == 1 and body["ok"] is False
    # Content-free: no memory text appears in the report.
    assert "pnpm" not in failed.stdout and "stale text" not in failed.stdout
    missing = cli("--store", str(store_path.with_name("none.sqlite")), "integrity")
    assert missing.returncode == 1 and not store_path.with_name("none.sqlite").exists()


def test_mem16_newer_schema_is_reported_not_refused(store_path: Path) -> None:
    make_store(store_path)
    conn = sqlite3.connect(str(store_path))
    conn.execute("PRAGMA user_version = 8")
    conn.close()
    report = inspect_store(str(store_path))
    assert report.schema_version == 8 and not report.canonical_ok
    assert "schema version 8 is newer than supported version 7" in report.errors
