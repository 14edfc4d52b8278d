"""`tests.edge.loopback`: the edge double reached over real sockets, as client processes reach it.

A member is provisioned through the admin route, then HTTP reads and writes and the live feed's
WebSocket go through the loopback server into `Default.fetch` and the project object.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from typing import Any

import httpx
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from tests.edge.loopback import Loopback, edge_loopback, edge_postgres_loopback

__all__ = ["edge_loopback", "edge_postgres_loopback"]

P = "/v1/projects/p1"


def provision(edge: Loopback, actor: str = "a1") -> tuple[str, dict[str, Any]]:
    token = secrets.token_hex(16)
    answer = httpx.post(
        f"{edge.url}/v1/admin/bootstrap",
        headers={"authorization": f"Bearer {edge.admin_token}"},
        json={
            "tenant_id": "t1",
            "project_id": "p1",
            "actor_id": actor,
            "role": "writer",
            "token_sha256": hashlib.sha256(token.encode()).hexdigest(),
        },
    )
    assert answer.status_code == 200, answer.text
    identity = httpx.get(f"{edge.url}{P}/identity", headers={"authorization": f"Bearer {token}"})
    assert identity.status_code == 200, identity.text
    return token, identity.json()


def flow(edge: Loopback) -> None:
    token, identity = provision(edge)
    auth = {"authorization": f"Bearer {token}"}
    assert identity["actor_id"] == "a1"
    epoch = identity["project_epoch"]
    created = httpx.post(
        f"{edge.url}{P}/sessions",
        headers=auth,
        json={"command_id": "c1", "payload": {"session_id": "s1", "topic": "t"}},
    )
    assert created.status_code == 200, created.text
    missing = httpx.get(f"{edge.url}{P}/resources/fact/nope", headers=auth)
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "resource_not_found"
    ws_url = edge.url.replace("http://", "ws://") + f"{P}/changes/live"
    with connect(
        f"{ws_url}?project_epoch={epoch}&after_seq=0", additional_headers=auth, open_timeout=10
    ) as ws:
        first = json.loads(ws.recv(timeout=10))
        assert [e["change"]["seq"] for e in first["entries"]] == [created.json()["project_seq"]]
        fact = httpx.post(
            f"{edge.url}{P}/facts",
            headers=auth,
            json={
                "command_id": "c2",
                "payload": {"fact_id": "f1", "session_id": "s1", "content": "hello"},
            },
        )
        assert fact.status_code == 200, fact.text
        pushed = json.loads(ws.recv(timeout=10))
        assert [e["change"]["seq"] for e in pushed["entries"]] == [fact.json()["project_seq"]]
    with pytest.raises(InvalidStatus) as refused:
        connect(f"{ws_url}?project_epoch={epoch}&after_seq=0", open_timeout=10)
    assert refused.value.response.status_code == 401


def test_live1_loopback_serves_http_and_the_live_feed(edge_loopback: Loopback) -> None:
    flow(edge_loopback)


@pytest.mark.postgres
def test_live1_loopback_serves_the_postgres_storage_mode(edge_postgres_loopback: Loopback) -> None:
    flow(edge_postgres_loopback)
