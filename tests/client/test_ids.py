"""Generated and derived ids of `aidememo.client` (CLIENT-3), without a server."""

from __future__ import annotations

import re

from aidememo.client import new_ulid
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
