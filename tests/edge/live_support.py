"""The live feed tests' edge: a runtime double with the contract fixture's members, and its
helpers, shared by `tests/edge/test_live_feed.py` and `tests/edge/test_live_feed_leases.py`."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from aidememo.domain.clock import FixedClock
from aidememo.domain.model import Role
from tests.contract.support import (
    EPOCH,
    HERMES,
    LEASE_MS,
    OTHER_PROJECT,
    OUTSIDER,
    PROJECT,
    READER,
    RECEIVER,
    START_MS,
    TENANT,
    WRITER,
    Api,
    P,
)
from tests.edge.backend import EdgeIdentity, postgres_runtime
from tests.edge.runtime import EdgeClient, Runtime
from tests.edge.runtime.harness import BASE_URL
from tests.edge.runtime.websockets import ClientSocket

LIVE = f"{P}/changes/live"
OBJECT = f"{TENANT}/{PROJECT}"


class LiveEdge:
    """A deployment, the contract's `Api` over it, and WebSocket subscriptions."""

    def __init__(self, tmp: Path, *, lease_ms: int = LEASE_MS, db: Any = None) -> None:
        self.clock = FixedClock(START_MS)
        variables = {"HANDOFF_LEASE_MS": str(lease_ms)}
        if db is None:
            self.runtime = Runtime(tmp / "edge", self.clock, vars=variables)
        else:  # STORAGE_MODE=postgres: pg8000 through PgBouncer (transaction pool mode)
            self.runtime = postgres_runtime(tmp / "edge", self.clock, db, vars=variables)
        self.api = Api("edge", EdgeClient(self.runtime), EdgeIdentity(self.runtime), self.clock)  # type: ignore[arg-type]
        for actor in (WRITER, RECEIVER, HERMES):
            self.api.provision(actor, Role.WRITER)
        self.api.provision(READER, Role.READER)
        self.api.provision(OUTSIDER, Role.WRITER, project_id=OTHER_PROJECT, epoch=None)

    @property
    def projects(self) -> Any:
        return self.runtime.namespaces["PROJECTS"]

    def connect(
        self, as_: str | None = WRITER, headers: dict[str, str] | None = None, **query: Any
    ) -> tuple[int, Any, ClientSocket | None]:
        hdrs = dict(headers or {})
        if as_ is not None:
            hdrs["authorization"] = f"Bearer {self.api.tokens[as_]}"
        text = urlencode({k: str(v) for k, v in query.items()})
        status, _, body, client = self.runtime.connect(f"{BASE_URL}{LIVE}?{text}", hdrs)
        return status, (json.loads(body) if body else None), client

    def subscribe(self, as_: str = WRITER, after_seq: int = 0, **query: Any) -> ClientSocket:
        status, body, client = self.connect(as_, project_epoch=EPOCH, after_seq=after_seq, **query)
        assert status == 101, body
        assert client is not None
        return client

    def note(self, note_id: str, as_: str = WRITER) -> int:
        receipt = self.api.put_note(note_id, {"n": note_id}, as_=as_).expect(200)
        return int(receipt["project_seq"])

    def materialized(self, after_seq: int, as_: str = WRITER, **query: Any) -> dict[str, Any]:
        body: dict[str, Any] = self.api.get(
            f"{P}/changes/materialized",
            as_,
            query={"project_epoch": EPOCH, "after_seq": after_seq, **query},
        ).expect(200)
        return body

    def alarm_ms(self) -> int | None:
        storage = self.projects.storages.get(OBJECT)
        return None if storage is None else storage.alarm_ms

    def close(self) -> None:
        self.runtime.close()


@pytest.fixture
def edge(tmp_path: Path) -> Iterator[LiveEdge]:
    made = LiveEdge(tmp_path)
    try:
        yield made
    finally:
        made.close()


def seqs(batch: dict[str, Any]) -> list[int]:
    return [entry["change"]["seq"] for entry in batch["entries"]]


def revoke(edge: LiveEdge, actor: str) -> None:
    """Revoke `actor`'s token through the Worker's admin route."""
    digest = hashlib.sha256(edge.api.tokens[actor].encode()).hexdigest()
    body = {"token_sha256": digest}
    status, _, answer = edge.runtime.admin("POST", "/v1/admin/tokens/revoke", json=body)
    assert status == 200, answer
