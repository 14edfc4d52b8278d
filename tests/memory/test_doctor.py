"""The content-free doctor (MEM-19): file safety, Git tracking, integrity, secret counts."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.memory.maint_support import cli, drift_all, make_store, raw

SENTINEL = "ghp_123456789012345678901234567890123456"


Doctor = Callable[..., str]


@pytest.fixture
def doctor(monkeypatch: pytest.MonkeyPatch) -> Doctor:
    """`memory --store STORE doctor FLAGS` in process, from `cwd`, Git checked when `git`."""

    def run(store: Path, *flags: str, cwd: Path | None = None, git: bool = False) -> str:
        with monkeypatch.context() as patch:
            if cwd is not None:
                patch.chdir(cwd)
            if git:
                patch.delenv("NUZO_DOCTOR_SKIP_GIT", raising=False)
            else:
                patch.setenv("NUZO_DOCTOR_SKIP_GIT", "1")
            ran = cli("--store", str(store), "doctor", *flags)
        assert ran.returncode == 0, ran.stderr
        return ran.stdout

    return run


def test_mem19_healthy_store_is_ok(store_path: Path, doctor: Doctor) -> None:
    make_store(store_path)
    report = json.loads(doctor(store_path, "--json"))
    assert (report["status"], report["warnings"]) == ("ok", [])
    assert report["integrity"]["ok"] and report["file_safety"]["unsafe"] == []
    assert report["git_tracking"]["status"] == "skipped"
    assert report["secret_scan"]["status"] == "not_requested"
    text = doctor(store_path)
    assert text.splitlines()[-1] == "Status: ok"


def test_mem19_unsafe_modes_and_links_are_reported_not_changed(
    store_path: Path, doctor: Doctor
) -> None:
    make_store(store_path)
    os.chmod(store_path, 0o644)
    os.chmod(store_path.parent, 0o755)
    (store_path.parent / "old.bak").write_text("x")
    report = json.loads(doctor(store_path, "--json"))
    reasons = {(Path(f["path"]).name, f["reason"]) for f in report["file_safety"]["unsafe"]}
    assert {("memories.sqlite", "permissions"), ("store", "permissions")} <= reasons
    assert [Path(p).name for p in report["file_safety"]["stale_artifacts"]] == ["old.bak"]
    assert report["status"] == "warning"
    assert store_path.stat().st_mode & 0o777 == 0o644  # doctor never chmods
    assert store_path.parent.stat().st_mode & 0o777 == 0o755
    link = store_path.with_name("link.sqlite")
    link.symlink_to(store_path)
    linked = json.loads(doctor(link, "--json"))
    assert {"symlink"} <= {f["reason"] for f in linked["file_safety"]["unsafe"]}
    assert linked["integrity"]["integrity_check"] == "unsafe_symlink"


def test_mem19_tracked_memory_files_are_found(tmp_path: Path, doctor: Doctor) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)
    make_store(repo / "data" / "memories.sqlite")
    (repo / "notes.memory.export.json").write_text("{}")
    (repo / "README").write_text("x")
    subprocess.run([*git, "add", "-f", "."], check=True)
    report = json.loads(doctor(repo / "data" / "memories.sqlite", "--json", cwd=repo, git=True))
    tracked = report["git_tracking"]
    assert tracked["status"] == "tracked"
    assert sorted(tracked["trackedFiles"]) == ["data/memories.sqlite", "notes.memory.export.json"]
    assert "2 local memory file(s) are tracked by Git" in report["warnings"]
    text = doctor(repo / "data" / "memories.sqlite", cwd=repo, git=True)
    assert "Tracked memory file: data/memories.sqlite" in text
    outside = json.loads(
        doctor(repo / "data" / "memories.sqlite", "--json", cwd=tmp_path, git=True)
    )
    assert outside["git_tracking"]["status"] == "unavailable"


def test_mem19_secret_scan_counts_by_kind_only(store_path: Path, doctor: Doctor) -> None:
    ids = make_store(store_path)
    conn = raw(store_path)
    conn.execute("UPDATE memories SET content = ? WHERE id = ?", (f"token {SENTINEL}", ids["a"]))
    conn.execute(
        "UPDATE memories_fts SET content = ? WHERE id = ?", (f"token {SENTINEL}", ids["a"])
    )
    conn.close()
    out = doctor(store_path, "--json", "--scan-secrets")
    report = json.loads(out)
    assert report["secret_scan"] == {
        "status": "completed",
        "scanned_records": 5,
        "flagged_records": 1,
        "findings_by_kind": {"github_token": 1},
    }
    assert SENTINEL not in out and "pnpm" not in out
    text = doctor(store_path, "--scan-secrets")
    assert "Secret scan: 1 flagged of 5 active record(s)" in text and SENTINEL not in text


def test_mem19_missing_store_and_drift_are_warnings_and_nothing_is_created(
    store_path: Path, doctor: Doctor
) -> None:
    report = json.loads(doctor(store_path, "--json"))
    assert report["store_exists"] is False and not store_path.exists()
    assert "memory store has not been initialized" in report["warnings"]
    assert doctor(store_path).count("Integrity: missing") == 1
    drift_all(store_path, make_store(store_path))
    drifted = json.loads(doctor(store_path, "--json"))
    assert "Memory integrity: 1 stale FTS row(s) found" in drifted["warnings"]


def test_mem19_privacy_report_has_counts_and_codes_but_no_paths(
    store_path: Path, doctor: Doctor
) -> None:
    missing = json.loads(doctor(store_path, "--privacy", "--json"))
    assert [f["code"] for f in missing["findings"]] == ["store_missing"]
    ids = make_store(store_path)
    os.chmod(store_path, 0o644)
    conn = raw(store_path)
    conn.execute("UPDATE memories SET content = ? WHERE id = ?", (f"token {SENTINEL}", ids["a"]))
    conn.close()
    out = doctor(store_path, "--privacy", "--json", "--scan-secrets")
    report = json.loads(out)
    assert [f["code"] for f in report["findings"]] == [
        "unsafe_runtime_paths",
        "secret_patterns_detected",
    ]
    assert report["status"] == "warning" and report["storage"]["initialized"] is True
    text = doctor(store_path, "--privacy")
    for printed in (out, text):
        assert str(store_path.parent) not in printed and SENTINEL not in printed
    assert text.splitlines()[0] == "Nuzo privacy report (read-only)"
