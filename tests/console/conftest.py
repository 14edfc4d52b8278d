"""Fixtures of the console tier: a fresh server per test, of every kind the tier runs on."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.agent_support import Server
from tests.console.support import SERVER_KINDS, console_server


@pytest.fixture(params=SERVER_KINDS)
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Server]:
    with console_server(request.param, tmp_path) as served:
        yield served
