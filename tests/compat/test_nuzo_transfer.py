"""Export and import between aidememo and the real Nuzo (MEM-93): the export document of a
Nuzo store is Nuzo's own (apart from `exported_at`), and each side imports the other's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.compat.nuzo_oracle import Cli, Sample, aidememo_cli, nuzo_cli
from tests.compat.nuzo_replay import Recording


def _doc(cli: Cli, *args: str, scope: str | None = None) -> dict[str, Any]:
    doc: dict[str, Any] = cli.run("export", *args, scope=scope).json()
    assert doc.pop("exported_at")
    return doc


@pytest.mark.parametrize("scope", Sample.SCOPES)
def test_mem93_json_export_of_a_nuzo_store_equals_nuzos(nuzo: Cli, ours: Cli, scope: str) -> None:
    for flags in ((), ("--include-archived",), ("--tag", "cache")):
        assert _doc(ours, *flags, scope=scope) == _doc(nuzo, *flags, scope=scope), flags


def test_mem93_export_to_a_file_and_markdown_match_nuzo(
    nuzo: Cli, ours: Cli, tmp_path: Path
) -> None:
    for name in ("n.json", "n.md"):
        (tmp_path / name).unlink(missing_ok=True)
    theirs = nuzo.run("export", "--path", str(tmp_path / "n.json"), scope="project:alpha")
    mine = ours.run("export", "--path", str(tmp_path / "a.json"), scope="project:alpha")
    assert mine.stdout.replace("a.json", "n.json") == theirs.stdout
    assert (tmp_path / "a.json").stat().st_mode & 0o777 == 0o600
    a = json.loads((tmp_path / "a.json").read_text(encoding="utf-8"))
    n = json.loads((tmp_path / "n.json").read_text(encoding="utf-8"))
    assert a.pop("exported_at") and n.pop("exported_at")
    assert a == n
    md_theirs = nuzo.run(
        "export", "--format", "markdown", "--include-archived", scope="project:alpha"
    )
    md_mine = ours.run(
        "export", "--format", "markdown", "--include-archived", scope="project:alpha"
    )

    def strip(text: str) -> list[str]:
        return [line for line in text.splitlines() if not line.startswith("exported_at:")]

    assert strip(md_mine.stdout) == strip(md_theirs.stdout)


def test_mem93_each_side_imports_the_others_export(
    recorded: Recording, nuzo: Cli, ours: Cli, tmp_path: Path
) -> None:
    source = tmp_path / "alpha.json"
    source.write_text(ours.run("export", "--include-archived", scope="project:alpha").stdout)
    into_nuzo = nuzo_cli(recorded, tmp_path / "home-n", tmp_path / "n" / "memories.sqlite")
    into_ours = aidememo_cli(tmp_path / "home-a", tmp_path / "a" / "memories.sqlite")
    for cli in (into_nuzo, into_ours):
        cli.run("init")
        assert (
            cli.run("import", str(source), "--dry-run").stdout
            == nuzo.at(cli.store).run("import", str(source), "--dry-run").stdout
        )
    assert (
        into_ours.run("import", str(source)).stdout == into_nuzo.run("import", str(source)).stdout
    )
    # Importing again skips every memory on both sides (Nuzo's import duplicate key).
    assert (
        into_ours.run("import", str(source)).stdout == into_nuzo.run("import", str(source)).stdout
    )
    assert _doc(into_ours, "--include-archived", scope="project:alpha") == _doc(
        into_nuzo, "--include-archived", scope="project:alpha"
    )
    # Nuzo reads what aidememo imported; a scope override moves the whole document.
    nuzo_on_ours = nuzo.at(into_ours.store)
    assert nuzo_on_ours.run("integrity", "--json").json()["ok"] is True
    # `import --scope` replaces every item's scope (Nuzo's parser drops that option, MEM-96).
    into_ours.run("import", str(source), "--scope", "project:gamma")
    moved = _doc(into_ours, "--include-archived", scope="project:gamma")
    original = _doc(into_ours, "--include-archived", scope="project:alpha")
    for item in original["memories"]:
        item["scope"] = "project:gamma"
    assert moved == original
    assert nuzo_on_ours.run("integrity", "--json").json()["ok"] is True
