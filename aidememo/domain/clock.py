"""Default implementations of the Clock and Ids ports, plus test doubles that are exact."""

from __future__ import annotations

import secrets
import time


class SystemClock:
    """The real wall clock."""

    def now_ms(self) -> int:
        """Milliseconds since the Unix epoch."""
        return time.time_ns() // 1_000_000


class FixedClock:
    """A clock that moves only when told to; used by tests and the conformance suite."""

    def __init__(self, now_ms: int = 1_000) -> None:
        self.value = now_ms

    def now_ms(self) -> int:
        """The current fixed time."""
        return self.value

    def advance(self, ms: int) -> None:
        """Move time forward by `ms`."""
        self.value += ms


class RandomIds:
    """Random ids: prefix, underscore, 26 hex characters of randomness."""

    def new_id(self, prefix: str) -> str:
        """A fresh id in the identifier grammar."""
        return f"{prefix}_{secrets.token_hex(13)}"
