"""Fixtures of the client suite: the contract fixture `api` on every backend, and clients of
`aidememo.client` wired to it through `tests.client.transports`."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from aidememo.client import Client
from tests.client.transports import Faulty, transport_for
from tests.contract.conftest import api  # the contract fixture, on every backend
from tests.contract.support import PROJECT, Api

__all__ = ["api", "connect"]


@pytest.fixture
def connect(api: Api) -> Iterator[Callable[..., tuple[Client, Faulty]]]:
    """`connect(actor, retries=1)`: a `Client` of `actor` and the faulty transport under it."""
    opened: list[Client] = []

    def make(actor: str, *, retries: int = 1) -> tuple[Client, Faulty]:
        base_url, inner = transport_for(api.client)
        transport = Faulty(inner)
        client = Client(base_url, api.tokens[actor], PROJECT, transport=transport, retries=retries)
        opened.append(client)
        return client, transport

    yield make
    for client in opened:
        client.close()
