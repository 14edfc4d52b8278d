"""DOCS-2: the pictures of README.md and docs/architecture.md are drawn from their text
sources in docs/ (`*.dot`) by Graphviz `dot`, and the committed SVGs are what `dot` draws now.
Without `dot` this skips, except under CI=true, where scripts/test installs Debian's graphviz
and a missing `dot` fails."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"
SOURCES = sorted(DOCS.glob("*.dot"))


def test_docs2_each_picture_has_its_source_and_is_shown() -> None:
    assert [p.stem for p in SOURCES] == ["architecture", "handoff-states"]
    readme = (DOCS.parent / "README.md").read_text(encoding="utf-8")
    architecture = (DOCS / "architecture.md").read_text(encoding="utf-8")
    for source in SOURCES:
        assert (DOCS / f"{source.stem}.svg").is_file()
        assert f"docs/{source.stem}.svg" in readme
        assert f"({source.stem}.svg)" in architecture


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_docs2_the_committed_svg_is_what_dot_draws(source: Path) -> None:
    dot = shutil.which("dot")
    if dot is None:
        if os.environ.get("CI") == "true":
            pytest.fail("Graphviz dot is missing under CI=true (scripts/test installs graphviz)")
        pytest.skip("Graphviz dot is not installed (apt-get install graphviz)")
    drawn = subprocess.run([dot, "-Tsvg", str(source)], capture_output=True, check=True).stdout
    committed = (DOCS / f"{source.stem}.svg").read_bytes()
    assert drawn == committed, f"redraw it: dot -Tsvg docs/{source.name} -o docs/{source.stem}.svg"
