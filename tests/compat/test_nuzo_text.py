"""Text and time rules against the real Nuzo (MEM-3, MEM-11, MEM-92): the same tricky contents
written through each CLI are stored, keyed, listed and recalled alike; the same dates are
stored alike; and both writing one store at once lose nothing.
"""

from __future__ import annotations

import threading
from pathlib import Path

from tests.compat.nuzo_oracle import Cli, Run, aidememo_cli, nuzo_cli, rows_of
from tests.compat.nuzo_replay import Recording

HAZARDS = [
    "  Leading and trailing spaces, inner   runs\tof\ttabs  ",
    "\ufeffBOM\u00a0NBSP\u3000IDEOGRAPHIC\u2028LINE\u2029PARA\ufeff",
    "C1 \u0085 next-line and \u001c file separator and \u007f delete",
    "Bidi \u202eoverride\u202c and \u2066isolate\u2069 marks",
    'Backslash \\ and quote " and backtick ``` fence',
    "Emoji \U0001f600\U0001f680 count twice in UTF-16",
    "İstanbul ẞ Straße ΣΊΣΥΦΟΣ Ǆ title case",
    "日本語と中文と한국어 mixed with English words",
    "Tab\tseparated\tvalues and a form\x0cfeed",
]


def _fresh(build: Recording, tmp: Path) -> tuple[Cli, Cli]:
    theirs = nuzo_cli(build, tmp / "home-n", tmp / "n" / "memories.sqlite")
    ours = aidememo_cli(tmp / "home-a", tmp / "a" / "memories.sqlite")
    theirs.run("init")
    ours.run("init")
    return theirs, ours


def _outcome(run: Run) -> tuple[int, str]:
    """Exit status, and the code of a refusal (usage errors, exit 2, word theirs freely)."""
    return run.returncode, run.stderr.split(":")[0] if run.returncode == 1 else ""


def _ids_out(text: str, ids: list[str]) -> str:
    for n, memory_id in enumerate(ids):
        text = text.replace(memory_id, f"<{n}>")
    return text


def test_mem3_mem11_tricky_contents_are_stored_listed_and_recalled_as_nuzo_does(
    recorded: Recording, tmp_path: Path
) -> None:
    theirs, ours = _fresh(recorded, tmp_path)
    ids: dict[str, list[str]] = {"n": [], "a": []}
    for content in [*HAZARDS, "\U0001f600" * 4000, "x" * 7999 + "\U0001f600"]:
        a = theirs.run("remember", "--kind", "note", "--tag", "hazard", "--", content, check=False)
        b = ours.run("remember", "--kind", "note", "--tag", "hazard", "--", content, check=False)
        assert _outcome(b) == _outcome(a), content
        if a.returncode == 0:
            ids["n"].append(a.stdout.strip())
            ids["a"].append(b.stdout.strip())
    stored = "SELECT content, capture_key, tags FROM memories ORDER BY created_at, id"
    assert rows_of(ours.store, stored) == rows_of(theirs.store, stored)
    fts = "SELECT content, tags FROM memories_fts ORDER BY content"
    assert rows_of(ours.store, fts) == rows_of(theirs.store, fts)
    listed_n = _ids_out(theirs.run("list").stdout, ids["n"])
    listed_a = _ids_out(ours.run("list").stdout, ids["a"])
    assert sorted(listed_a.splitlines()) == sorted(listed_n.splitlines())
    for n_id, a_id in zip(ids["n"], ids["a"], strict=True):
        shown_n = theirs.run("show", n_id, "--json").json()["memory"]
        shown_a = ours.run("show", a_id, "--json").json()["memory"]
        for key in ("content", "tags", "kind", "confidence", "confidence_state"):
            assert shown_a[key] == shown_n[key], key
        assert (
            _ids_out(ours.run("show", a_id).stdout, ids["a"]).split("\n", 1)[1].split("Created")[0]
            == _ids_out(theirs.run("show", n_id).stdout, ids["n"])
            .split("\n", 1)[1]
            .split("Created")[0]
        )
    for query in ("hazard", "BOM NBSP", "istanbul", "日本語と中文と한국어", "override", "values"):
        a = theirs.run("recall", query, "--json").json()["results"]
        b = ours.run("recall", query, "--json").json()["results"]
        assert [r["memory"]["content"] for r in b] == [r["memory"]["content"] for r in a], query
        assert [r["reason"] for r in b] == [r["reason"] for r in a], query


