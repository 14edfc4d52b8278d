"""Fixtures of the live edge tier (marked `edge_live`; see tests/edge_live/backend.py).

`api` and `client` mirror tests/contract/conftest.py on the live edge: the same fixture
project, provisioned through the admin HTTP routes, in a tenant emptied before and after each
test, so the contract suite's tests run here unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from aidememo.domain.model import Role
from tests.contract.live import SocketClient
from tests.contract.support import (
    HERMES,
    OTHER_PROJECT,
    OUTSIDER,
    READER,
    RECEIVER,
    TENANT,
    WRITER,
    Api,
    Client,
)
from tests.edge_live.backend import LiveClock, LiveEdge, LiveIdentity, live_edge


@pytest.fixture(scope="session")
def edge() -> Iterator[LiveEdge]:
    with live_edge() as running:
        yield running


@pytest.fixture
def api(edge: LiveEdge) -> Iterator[Api]:
    client = SocketClient(edge.url, timeout=60)
    identity = LiveIdentity(client, edge.admin_token)
    try:
        identity.delete_tenant(TENANT)
        # Named "edge": the same code as the offline edge backend, per-isolate token cache
        # included, so the contract's edge-specific allowances apply.
        api = Api("edge", client, identity, LiveClock(), admin_token=edge.admin_token)  # type: ignore[arg-type]
        for actor in (WRITER, RECEIVER, HERMES):
            api.provision(actor, Role.WRITER)
        api.provision(READER, Role.READER)
        api.provision(OUTSIDER, Role.WRITER, project_id=OTHER_PROJECT, epoch=None)
        yield api
        identity.delete_tenant(TENANT)
    finally:
        client.close()


@pytest.fixture
def client(api: Api) -> Client:
    return api.client
