"""More of Nuzo's behaviour on the same store (MEM-90, MEM-92, MEM-95): capture suggestions,
the scope-rehome plan, usage-recording recall, and the secret scanner's verdicts.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.compat.nuzo_oracle import Cli, Sample, rows_of

SUGGESTIONS = [
    ("Use pnpm for the web repo and the docs site, not npm.", "preference", ()),
    ("  use PNPM for the web repo and the docs   site, not npm.  ", "preference", ()),
    ("Use yarn instead of pnpm for the web repo now.", "preference", ("--tag", "tooling")),
    ("Sessions are stored in PostgreSQL instead of SQLite now.", "project_decision", ()),
    ("The weekly report goes out on Mondays.", "note", ()),
    ("数据库迁移每周五执行", "fact", ("--tag", "db")),
]


@pytest.mark.parametrize("mode", ["exact", "bounded"])
def test_mem90_capture_suggestions_match_nuzo(nuzo: Cli, ours: Cli, mode: str) -> None:
    for content, kind, flags in SUGGESTIONS:
        args = ["suggest-capture", content, "--kind", kind, "--reason", "user said so", *flags]
        args += ["--relationship-mode", mode, "--json"]
        theirs = nuzo.run(*args, scope="project:alpha").json()
        mine = ours.run(*args, scope="project:alpha").json()
        assert mine == theirs, content


def test_mem90_mem8_rehome_plan_matches_nuzo(nuzo: Cli, ours: Cli) -> None:
    nuzo.run(
        "remember",
        "Use PNPM for the web repo and the docs site, not npm.",
        "--kind",
        "note",
        scope="project:beta",
    )
    for source, target, applicable in (
        ("project:alpha", "project:moved", True),
        ("project:alpha", "project:beta", False),
        ("project:nothing", "project:moved", False),
    ):
        args = ("rehome-scope", "--from", source, "--to", target, "--dry-run")
        theirs = nuzo.run(*args, "--json", check=False)
        mine = ours.run(*args, "--json", check=False)
        assert (mine.returncode, theirs.returncode) == ((0, 0) if applicable else (1, 1))
        assert mine.json() == theirs.json()
        assert nuzo.run(*args, check=False).stdout == ours.run(*args, check=False).stdout


def test_mem92_mem8_rehome_apply_matches_nuzo(
    nuzo: Cli, ours: Cli, sample: tuple[Path, Sample], tmp_path: Path
) -> None:
    store, _ = sample
    twin_dir = tmp_path / "twin"
    twin_dir.mkdir(mode=0o700)
    for suffix in ("", "-wal", "-shm"):
        part = store.with_name(store.name + suffix)
        if part.exists():
            shutil.copy2(part, twin_dir / part.name)
    twin = twin_dir / store.name
    args = ("rehome-scope", "--from", "project:alpha", "--to", "project:moved", "--apply", "--yes")
    theirs = nuzo.run(*args, "--backup-path", str(tmp_path / "nuzo-backup.sqlite"), "--json")
    mine = ours.at(twin).run(*args, "--backup-path", str(tmp_path / "our-backup.sqlite"), "--json")
    docs = [theirs.json(), mine.json()]
    for doc in docs:
        # Paths and the event id are each run's own.
        for key in ("source_path", "backup_path", "event_id"):
            del doc[key]
        for key in ("backup_integrity", "after_integrity"):
            del doc[key]["path"]
    assert docs[1] == docs[0]
    query = "SELECT id, revision, scope, updated_at FROM memories ORDER BY id"
    assert rows_of(twin, query) == rows_of(store, query)
    assert nuzo.at(twin).run("integrity", "--json").json()["ok"] is True
    assert (tmp_path / "our-backup.sqlite").stat().st_mode & 0o777 == 0o600


def test_mem92_usage_recording_recall_matches_nuzo(
    nuzo: Cli, ours: Cli, sample: tuple[Path, Sample], tmp_path: Path
) -> None:
    store, ids = sample
    config = {
        "version": 1,
        "default_scope": "user:default",
        "storage": {"driver": "sqlite", "path": "~/.nuzo/memory/memories.sqlite"},
        "recall": {"limit": 8, "include_global": False},
        "privacy": {"allow_network": False, "record_recall_events": True},
    }
    for cli in (nuzo, ours):
        path = cli.home / ".nuzo" / "config.json"
        path.parent.mkdir(mode=0o700, exist_ok=True)
        path.write_text(json.dumps(config), encoding="utf-8")
        path.chmod(0o600)
    theirs = nuzo.run("recall", "cache", "--json", scope="project:alpha").json()
    recalled = [r["memory"]["id"] for r in theirs["results"]]
    assert recalled
    revisions = dict(rows_of(store, "SELECT id, revision FROM memories"))
    mine = ours.run("recall", "cache", "--json", scope="project:alpha").json()
    assert [r["memory"]["id"] for r in mine["results"]] == recalled
    after = dict(rows_of(store, "SELECT id, revision FROM memories"))
    assert {i: after[i] - revisions[i] for i in recalled} == dict.fromkeys(recalled, 1)
    events = rows_of(
        store,
        "SELECT actor, payload FROM memory_events WHERE event_type = 'memory.recalled' "
        "ORDER BY created_at, id",
    )
    assert len(events) == 2 * len(recalled)
    payloads = [json.loads(p) for _, p in events]
    assert {a for a, _ in events} == {"core"}
    assert {json.dumps(sorted(p)) for p in payloads} == {
        json.dumps(["queryHash", "queryHashAlgorithm", "scope", "score"])
    }
    assert len({p["queryHash"] for p in payloads}) == 1
    assert "cache" not in json.dumps(payloads)
    assert nuzo.run("integrity", "--json").json()["ok"] is True
    del ids


GH = "ghp_" + "Z" * 30
REFUSED_BY_NUZO = [
    "-----BEGIN " + "OPENSSH PRIVATE KEY----- b3BlbnNzaC1rZXktdjEAAAAA",
    f"my token is {GH}",
    "npm_" + "a1B2c3D4e5F6g7H8i9J0k1",
    "sk-" + "proj-" + "abcdefghijklmnopqrstuvwxyz012345",
    "AKIA" + "Q" * 16,
    "eyJ"
    + "hbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "Authorization: Bearer " + "abcdefghijklmnopqrstuvwx1234",
    "postgresql://admin:" + "s3cretpass@db.internal:5432/app",
    "Cookie: session=" + "abcdefghijklmnop1234",
    "api_key=" + "abcdefghijklmnop1234",
    "secret: " + "0123456789abcdefXYZ",
]
ALLOWED_BY_NUZO = [
    "Set OPENAI_API_KEY in the environment.",
    "Use Authorization: Bearer <token> for the API.",
    "The password is REDACTED.",
    "postgresql://demo:password@localhost:5432/app",
    "session_id=placeholder",
    "cookie=****************",
    "Fine-grained GitHub tokens use the github_pat_ prefix.",
    "password=abcdefghijklmno",
]


@pytest.mark.parametrize("content", REFUSED_BY_NUZO)
def test_mem95_what_nuzo_refuses_as_a_secret_aidememo_refuses(
    nuzo: Cli, ours: Cli, content: str
) -> None:
    theirs = nuzo.run("remember", "--kind", "note", "--", content, check=False)
    assert theirs.stderr.startswith("MEMORY_SECRET_DETECTED"), theirs.stderr
    mine = ours.run("remember", "--kind", "note", "--", content, check=False)
    assert (mine.returncode, mine.stderr) == (1, theirs.stderr)


@pytest.mark.parametrize("content", ALLOWED_BY_NUZO)
def test_mem95_what_nuzo_stores_aidememo_stores(nuzo: Cli, ours: Cli, content: str) -> None:
    assert nuzo.run("remember", "--kind", "note", "--", content).returncode == 0
    assert ours.run("remember", "--kind", "note", "--", content).returncode == 0


BAD_CONFIGS = [
    '{"version": 1, "privacy": {"record_recall_events": true}}',
    '{"version": 2}',
    '{"version": 1, "default_scope": "nope"}',
    "[]",
    "{not json",
    '{"version": 1, "default_scope": "user:default", "storage": {"driver": "sqlite",'
    ' "path": "relative/store.sqlite"}}',
    '{"version": 1, "default_scope": "user:default", "recall": {"limit": 60,'
    ' "include_global": true}}',
]


@pytest.mark.parametrize("text", BAD_CONFIGS)
def test_mem95_a_user_config_nuzo_refuses_aidememo_refuses(nuzo: Cli, ours: Cli, text: str) -> None:
    for cli in (nuzo, ours):
        path = cli.home / ".nuzo" / "config.json"
        path.parent.mkdir(mode=0o700, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    theirs = nuzo.run("recall", "cache", check=False)
    mine = ours.run("recall", "cache", check=False)
    assert theirs.stderr.startswith("MEMORY_CONFIG_INVALID")
    assert (mine.returncode, mine.stderr.split(":")[0]) == (1, "MEMORY_CONFIG_INVALID")
