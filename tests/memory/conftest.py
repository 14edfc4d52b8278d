"""Memory store tests: a store file of their own, and a HOME and working directory that are not
the machine's (no `NUZO_*` setting leaks in)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from aidememo.agent_memory import AgentMemory


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in list(os.environ):
        if name.startswith(("NUZO_", "AIDEMEMO_MEMORY")):
            monkeypatch.delenv(name)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return home


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "store" / "memories.sqlite"


@pytest.fixture
def store(store_path: Path) -> Iterator[AgentMemory]:
    store_path.parent.mkdir(parents=True, exist_ok=True)
    with AgentMemory.open(str(store_path), scope="project:demo") as opened:
        yield opened
