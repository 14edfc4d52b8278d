"""Fixtures of the origin tests that run the command line and `aidememo serve` processes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from aidememo.cli.main import main


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh `AIDEMEMO_HOME`, with every other `AIDEMEMO_*` variable unset."""
    for name in list(os.environ):
        if name.startswith("AIDEMEMO_"):
            monkeypatch.delenv(name)
    home = tmp_path / "home"
    monkeypatch.setenv("AIDEMEMO_HOME", str(home))
    return home


@pytest.fixture
def token(tmp_path: Path, home: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """A writer token (demo-agent in tenant local, project demo) bootstrapped into the default
    database of `home`."""
    path = tmp_path / "demo.token"
    assert main(["token", "new", "--out", str(path)]) == 0
    args = ["--tenant-id", "local", "--project-id", "demo", "--actor-id", "demo-agent"]
    assert main(["bootstrap", *args, "--token-file", str(path)]) == 0
    capsys.readouterr()
    return path.read_text().strip()
