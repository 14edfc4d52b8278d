"""`review-relations` prints Nuzo's relation-governance report for the same store (MEM-21).

The stores are written by the real Nuzo: duplicate, revised and related memories in several
scopes, explicit relations, an archived memory, review-due and expired memories, and a scope
with more than 100 memories (the FTS-prefiltered, non-exhaustive path).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.compat.nuzo_oracle import Cli, Sample, aidememo_cli, nuzo_cli
from tests.compat.nuzo_replay import Recording, folders, recording_for_fixture

HINTS = ("nuzo memory", "aidememo memory")

NOTES: list[tuple[str, str, str, list[str], list[str]]] = [
    # (scope, kind, content, tags, extra flags)
    ("project:alpha", "preference", "Use pnpm for the web repo, not npm.", ["tooling"], []),
    ("project:alpha", "preference", "Use pnpm for the web repo, not npm.", ["tooling"], []),
    (
        "project:alpha",
        "project_decision",
        "The session store uses SQLite storage with WAL mode.",
        ["storage", "sqlite"],
        [],
    ),
    (
        "project:alpha",
        "project_decision",
        "The session store uses PostgreSQL storage with WAL mode.",
        ["storage"],
        ["--review-after", "2020-01-01T00:00:00.000Z"],
    ),
    (
        "project:alpha",
        "instruction",
        "Deploy the worker after the staging deployment checklist passes.",
        ["deploy"],
        ["--expires-at", "2021-01-01T00:00:00.000Z"],
    ),
    (
        "project:alpha",
        "instruction",
        "Deploy the worker with the rollback checklist for every component.",
        ["deploy"],
        ["--confidence-state", "needs_review"],
    ),
    (
        "project:alpha",
        "preference",
        "Final answers should be concise with the command first.",
        ["style"],
        [],
    ),
    (
        "project:alpha",
        "preference",
        "Final answers should be detailed with the command first.",
        ["style"],
        [],
    ),
    ("project:alpha", "note", "The preferred process and workflow is different.", [], []),
    ("project:alpha", "note", "Backup exports run nightly to the recovery bucket.", ["backup"], []),
    ("project:beta", "fact", "Use pnpm for the web repo, not npm.", ["tooling"], []),
    ("project:beta", "fact", "Beta stores memories in SQLite storage.", ["storage"], []),
    ("project:beta", "fact", "Beta stores its memories in SQLite storage too.", ["storage"], []),
    ("project:beta", "fact", "use pnpm for the web repo,  not npm.", ["tooling"], []),
    ("project:beta", "fact", "USE PNPM FOR THE WEB REPO, NOT NPM.", [], []),
    (
        "project:alpha",
        "note",
        "The preferred deploy workflow differs: a different process for the worker checklist.",
        ["deploy"],
        [],
    ),
    ("user:default", "preference", "I prefer concise answers.", ["style"], []),
    ("user:default", "preference", "I prefer concise final answers.", ["style"], []),
]


def _remember(cli: Cli, scope: str, content: str, kind: str, tags: list[str], *flags: str) -> str:
    args = ["remember", content, "--kind", kind, *flags]
    if tags:
        args += ["--tag", *tags]
    return cli.run(*args, scope=scope).stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def review_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    root = tmp_path_factory.mktemp("nuzo-review")
    recording = recording_for_fixture(
        "review_store", folders(tmp_path_factory.getbasetemp(), **{"nuzo-review0": root})
    )
    cli = nuzo_cli(recording, root / "home", root / "store" / "memories.sqlite")
    cli.run("init")
    ids = [_remember(cli, s, c, k, t, *f) for s, k, c, t, f in NOTES]
    cli.run("relate", ids[2], "--target", ids[3], "--relation", "conflicts_with")
    cli.run("relate", ids[1], "--target", ids[0], "--relation", "duplicate_of")
    cli.run("forget", ids[9], "--archive", "--reason", "moved")
    archived = _remember(cli, "project:alpha", "Backup exports run nightly.", "note", ["backup"])
    cli.run("forget", archived, "--archive", "--reason", "old")
    assert recording.finished()
    return cli.store, ids


def _pair(recorded: Recording, home: Path, store: Path) -> tuple[Cli, Cli]:
    return nuzo_cli(recorded, home, store), aidememo_cli(home, store)


def _same(nuzo: Cli, ours: Cli, *args: str, scope: str | None = None) -> str:
    theirs = nuzo.run(*args, scope=scope, check=False)
    mine = ours.run(*args, scope=scope, check=False)
    expected = theirs.stdout.replace(*HINTS) if ours.name == "aidememo" else theirs.stdout
    assert (mine.returncode, mine.stdout) == (theirs.returncode, expected), (
        f"{' '.join(args)}: aidememo stderr {mine.stderr!r}, nuzo stderr {theirs.stderr!r}"
    )
    return mine.stdout


@pytest.mark.parametrize("scope", ["project:alpha", "project:beta", "user:default", "team:none"])
@pytest.mark.parametrize(
    "flags",
    [(), ("--include-archived",), ("--needs-review",), ("--include-archived", "--needs-review")],
    ids=["plain", "archived", "due", "archived-due"],
)
@pytest.mark.parametrize("json_flag", [(), ("--json",)], ids=["text", "json"])
def test_mem21_review_relations_prints_as_nuzo(
    recorded: Recording,
    review_store: tuple[Path, list[str]],
    tmp_path: Path,
    scope: str,
    flags: tuple[str, ...],
    json_flag: tuple[str, ...],
) -> None:
    nuzo, ours = _pair(recorded, tmp_path / "home", review_store[0])
    out = _same(nuzo, ours, "review-relations", *flags, *json_flag, scope=scope)
    if json_flag and scope == "project:alpha" and not flags:
        report = json.loads(out)
        assert {c["relationship"] for c in report["candidates"]} >= {
            "exact_duplicate",
            "update_candidate",
            "related",
        }
        assert "already_related" in {c["state"] for c in report["candidates"]}


@pytest.mark.parametrize("limit", ["1", "2", "200"])
def test_mem21_review_relations_limit_truncates_as_nuzo(
    recorded: Recording, review_store: tuple[Path, list[str]], tmp_path: Path, limit: str
) -> None:
    nuzo, ours = _pair(recorded, tmp_path / "home", review_store[0])
    for json_flag in ((), ("--json",)):
        _same(nuzo, ours, "review-relations", "--limit", limit, *json_flag, scope="project:alpha")


@pytest.mark.parametrize("limit", ["201", "1000", "0", "-1", "abc", "1.5"])
def test_mem21_review_relations_bad_limit_is_refused_as_nuzo(
    recorded: Recording, review_store: tuple[Path, list[str]], tmp_path: Path, limit: str
) -> None:
    nuzo, ours = _pair(recorded, tmp_path / "home", review_store[0])
    theirs = nuzo.run("review-relations", "--limit", limit, check=False)
    mine = ours.run("review-relations", "--limit", limit, check=False)
    assert (mine.returncode, mine.stdout) == (theirs.returncode, theirs.stdout)
    if theirs.returncode == 1:
        assert mine.stderr == theirs.stderr
        assert mine.stderr.startswith("MEMORY_RELATION_REVIEW_LIMIT_INVALID: ")


def test_mem21_review_relations_of_the_sample_store_prints_as_nuzo(
    nuzo: Cli, ours: Cli, sample: tuple[Path, Sample]
) -> None:
    for scope in Sample.SCOPES:
        for flags in ((), ("--json",), ("--include-archived", "--json")):
            _same(nuzo, ours, "review-relations", *flags, scope=scope)


def test_mem21_review_relations_of_a_large_scope_prints_as_nuzo(
    recorded: Recording, tmp_path: Path
) -> None:
    """More than 100 active memories: candidates come from the FTS prefilter (not exhaustive)."""
    store = tmp_path / "store" / "memories.sqlite"
    nuzo = nuzo_cli(recorded, tmp_path / "home", store)
    nuzo.run("init")
    topics = ("cache", "deploy", "storage", "backup", "release", "logging", "api", "docs")
    for i in range(105):
        topic = topics[i % len(topics)]
        nuzo.run(
            "remember",
            f"Note {i}: the {topic} runbook step {i % 7} uses the {topic} service.",
            "--kind",
            "note",
            "--tag",
            topic,
            scope="project:big",
        )
    ours = aidememo_cli(tmp_path / "home", store)
    report = json.loads(_same(nuzo, ours, "review-relations", "--json", scope="project:big"))
    assert report["candidates"]
    assert all("candidate_scan_truncated" in c["reason_codes"] for c in report["candidates"])
    for flags in ((), ("--limit", "200", "--json")):
        _same(nuzo, ours, "review-relations", *flags, scope="project:big")


def test_mem21_the_review_store_exercises_every_relationship(
    recorded: Recording, review_store: tuple[Path, list[str]], tmp_path: Path
) -> None:
    nuzo, ours = _pair(recorded, tmp_path / "home", review_store[0])
    found: set[str] = set()
    for scope in ("project:alpha", "project:beta", "user:default"):
        out = _same(nuzo, ours, "review-relations", "--include-archived", "--json", scope=scope)
        found |= {c["relationship"] for c in json.loads(out)["candidates"]}
    assert found == {"exact_duplicate", "update_candidate", "related", "uncertain"}
