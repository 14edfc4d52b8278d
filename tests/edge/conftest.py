"""Fixtures of the edge tests: a simulated deployment per test (see `tests.edge.runtime`)."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from aidememo.domain.clock import FixedClock
from tests.edge.archive_support import runtime as archive_runtime
from tests.edge.runtime import EdgeClient, Runtime

START_MS = 1_700_000_000_000


@dataclass
class Edge:
    """A runtime, a client over `Default.fetch`, and tokens by actor."""

    runtime: Runtime
    client: EdgeClient
    clock: FixedClock
    tokens: dict[str, str] = field(default_factory=dict)

    def bootstrap(
        self, tenant: str, project: str, actor: str, role: str = "writer", **extra: Any
    ) -> tuple[int, Any]:
        token = self.tokens.get(f"{tenant}/{actor}") or secrets.token_hex(16)
        body = {
            "tenant_id": tenant,
            "project_id": project,
            "actor_id": actor,
            "role": role,
            "token_sha256": hashlib.sha256(token.encode()).hexdigest(),
            **extra,
        }
        status, _, answer = self.runtime.admin("POST", "/v1/admin/bootstrap", json=body)
        if status == 200:
            self.tokens[f"{tenant}/{actor}"] = token
        return status, answer

    def token(self, tenant: str, actor: str) -> str:
        return self.tokens[f"{tenant}/{actor}"]

    def get(self, path: str, token: str | None, **kw: Any) -> tuple[int, dict[str, str], Any]:
        return self.client.request("GET", path, token=token, **kw)

    def post(self, path: str, token: str | None, json: Any) -> tuple[int, dict[str, str], Any]:
        return self.client.request("POST", path, token=token, json=json)


def make_edge(tmp_path: Path, **kw: Any) -> Iterator[Edge]:
    clock = FixedClock(START_MS)
    runtime = Runtime(tmp_path / "rt", clock, **kw)
    try:
        yield Edge(runtime, EdgeClient(runtime), clock)
    finally:
        runtime.close()


@pytest.fixture
def edge(tmp_path: Path) -> Iterator[Edge]:
    """A fresh deployment with an admin token configured and the default rate limit."""
    yield from make_edge(tmp_path)


# -- export and import tests (tests.edge.archive_support) ----------------------------------


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock(START_MS)


@pytest.fixture
def rt(tmp_path: Path, clock: FixedClock) -> Iterator[Runtime]:
    """A deployment with the archive tests' admin token."""
    made = archive_runtime(tmp_path / "a", clock)
    yield made
    made.close()


@pytest.fixture
def other(tmp_path: Path, clock: FixedClock) -> Iterator[Runtime]:
    """A second, fresh deployment: where an export is imported."""
    made = archive_runtime(tmp_path / "b", clock)
    yield made
    made.close()