DATES = [
    "2030-01-01",
    "2030-01-01T10:00:00Z",
    "2030-01-01T10:00:00.123Z",
    "2030-01-01T10:00:00+02:00",
    "2030-01-01T10:00:00",
    "2030-13-01",
    "not a date",
]


def test_mem3_iso_dates_are_stored_as_nuzo_stores_them(recorded: Recording, tmp_path: Path) -> None:
    """With the clock's zone at UTC (as the tier runs both CLIs), the ISO forms are stored alike;
    a date-time without an offset is local time to Nuzo and UTC to aidememo (MEM-14)."""
    theirs, ours = _fresh(recorded, tmp_path)
    for date in DATES:
        args = ("remember", f"Review {date}", "--kind", "note", "--review-after", date)
        a = theirs.run(*args, check=False)
        b = ours.run(*args, check=False)
        assert _outcome(b) == _outcome(a), date
    dated = "SELECT content, review_after FROM memories ORDER BY content"
    assert rows_of(ours.store, dated) == rows_of(theirs.store, dated)


def test_mem92_aidememo_writing_a_nuzo_store_from_two_processes_at_once_loses_nothing(
    recorded: Recording, tmp_path: Path
) -> None:
    """Nuzo makes the store and its first note (recorded); then two writers write it at once:
    aidememo in this process and aidememo as a process of its own. The recording also holds
    Nuzo writing beside aidememo, but a race's outcome depends on its interleaving and cannot be
    replayed, so the second writer is aidememo's own process: it meets the same cross-process
    locking and revision compare-and-swap that Nuzo's writes met."""
    store = tmp_path / "s" / "memories.sqlite"
    theirs = nuzo_cli(recorded, tmp_path / "home", store)
    ours = aidememo_cli(tmp_path / "home", store)
    other = aidememo_cli(tmp_path / "home", store, process=True)
    theirs.run("init")
    first = theirs.run("remember", "Shared counter note", "--kind", "note").stdout.strip()
    recorded.set_aside("Nuzo's concurrent writes: the race cannot be replayed")
    errors: list[str] = []
    updated: list[str] = []

    def write(cli: Cli, who: str) -> None:
        for n in range(8):
            out = cli.run(
                "remember", f"{who} note {n}", "--kind", "note", "--tag", who, check=False
            )
            if out.returncode != 0:
                errors.append(out.stderr)
            # No expected revision: the revision read before the write is compared and swapped,
            # so a concurrent update of the other side is a conflict, never a lost update.
            upd = cli.run("update", first, "--tag", f"{who}{n}", check=False)
            if upd.returncode == 0:
                updated.append(f"{who}{n}")
            elif not upd.stderr.startswith("MEMORY_REVISION_CONFLICT"):
                errors.append(upd.stderr)

    threads = [
        threading.Thread(target=write, args=(other, "process")),
        threading.Thread(target=write, args=(ours, "aidememo")),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert updated
    assert rows_of(store, "SELECT count(*) FROM memories") == [(17,)]
    assert rows_of(store, "SELECT revision FROM memories WHERE id = ?", first) == [
        (1 + len(updated),)
    ]
    updates = "SELECT count(*) FROM memory_events WHERE event_type = 'memory.updated'"
    assert rows_of(store, updates) == [(len(updated),)]
    assert ours.run("integrity", "--json").json()["ok"] is True


def test_mem14_an_offset_less_date_time_is_utc_where_nuzo_reads_local_time(
    recorded: Recording, tmp_path: Path
) -> None:
    theirs, ours = _fresh(recorded, tmp_path)
    for cli in (theirs, ours):
        cli.extra_env["TZ"] = "Asia/Tokyo"
        cli.run(
            "remember", "Tokyo review", "--kind", "note", "--review-after", "2030-01-01T10:00:00"
        )
    dated = "SELECT review_after FROM memories"
    assert rows_of(theirs.store, dated) == [("2030-01-01T01:00:00.000Z",)]
    assert rows_of(ours.store, dated) == [("2030-01-01T10:00:00.000Z",)]
