"""Generated ids (CLIENT-3) and values refused before sending (CLIENT-4), without a server."""

from __future__ import annotations

import re

import pytest

from aidememo.client import AsyncClient, Client, new_ulid
from aidememo.client.ulid import ulid_time_ms
from aidememo.domain.ids import is_valid_id

ULID = re.compile(r"^[0-9A-HJKMNP-TV-Z]{26}$")


def test_client3_ulids_are_valid_ids_ordered_by_time() -> None:
    ids = [new_ulid(1_700_000_000_000 + i) for i in range(50)]
    assert all(ULID.match(u) and is_valid_id(u) for u in ids)
    assert ids == sorted(ids)
    assert ulid_time_ms(ids[7]) == 1_700_000_000_007
    assert len({new_ulid(5) for _ in range(1000)}) == 1000  # 80 random bits each
    assert new_ulid(0).startswith("0000000000")
    assert ulid_time_ms(new_ulid((1 << 48) - 1)) == (1 << 48) - 1


def test_client4_a_token_that_would_split_the_request_is_refused() -> None:
    for cls in (Client, AsyncClient):
        with pytest.raises(ValueError, match="line break"):
            cls("http://127.0.0.1:1", "token\r\nx-injected: 1", "p")
    with pytest.raises(ValueError, match="http"):
        Client("127.0.0.1:3030", "token", "p")
