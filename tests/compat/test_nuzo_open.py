"""aidememo opens stores the real Nuzo 1.2.0 made, in place, and reads them as Nuzo does (MEM-90).

Every check runs the same command through both CLIs on the same store file and compares what
they print: the list rows, `show --json` (memory, relations, audit events), `history`,
`relations`, `audit`. Reads change nothing in the file.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.compat import nuzo_replay
from tests.compat.nuzo_oracle import Cli, Sample, aidememo_cli, rows_of, schema_of
from tests.compat.nuzo_replay import Recording

ALL_ROWS = "SELECT * FROM memories ORDER BY id"
ALL_EVENTS = "SELECT * FROM memory_events ORDER BY id"


def _same(nuzo: Cli, ours: Cli, *args: str, scope: str | None = None) -> str:
    theirs = nuzo.run(*args, scope=scope, check=False)
    mine = ours.run(*args, scope=scope, check=False)
    assert (mine.returncode, mine.stdout) == (theirs.returncode, theirs.stdout), (
        f"{' '.join(args)}: aidememo stderr {mine.stderr!r}, nuzo stderr {theirs.stderr!r}"
    )
    return mine.stdout


@pytest.mark.parametrize(
    "args",
    [
        ("list", "--all-scopes"),
        ("list", "--all-scopes", "--include-archived"),
        ("list", "--all-scopes", "--tag", "cache"),
        ("list", "--all-scopes", "--tag", "cache", "storage"),
        ("list", "--all-scopes", "--needs-review"),
        ("list",),
    ],
    ids=["all", "archived", "tag", "two-tags", "needs-review", "default-scope"],
)
def test_mem90_list_of_a_nuzo_store_prints_as_nuzo(
    nuzo: Cli, ours: Cli, args: tuple[str, ...]
) -> None:
    _same(nuzo, ours, *args)


@pytest.mark.parametrize("scope", Sample.SCOPES)
def test_mem90_list_of_each_scope_prints_as_nuzo(nuzo: Cli, ours: Cli, scope: str) -> None:
    _same(nuzo, ours, "list", "--include-archived", scope=scope)


def test_mem90_show_json_of_every_memory_matches_nuzo(
    nuzo: Cli, ours: Cli, sample: tuple[Path, Sample]
) -> None:
    _, ids = sample
    for role, memory_id in ids.ids.items():
        if role == "gone":
            continue
        theirs = nuzo.run("show", memory_id, "--json").json()
        mine = ours.run("show", memory_id, "--json").json()
        assert mine == theirs, role


def test_mem90_show_text_history_and_relations_match_nuzo(
    nuzo: Cli, ours: Cli, sample: tuple[Path, Sample]
) -> None:
    _, ids = sample
    for role in ("sqlite", "old_port", "new_port", "archived", "cjk", "deploy"):
        memory_id = ids.ids[role]
        _same(nuzo, ours, "show", memory_id)
        _same(nuzo, ours, "history", memory_id)
        _same(nuzo, ours, "relations", memory_id)
        _same(nuzo, ours, "relations", memory_id, "--outgoing-only")
    # A hard-deleted memory: its audit rows stay readable, `show` is MEMORY_NOT_FOUND.
    _same(nuzo, ours, "history", ids.ids["gone"])
    theirs = nuzo.run("show", ids.ids["gone"], check=False)
    mine = ours.run("show", ids.ids["gone"], check=False)
    assert mine.returncode == theirs.returncode == 1
    assert mine.stderr.split(":")[0] == theirs.stderr.split(":")[0] == "MEMORY_NOT_FOUND"


@pytest.mark.parametrize(
    "args",
    [
        ("audit",),
        ("audit", "--limit", "5"),
        ("audit", "--event-type", "memory.challenged", "memory.archived"),
        ("audit", "--scope", "project:beta"),
        ("audit", "--actor", "nuzo:cli", "--limit", "3"),
    ],
    ids=["all", "limit", "types", "scope", "actor"],
)
def test_mem90_audit_of_a_nuzo_store_prints_as_nuzo(
    nuzo: Cli, ours: Cli, args: tuple[str, ...]
) -> None:
    _same(nuzo, ours, *args)


def test_mem90_reads_leave_the_nuzo_store_unchanged(ours: Cli, sample: tuple[Path, Sample]) -> None:
    store, ids = sample
    before = (schema_of(store), rows_of(store, ALL_ROWS), rows_of(store, ALL_EVENTS))
    ours.run("list", "--all-scopes", "--include-archived")
    ours.run("show", ids.ids["sqlite"], "--json")
    ours.run("recall", "cache", "--json", scope="project:alpha")
    ours.run("history", ids.ids["gone"])
    assert (schema_of(store), rows_of(store, ALL_ROWS), rows_of(store, ALL_EVENTS)) == before
    assert store.stat().st_mode & 0o777 == 0o600


def test_mem90_the_in_process_runner_prints_what_the_aidememo_process_prints(
    recorded: Recording, nuzo: Cli, ours: Cli, sample: tuple[Path, Sample]
) -> None:
    """The tier runs aidememo's CLI in the test process; it answers exactly as the `aidememo`
    program does, exit codes and stderr included. The recording holds the same commands asked
    of Nuzo through its long-lived batch process and as a process each, which answered alike."""
    _, ids = sample
    process = aidememo_cli(ours.home, ours.store, process=True)
    for args, scope in [
        (("list", "--all-scopes", "--include-archived"), None),
        (("show", ids.ids["old_port"], "--json"), None),
        (("recall", "cache", "--include-global"), "project:alpha"),
        (("show", "mem_missing"), None),
        (("remember", "x", "--kind", "memo"), None),
        (("recall",), None),
        (("integrity", "--json"), None),
    ]:
        batch = nuzo.run(*args, scope=scope, check=False)
        alone = nuzo.run(*args, scope=scope, check=False)
        assert (batch.returncode, batch.stdout, batch.stderr) == (
            alone.returncode,
            alone.stdout,
            alone.stderr,
        ), args
        a = ours.run(*args, scope=scope, check=False)
        b = process.run(*args, scope=scope, check=False)
        assert (a.returncode, a.stdout, a.stderr) == (b.returncode, b.stdout, b.stderr), args


def test_mem90_the_tier_fails_without_its_recorded_data(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Without the recording the tier errors in every test; it never skips."""
    monkeypatch.setattr(nuzo_replay, "GOLDEN", tmp_path / "missing")
    nuzo_replay.corpus.cache_clear()
    try:
        with pytest.raises(FileNotFoundError, match="recorded Nuzo corpus is missing"):
            nuzo_replay.corpus()
    finally:
        monkeypatch.undo()
        nuzo_replay.corpus.cache_clear()
    assert nuzo_replay.corpus().calls_by_test
