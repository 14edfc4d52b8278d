"""The live change feed at the edge (SPEC.md LIVE-*), through `Default.fetch` and the project
object's hibernatable WebSockets in the runtime double: the same behaviours as the origin's
`tests/origin/test_live_feed.py` (catch-up then push, visibility, refusals before the upgrade,
reconnects, 100 subscribers, suspension, lease notices), plus what only the edge has: the
Worker's identity headers, the object's alarm, and hibernation.

Writes go through the same Worker over HTTP (`EdgeClient`), so each commit takes the edge's
path: Worker, `ProjectCoordinator.handle`, the commit, then the push to the subscribers.
"""

from __future__ import annotations

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
from tests.edge.backend import EdgeIdentity
from tests.edge.runtime import EdgeClient, Runtime
from tests.edge.runtime.harness import BASE_URL
from tests.edge.runtime.websockets import ClientSocket

LIVE = f"{P}/changes/live"
OBJECT = f"{TENANT}/{PROJECT}"


class LiveEdge:
    """A deployment, the contract's `Api` over it, and WebSocket subscriptions."""

    def __init__(self, tmp: Path, *, lease_ms: int = LEASE_MS, **kw: Any) -> None:
        self.clock = FixedClock(START_MS)
        self.runtime = Runtime(tmp / "edge", self.clock, vars={"HANDOFF_LEASE_MS": str(lease_ms)})
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


def test_live1_catch_up_then_push(edge: LiveEdge) -> None:
    for i in range(5):
        edge.note(f"n{i}")
    ws = edge.subscribe(limit=2)
    # Catch-up pages are exactly the /changes/materialized pages, all sent before the 101.
    assert ws.recv() == edge.materialized(0, limit=2)
    assert ws.recv() == edge.materialized(2, limit=2)
    last = ws.recv()
    assert last == edge.materialized(4, limit=2)
    assert last["has_more"] is False and seqs(last) == [5]
    assert ws.inbox == []
    # Then every commit as it happens, one batch per commit, same entry shape.
    seq = edge.note("pushed")
    pushed = ws.recv()
    assert pushed == edge.materialized(5)
    assert seqs(pushed) == [seq] and pushed["next_cursor"]["after_seq"] == seq
    assert ws.inbox == [] and not ws.closed
