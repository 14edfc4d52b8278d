"""Fixtures of the HTTP contract suite; the machinery lives in `tests.contract.support`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from aidememo.domain.clock import FixedClock
from aidememo.domain.model import Role
from tests.contract.support import (
    BACKENDS,
    HERMES,
    OTHER_PROJECT,
    OUTSIDER,
    READER,
    RECEIVER,
    START_MS,
    WRITER,
    Api,
    BackendFactory,
    Client,
)


@pytest.fixture(params=sorted(BACKENDS))
def api(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Api]:
    """The contract fixture on every backend: tenant_http/project_http/epoch_http, writers
    codex-p1, codex-p2 and hermes, reader reader_actor, and an outsider of another project."""
    yield from open_api(request.param, BACKENDS[request.param], tmp_path)


def open_api(name: str, factory: BackendFactory, tmp_path: Path) -> Iterator[Api]:
    """The contract fixture's `Api` on the backend `factory` makes, closed after use."""
    clock = FixedClock(START_MS)
    backend = factory(tmp_path, clock)
    api = Api(
        name,
        backend.client,
        backend.identity,
        clock,
        admin_token=backend.admin_token,
        store=backend.store,
    )
    for actor in (WRITER, RECEIVER, HERMES):
        api.provision(actor, Role.WRITER)
    api.provision(READER, Role.READER)
    api.provision(OUTSIDER, Role.WRITER, project_id=OTHER_PROJECT, epoch=None)
    try:
        yield api
    finally:
        backend.close()


@pytest.fixture
def client(api: Api) -> Client:
    """The bare `Client` of the current backend."""
    return api.client
