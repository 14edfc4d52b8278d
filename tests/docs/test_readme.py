"""DOCS-1: the README runs as written, in order, then docs/offline.md (which continues its
quickstart) and docs/api.md, against one fresh `scripts/serve` on its own port with a
temporary `HOME` (tests/docs/runner.py says how each block is run and checked).

Like tests/origin/test_scripts_serve.py, this runs only when the `.venv` install is current,
so it never installs anything itself (under scripts/test it always is); under CI=true it runs
regardless.
"""

from __future__ import annotations

import hashlib
import os
import socket
from pathlib import Path

import pytest

from tests.docs.runner import REPO, Reader, Serve, blocks

DOCUMENTS = [REPO / "README.md", REPO / "docs" / "offline.md", REPO / "docs" / "api.md"]


def _venv_current() -> bool:
    stamp = REPO / ".venv" / ".aidememo-pyproject.sha256"
    want = hashlib.sha256((REPO / "pyproject.toml").read_bytes()).hexdigest()
    return stamp.is_file() and stamp.read_text().strip() == want


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.mark.timeout(600)
@pytest.mark.skipif(
    not _venv_current() and os.environ.get("CI") != "true",
    reason="scripts/serve would install into .venv first (stamp is stale)",
)
def test_docs1_readme_offline_and_api_documents_run_in_order(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    for name in (".venv", "scripts"):  # `source .venv/bin/activate` works as in the checkout
        os.symlink(REPO / name, work / name)
    serve = Serve(home, _free_port(), tmp_path / "serve.log")
    serve.start()
    try:
        reader = Reader(work, home, serve)
        ran = [reader.run(path) for path in DOCUMENTS]
    finally:
        serve.stop()
    assert all(count > 0 for count in ran), ran
    assert (work / ".mcp.json").is_file()
    assert "[mcp_servers.aidememo]" in (home / ".codex" / "config.toml").read_text()


def test_docs1_every_skipped_block_says_why() -> None:
    for path in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        text = path.read_text(encoding="utf-8")
        assert text.count("<!-- docs-test: skip") == text.count("<!-- docs-test: skip (")
        for block in blocks(path):
            if block.marker == "output":
                assert block.lang == "text", (path.name, block.line)


def test_docs1_the_readme_leads_and_stays_short() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert headings[:3] == [
        "## Two commands",
        "## Connect your agents",
        "## Quickstart: two agents hand work to each other",
    ]
    assert len(text.splitlines()) <= 260
    for name in ("build_nuzo", "AIDEMEMO_NUZO", "AIDEMEMO_COMPAT_SELF_CHECK", "aidememo[mcp]'"):
        assert name not in text
