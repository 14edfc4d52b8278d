"""One scenario of writes run through each CLI on its own copy of the same Nuzo store prints the
same transcript (MEM-90, MEM-92): every command's exit status, stdout and refusal code, with the
new ids and timestamps each side makes replaced by placeholders in order of appearance.
"""

from __future__ import annotations

import difflib
import re
import shutil
from pathlib import Path

from tests.compat.nuzo_oracle import Cli, Sample, aidememo_cli, nuzo_cli
from tests.compat.nuzo_replay import Recording

_NEW_ID = re.compile(
    r"\b(mem|rel|evt)_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"
)
_EVENT_ID = re.compile(r"\bevt_[0-9a-f-]{36}\b")
_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z")


class Normalizer:
    def __init__(self, known: dict[str, str]) -> None:
        self.names = {memory_id: f"<{role}>" for role, memory_id in known.items()}

    def __call__(self, text: str) -> str:
        def name(match: re.Match[str]) -> str:
            key = match.group(0)
            if key not in self.names:
                self.names[key] = f"<{match.group(1)}{len(self.names)}>"
            return self.names[key]

        return _TIME.sub("<time>", _NEW_ID.sub(name, text))


def _steps(i: dict[str, str]) -> list[tuple[str | None, list[str]]]:
    return [
        (
            "project:alpha",
            ["remember", "Cache keys carry the tenant id.", "--kind", "fact", "--tag", "cache"],
        ),
        (
            None,
            ["update", i["pnpm"], "--content", "Use pnpm everywhere.", "--expected-revision", "2"],
        ),
        (None, ["update", i["pnpm"], "--expected-revision", "2", "--kind", "fact"]),
        (
            None,
            ["challenge", i["sqlite"], "--outcome", "valid", "--reason", "still true", "--json"],
        ),
        (None, ["challenge", i["deploy"], "--outcome", "incorrect", "--reason", "wrong", "--json"]),
        (
            None,
            [
                "challenge",
                i["beta"],
                "--outcome",
                "superseded",
                "--reason",
                "moved",
                "--superseded-by",
                i["sqlite"],
                "--json",
            ],
        ),
        (None, ["relate", i["cjk"], "--target", i["kana"], "--relation", "duplicate_of"]),
        (None, ["relate", i["cjk"], "--target", i["kana"], "--relation", "duplicate_of"]),
        (None, ["relations", i["cjk"]]),
        (None, ["unrelate", "rel_missing"]),
        (None, ["forget", i["accent"]]),
        (None, ["forget", i["accent"]]),
        (None, ["forget", i["global_fact"], "--delete", "--yes"]),
        (None, ["forget-many", "--tag", "cache"]),
        (None, ["forget-many", "--tag", "cache", "--apply"]),
        (None, ["forget-many", "--tag", "cache", "--delete", "--apply"]),
        (None, ["forget-many", "--tag", "staging", "--apply", "--yes", "--reason", "cleanup"]),
        (
            "project:alpha",
            [
                "suggest-capture",
                "Cache keys carry the tenant id.",
                "--kind",
                "fact",
                "--reason",
                "seen",
                "--json",
            ],
        ),
        (
            "project:alpha",
            [
                "confirm-capture",
                "Cache keys carry the tenant id.",
                "--decision",
                "create",
                "--kind",
                "fact",
                "--reason",
                "seen",
                "--yes",
                "--json",
            ],
        ),
        (
            "project:alpha",
            [
                "confirm-capture",
                "A brand new capture.",
                "--decision",
                "create",
                "--kind",
                "note",
                "--reason",
                "seen",
                "--json",
            ],
        ),
        (
            "project:alpha",
            [
                "confirm-capture",
                "A brand new capture.",
                "--decision",
                "create",
                "--kind",
                "note",
                "--reason",
                "seen",
                "--yes",
                "--json",
            ],
        ),
        (
            "project:alpha",
            [
                "confirm-capture",
                "Whatever.",
                "--decision",
                "reject",
                "--kind",
                "note",
                "--reason",
                "no",
                "--json",
            ],
        ),
        (
            "project:alpha",
            [
                "confirm-capture",
                "Sessions live in PostgreSQL now.",
                "--decision",
                "update",
                "--kind",
                "project_decision",
                "--reason",
                "moved",
                "--target-memory-id",
                i["sqlite"],
                "--expected-revision",
                "2",
                "--yes",
                "--json",
            ],
        ),
        (None, ["list", "--all-scopes", "--include-archived"]),
        (None, ["history", i["sqlite"]]),
        (None, ["audit", "--limit", "12"]),
    ]


def test_mem90_mem92_a_write_scenario_prints_nuzos_transcript(
    recorded: Recording, sample: tuple[Path, Sample], tmp_path: Path
) -> None:
    source, ids = sample
    transcripts = []
    for name in ("n", "a"):
        store = tmp_path / name / source.name
        store.parent.mkdir(mode=0o700)
        shutil.copy2(source, store)
        home = tmp_path / f"home-{name}"
        cli: Cli = nuzo_cli(recorded, home, store) if name == "n" else aidememo_cli(home, store)
        norm = Normalizer(ids.ids)
        lines = []
        for scope, args in _steps(ids.ids):
            run = cli.run(*args, scope=scope, check=False)
            refusal = run.stderr.split(":")[0] if run.returncode == 1 else ""
            if args[0] in ("list", "history", "audit"):
                # Rows written in one millisecond are ordered by their (random) ids, so these
                # are compared as sets of lines, event ids left out.
                out = "\n".join(sorted(norm(_EVENT_ID.sub("<evt>", run.stdout)).splitlines()))
            else:
                out = norm(run.stdout)
            lines.append((args[0], run.returncode, refusal, out))
        transcripts.append(lines)
    for theirs, mine in zip(*transcripts, strict=True):
        assert mine == theirs, "\n".join(
            difflib.unified_diff(theirs[3].splitlines(), mine[3].splitlines(), lineterm="")
        )
