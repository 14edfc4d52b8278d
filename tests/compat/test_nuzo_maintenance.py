"""Maintenance against the reference Nuzo 1.2.0 (MEM-16..MEM-19): the same integrity report and
repair preview for a drifted Nuzo store, Nuzo's `integrity` and `doctor` passing on a store
aidememo repaired or restored, each side restoring the other's backups, and the same exit
status and code for each refusal of `integrity repair-fts`, `backup` and `restore`."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

import pytest

from tests.compat.nuzo_oracle import Cli, Sample


def _drift(store: Path, sample: Sample) -> None:
    i = sample.ids
    conn = sqlite3.connect(str(store), isolation_level=None)
    try:
        conn.execute("DELETE FROM memories_fts WHERE id = ?", (i["pnpm"],))
        conn.execute(
            "INSERT INTO memories_fts (id, scope, content, tags) SELECT id, scope, content, tags"
            " FROM memories_fts WHERE id = ?",
            (i["sqlite"],),
        )
        conn.execute("UPDATE memories_fts SET content = 'stale' WHERE id = ?", (i["deploy"],))
        conn.execute(
            "INSERT INTO memories_fts (id, scope, content, tags) VALUES (?, 'project:alpha',"
            " 'archived', 'cache')",
            (i["archived"],),
        )
    finally:
        conn.close()


def rows_of(store: Path) -> list[list[tuple[object, ...]]]:
    """The canonical rows: memories, events and relations, every column, ordered by id."""
    conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        return [
            conn.execute(f"SELECT * FROM {table} ORDER BY id").fetchall()
            for table in ("memories", "memory_events", "memory_relations")
        ]
    finally:
        conn.close()


def _healthy(nuzo: Cli) -> None:
    integrity = nuzo.run("integrity", "--json").json()
    assert integrity["ok"] is True and integrity["errors"] == [], integrity
    doctor = nuzo.run("doctor", "--json").json()
    assert (doctor["status"], doctor["warnings"]) == ("ok", []), doctor


def _code(run_stderr: str) -> str:
    return run_stderr.split(":", 1)[0] if run_stderr else ""


def test_mem16_integrity_report_equals_nuzos(
    nuzo: Cli, ours: Cli, sample: tuple[Path, Sample]
) -> None:
    store, ids = sample
    assert ours.run("integrity", "--json").stdout == nuzo.run("integrity", "--json").stdout
    _drift(store, ids)
    theirs = nuzo.run("integrity", "--json", check=False)
    mine = ours.run("integrity", "--json", check=False)
    assert (mine.returncode, mine.stdout) == (theirs.returncode, theirs.stdout) == (1, mine.stdout)
    assert json.loads(mine.stdout)["missing_fts_rows"] == 1
    text_theirs = nuzo.run("integrity", check=False).stdout
    assert ours.run("integrity", check=False).stdout == text_theirs
    missing = store.with_name("missing.sqlite")
    theirs = nuzo.at(missing).run("integrity", "--json", check=False)
    mine = ours.at(missing).run("integrity", "--json", check=False)
    assert (mine.returncode, mine.stdout) == (theirs.returncode, theirs.stdout)
    assert not missing.exists()


def test_mem17_preview_equals_nuzos_and_nuzo_passes_after_aidememo_repairs(
    nuzo: Cli, ours: Cli, sample: tuple[Path, Sample], tmp_path: Path
) -> None:
    store, ids = sample
    _drift(store, ids)
    theirs = nuzo.run("integrity", "repair-fts", "--json", check=False)
    mine = ours.run("integrity", "repair-fts", "--json", check=False)
    assert (mine.returncode, mine.stdout) == (theirs.returncode, theirs.stdout)
    before = rows_of(store)
    backup = tmp_path / "repair-backup.sqlite"
    done = ours.run("integrity", "repair-fts", "--apply", "--yes", "--backup-path", str(backup))
    assert json.loads(ours.run("integrity", "--json").stdout)["ok"] is True
    assert done.stdout.startswith("Repaired ")
    assert rows_of(store) == before  # canonical rows unchanged
    _healthy(nuzo)
    # Nuzo validates and restores aidememo's repair backup.
    assert nuzo.at(backup).run("integrity", "--json").json()["ok"] is True
    restored = tmp_path / "restored.sqlite"
    nuzo.at(restored).run("restore", str(backup))
    _healthy(nuzo.at(restored))


def test_mem18_each_side_restores_the_others_backup(
    nuzo: Cli, ours: Cli, sample: tuple[Path, Sample], tmp_path: Path
) -> None:
    store, _ids = sample
    rows = rows_of(store)
    by_nuzo, by_ours = tmp_path / "by-nuzo.sqlite", tmp_path / "by-ours.sqlite"
    nuzo.run("backup", "--path", str(by_nuzo))
    ours.run("backup", "--path", str(by_ours))
    mine = json.loads(ours.run("backup", "--path", str(by_ours), "--overwrite", "--json").stdout)
    theirs = json.loads(nuzo.run("backup", "--path", str(by_nuzo), "--overwrite", "--json").stdout)
    assert mine["integrity"]["ok"] is True
    for doc, path in ((mine, by_ours), (theirs, by_nuzo)):
        assert doc.pop("backup_path") == str(path)
        assert doc["integrity"].pop("path") == str(path)
    assert mine == theirs
    into_ours, into_nuzo = tmp_path / "into-ours.sqlite", tmp_path / "into-nuzo.sqlite"
    ours.at(into_ours).run("restore", str(by_nuzo))
    nuzo.at(into_nuzo).run("restore", str(by_ours))
    assert rows_of(into_ours) == rows_of(into_nuzo) == rows
    _healthy(nuzo.at(into_ours))
    mine = ours.at(into_ours).run("restore", str(by_nuzo), "--yes", "--json").stdout
    theirs = nuzo.at(into_ours).run("restore", str(by_nuzo), "--yes", "--json").stdout
    assert mine == theirs


REFUSALS = {
    "apply_without_yes": ("integrity", "repair-fts", "--apply"),
    "dry_run_and_apply": ("integrity", "repair-fts", "--dry-run", "--apply"),
    "yes_without_apply": ("integrity", "repair-fts", "--yes"),
    "backup_path_without_apply": ("integrity", "repair-fts", "--backup-path", "{tmp}/b.sqlite"),
    "backup_overlaps_wal": (
        "integrity",
        "repair-fts",
        "--apply",
        "--yes",
        "--backup-path",
        "{store}-wal",
    ),
    "backup_exists": (
        "integrity",
        "repair-fts",
        "--apply",
        "--yes",
        "--backup-path",
        "{tmp}/exists",
    ),
    "backup_dangling_link": (
        "integrity",
        "repair-fts",
        "--apply",
        "--yes",
        "--backup-path",
        "{tmp}/dangling",
    ),
    "plain_backup_exists": ("backup", "--path", "{tmp}/exists"),
    "plain_backup_same_path": ("backup", "--path", "{store}"),
    "restore_needs_yes": ("restore", "{tmp}/exists"),
    "restore_same_path": ("restore", "{store}", "--yes"),
    "restore_missing": ("restore", "{tmp}/none.sqlite", "--yes"),
    "restore_invalid": ("restore", "{tmp}/exists", "--yes"),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_mem17_mem18_refusals_match_nuzos(
    nuzo: Cli, ours: Cli, sample: tuple[Path, Sample], tmp_path: Path, case: str
) -> None:
    store, ids = sample
    _drift(store, ids)
    (tmp_path / "exists").write_text("not a store")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    args = [a.format(tmp=tmp_path, store=store) for a in REFUSALS[case]]
    rows = rows_of(store)
    theirs = nuzo.run(*args, check=False)
    mine = ours.run(*args, check=False)
    assert theirs.returncode in (1, 2), (case, theirs.stdout, theirs.stderr)
    assert (mine.returncode, _code(mine.stderr) if mine.returncode == 1 else "") == (
        theirs.returncode,
        _code(theirs.stderr) if theirs.returncode == 1 else "",
    ), (case, mine.stderr, theirs.stderr)
    assert rows_of(store) == rows
    assert (tmp_path / "exists").read_text() == "not a store"


def test_mem17_unrepairable_and_symlinked_sources_match_nuzos(
    nuzo: Cli, ours: Cli, sample: tuple[Path, Sample], tmp_path: Path
) -> None:
    store, ids = sample
    _drift(store, ids)
    link = tmp_path / "link.sqlite"
    link.symlink_to(store)
    apply = ("integrity", "repair-fts", "--apply", "--yes", "--backup-path")
    for cli in (nuzo, ours):
        run = cli.at(link).run(*apply, str(tmp_path / f"{cli.name}.sqlite"), check=False)
        assert (run.returncode, _code(run.stderr)) == (1, "MEMORY_FTS_REPAIR_PATH_UNSAFE")
    conn = sqlite3.connect(str(store), isolation_level=None)
    conn.execute("UPDATE memories SET tags = '{bad' WHERE id = ?", (ids.ids["beta"],))
    conn.close()
    for cli in (nuzo, ours):
        preview = cli.run("integrity", "repair-fts", "--json", check=False)
        assert json.loads(preview.stdout)["status"] == "blocked"
        run = cli.run(*apply, str(tmp_path / f"{cli.name}-2.sqlite"), check=False)
        assert (run.returncode, _code(run.stderr)) == (1, "MEMORY_FTS_REPAIR_SOURCE_INVALID")


def test_mem19_doctor_prints_what_nuzos_prints(
    nuzo: Cli, ours: Cli, sample: tuple[Path, Sample]
) -> None:
    store, ids = sample
    theirs, mine = nuzo.run("doctor", "--json"), ours.run("doctor", "--json")
    assert mine.stdout == theirs.stdout
    assert ours.run("doctor").stdout == nuzo.run("doctor").stdout
    scoped = ("doctor", "--json")
    assert ours.run(*scoped, scope="project:alpha").stdout == (
        nuzo.run(*scoped, scope="project:alpha").stdout
    )
    store.chmod(0o644)
    _drift(store, ids)
    theirs, mine = nuzo.run("doctor", "--json"), ours.run("doctor", "--json")
    assert mine.stdout == theirs.stdout and mine.json()["status"] == "warning"
    assert ours.run("doctor").stdout == nuzo.run("doctor").stdout
    for flags in (("--privacy",), ("--privacy", "--json")):
        assert ours.run("doctor", *flags).stdout == nuzo.run("doctor", *flags).stdout
    secret = ("doctor", "--scan-secrets", "--json")
    assert ours.run(*secret).json()["secret_scan"] == nuzo.run(*secret).json()["secret_scan"]
    assert store.stat().st_mode & 0o777 == 0o644


def test_mem19_doctor_in_a_project_prints_what_nuzos_prints(
    nuzo: Cli, ours: Cli, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    code, _out, err = nuzo.runner(["memory", "init", "--project"], nuzo.env(), project)
    assert code == 0, err
    remembered = [
        "memory",
        "--scope",
        "project:auto",
        "remember",
        "Project note.",
        "--kind",
        "note",
    ]
    assert ours.runner(remembered, ours.env(), project)[0] == 0
    for args in (
        ["memory", "doctor", "--json"],
        ["memory", "doctor", "--scan-secrets"],
        ["memory", "doctor", "--privacy"],
        ["memory", "doctor", "--privacy", "--json", "--scan-secrets"],
    ):
        theirs = nuzo.runner(args, nuzo.env(), project)
        mine = ours.runner(args, ours.env(), project)
        assert mine == theirs, args
    env = nuzo.env() | {"NUZO_MEMORY_SCOPE": "team:core"}
    args = ["memory", "doctor"]
    assert ours.runner(args, env, project) == nuzo.runner(args, env, project)
    # Git checked: a project outside any worktree, then one whose store is tracked.
    env = {k: v for k, v in nuzo.env().items() if k != "NUZO_DOCTOR_SKIP_GIT"}
    args = ["memory", "doctor", "--json"]
    assert ours.runner(args, env, project) == nuzo.runner(args, env, project)
    git = ["git", "-C", str(project), "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-f", ".nuzo"], check=True)
    theirs = nuzo.runner(args, env, project)
    assert json.loads(theirs[1])["git_tracking"]["status"] == "tracked"
    assert ours.runner(args, env, project) == theirs
    args = ["memory", "doctor", "--privacy"]
    assert ours.runner(args, env, project) == nuzo.runner(args, env, project)


def test_mem17_applied_repair_reports_what_nuzos_reports(
    nuzo: Cli, ours: Cli, sample: tuple[Path, Sample], tmp_path: Path
) -> None:
    store, ids = sample
    _drift(store, ids)
    copies = {}
    for name in ("nuzo", "ours"):
        folder = tmp_path / name
        folder.mkdir(mode=0o700)
        for suffix in ("", "-wal", "-shm"):
            source = Path(f"{store}{suffix}")
            if source.exists():
                (folder / f"memories.sqlite{suffix}").write_bytes(source.read_bytes())
        copies[name] = folder / "memories.sqlite"
    outputs = {}
    for name, cli in (("nuzo", nuzo), ("ours", ours)):
        backup = copies[name].with_name("repair.sqlite")
        run = cli.at(copies[name]).run(
            "integrity", "repair-fts", "--apply", "--yes", "--backup-path", str(backup), "--json"
        )
        outputs[name] = run.stdout.replace(str(copies[name].parent), "<dir>")
        assert rows_of(copies[name]) == rows_of(store)
    assert outputs["ours"] == outputs["nuzo"]
    assert json.loads(outputs["ours"])["status"] == "repaired"
