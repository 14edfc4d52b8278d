"""Stores aidememo wrote or changed stay Nuzo stores (MEM-92): the real Nuzo's `integrity` and
`doctor` pass on them, Nuzo reads aidememo's changes back, and a store aidememo created has
Nuzo's schema exactly.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.compat.nuzo_oracle import (
    Cli,
    Sample,
    aidememo_cli,
    make_store,
    nuzo_cli,
    rows_of,
    schema_of,
)
from tests.compat.nuzo_replay import Recording


def _unordered(schema: dict[str, Any]) -> dict[str, Any]:
    master = [row for row in schema["master"] if row[:2] != ("table", "memories")]
    columns = {t: sorted(c[1:] for c in cols) for t, cols in schema["columns"].items()}
    return {"user_version": schema["user_version"], "master": master, "columns": columns}


def _by_role(text: str, sample: Sample) -> str:
    for role, memory_id in sample.ids.items():
        text = text.replace(memory_id, f"<{role}>")
    return text


def _assert_healthy(nuzo: Cli) -> None:
    integrity = nuzo.run("integrity", "--json").json()
    assert integrity["ok"] is True, integrity
    assert integrity["errors"] == [], integrity
    doctor = nuzo.run("doctor", "--json").json()
    assert doctor["status"] == "ok", doctor
    assert doctor["warnings"] == [], doctor
    assert doctor["file_safety"]["unsafe"] == [], doctor


def test_mem92_nuzo_checks_pass_after_aidememo_changes_a_nuzo_store(
    nuzo: Cli, ours: Cli, sample: tuple[Path, Sample]
) -> None:
    store, ids = sample
    i = ids.ids
    new_id = ours.run(
        "remember",
        "新的缓存策略\uff1a按租户分区",
        "--kind",
        "project_decision",
        "--tag",
        "cache",
        scope="project:alpha",
    ).stdout.strip()
    ours.run(
        "update",
        i["sqlite"],
        "--content",
        "Sessions live in SQLite (WAL, 5 s busy timeout).",
        "--tag",
        "storage",
        "sqlite",
        "wal",
        "--expected-revision",
        "1",
    )
    ours.run("update", i["deploy"], "--clear-expires-at", "--confidence-state", "user_confirmed")
    ours.run("update", i["team"], "--kind", "fact", "--tag", "migration")
    ours.run("challenge", i["accent"], "--outcome", "stale", "--reason", "translated")
    ours.run(
        "challenge",
        i["cjk"],
        "--outcome",
        "superseded",
        "--reason",
        "new plan",
        "--superseded-by",
        new_id,
    )
    rel = ours.run(
        "relate",
        i["beta"],
        "--target",
        i["global_pref"],
        "--relation",
        "related_to",
        "--reason",
        "cache style",
    ).stdout.split()[0]
    ours.run("unrelate", ids.relations["related"], "--reason", "no longer related")
    ours.run("forget", i["agent"], "--archive", "--reason", "agent retired")
    ours.run("forget", i["global_fact"], "--delete", "--yes")
    ours.run("forget-many", "--tag", "pt", "--apply", "--yes")
    _assert_healthy(nuzo)

    shown = nuzo.run("show", i["sqlite"], "--json").json()["memory"]
    assert shown["content"] == "Sessions live in SQLite (WAL, 5 s busy timeout)."
    assert shown["tags"] == ["storage", "sqlite", "wal"]
    assert shown["revision"] == 2
    assert nuzo.run("show", i["deploy"], "--json").json()["memory"]["expires_at"] is None
    team = nuzo.run("show", i["team"], "--json").json()["memory"]
    assert (team["kind"], team["tags"], team["scope"]) == ("fact", ["migration"], "team:core")
    cjk = nuzo.run("show", i["cjk"], "--json").json()
    assert cjk["memory"]["confidence_state"] == "deprecated"
    assert any(
        r["relation"] == "supersedes" and r["source_memory_id"] == new_id for r in cjk["relations"]
    )
    assert rel in nuzo.run("relations", i["beta"]).stdout
    assert nuzo.run("show", i["global_fact"], check=False).returncode == 1
    hits = nuzo.run("recall", "缓存策略\uff1a按租户分区", "--json", scope="project:alpha").json()
    assert [r["memory"]["id"] for r in hits["results"]] == [new_id]
    # Nuzo keeps writing to the store aidememo changed, and the checks still pass.
    nuzo.run(
        "update", i["sqlite"], "--content", "Sessions live in SQLite.", "--expected-revision", "2"
    )
    ours.run("update", i["sqlite"], "--tag", "storage", "--expected-revision", "3")
    _assert_healthy(nuzo)
    for suffix in ("", "-wal", "-shm"):
        side = store.with_name(store.name + suffix)
        if side.exists():
            assert side.stat().st_mode & 0o777 == 0o600, side


def test_mem92_a_store_aidememo_creates_has_nuzo_schema_and_passes_its_checks(
    recorded: Recording, tmp_path: Path
) -> None:
    ours = aidememo_cli(tmp_path / "home-a", tmp_path / "a" / "memories.sqlite")
    theirs = nuzo_cli(recorded, tmp_path / "home-n", tmp_path / "n" / "memories.sqlite")
    ours_ids = make_store(ours)
    theirs_ids = make_store(theirs)
    # The DDL is Nuzo's, except that a fresh store lists the columns of `memories` in the seed's
    # order where Nuzo's grew by ALTER TABLE (MEM-14): the same columns, types and defaults.
    assert _unordered(schema_of(ours.store)) == _unordered(schema_of(theirs.store))
    assert ours.store.stat().st_mode & 0o777 == 0o600
    assert ours.store.parent.stat().st_mode & 0o777 == 0o700
    nuzo_on_ours = nuzo_cli(recorded, tmp_path / "home-n", ours.store)
    _assert_healthy(nuzo_on_ours)
    # What aidememo stored, Nuzo reads: the same rows, ids replaced by the memories' roles.
    mine = _by_role(nuzo_on_ours.run("list", "--all-scopes", "--include-archived").stdout, ours_ids)
    nuzos = _by_role(theirs.run("list", "--all-scopes", "--include-archived").stdout, theirs_ids)
    assert sorted(mine.splitlines()) == sorted(nuzos.splitlines())
    counts = "SELECT event_type, actor, count(*) FROM memory_events GROUP BY 1, 2 ORDER BY 1, 2"
    assert rows_of(ours.store, counts) == rows_of(theirs.store, counts)
    payloads = nuzo_on_ours.run("show", ours_ids.ids["old_port"], "--json").json()["events"]
    # The challenge's two events share a millisecond; history orders those by (random) id.
    assert sorted(e["event_type"] for e in payloads) == [
        "memory.challenged",
        "memory.created",
        "memory.updated",
    ]
    keys = "SELECT content, capture_key FROM memories ORDER BY content"
    assert rows_of(ours.store, keys) == rows_of(theirs.store, keys)
    assert json.loads(
        rows_of(ours.store, "SELECT tags FROM memories WHERE id = ?", ours_ids.ids["pnpm"])[0][0]
    ) == ["tooling", "pnpm"]


def _tree(root: Path) -> list[tuple[str, str]]:
    return sorted(
        (str(p.relative_to(root)), oct(p.stat().st_mode & 0o777)) for p in root.rglob("*")
    )


def test_mem92_project_init_makes_the_files_nuzo_makes_and_nuzos_doctor_passes(
    recorded: Recording, tmp_path: Path
) -> None:
    trees, configs, ignores = [], [], []
    for name in ("n", "a", "n-existing", "a-existing"):
        project, home = tmp_path / f"project-{name}", tmp_path / f"home-{name}"
        project.mkdir()
        home.mkdir()
        if name.endswith("existing"):
            (project / ".gitignore").write_text("node_modules/\r\n.nuzo/memory/", encoding="utf-8")
            (project / ".gitignore").chmod(0o664)
        nuzos = name.startswith("n")
        cli = nuzo_cli(recorded, home, Path()) if nuzos else aidememo_cli(home, Path())
        code, out, err = cli.runner(["memory", "init", "--project"], cli.env(), project)
        assert code == 0, err
        assert out.splitlines()[0] == "Nuzo initialized"
        trees.append(_tree(project))
        ignores.append((project / ".gitignore").read_bytes())
        config = json.loads((project / ".nuzo" / "config.json").read_text(encoding="utf-8"))
        assert config.pop("default_scope").startswith("project:")
        configs.append(config)
        code, out, err = cli.runner(
            ["memory", "remember", "A note", "--kind", "note"], cli.env(), project
        )
        assert code == 0, err
    assert trees[1] == trees[0] and trees[3] == trees[2]
    assert configs[1] == configs[0] == configs[3] == configs[2]
    assert ignores[1] == ignores[0] and ignores[3] == ignores[2]
    # Nuzo's doctor, run in the project aidememo initialised, finds nothing unsafe.
    nuzo = nuzo_cli(recorded, tmp_path / "home-a", Path())
    code, out, err = nuzo.runner(["memory", "doctor", "--json"], nuzo.env(), tmp_path / "project-a")
    report = json.loads(out)
    assert (code, report["status"], report["file_safety"]["unsafe"]) == (0, "ok", []), report
