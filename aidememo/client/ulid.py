"""ULIDs for the ids a caller leaves out (SPEC.md CLIENT-3).

A ULID is 48 bits of milliseconds since the Unix epoch and 80 random bits, written as 26
characters of Crockford's base32 (`0-9A-HJKMNP-TV-Z`): sortable by creation time, unique
without coordination, and a valid identifier under ID-1.
"""

from __future__ import annotations

import os
import time

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_LENGTH = 26


def new_ulid(now_ms: int | None = None) -> str:
    """A fresh ULID for `now_ms` (default: the current time)."""
    ms = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    if not 0 <= ms < 1 << 48:
        raise ValueError("a ULID's time must fit in 48 bits")
    value = (ms << 80) | int.from_bytes(os.urandom(10))  # 80 random bits
    out = []
    for _ in range(_LENGTH):
        out.append(_ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(out))


def ulid_time_ms(ulid: str) -> int:
    """The milliseconds a ULID was made at."""
    value = 0
    for char in ulid.upper():
        value = (value << 5) | _ALPHABET.index(char)
    return value >> 80
