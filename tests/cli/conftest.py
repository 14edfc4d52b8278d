"""What every CLI test runs in: an `AIDEMEMO_HOME` of its own and no `AIDEMEMO_*` setting of the
machine's (the `AIDEMEMO_TEST_*` ones of scripts/test stay)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in list(os.environ):
        if name.startswith("AIDEMEMO_") and not name.startswith("AIDEMEMO_TEST_"):
            monkeypatch.delenv(name)
    home = tmp_path / "home"
    monkeypatch.setenv("AIDEMEMO_HOME", str(home))
    return home
