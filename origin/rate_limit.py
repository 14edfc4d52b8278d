"""The origin's per-token rate limit (SPEC.md RATE-1..3), the edge's semantics without its binding.

Each bearer token (by its SHA-256, the pipeline's `RateLimit` step, after authentication) may
make `limit` requests per fixed window of `period_s` seconds; one more is refused with 429
`rate_limited` and a `Retry-After` of the whole seconds left in the window (at most the period:
the edge always says the period). The default is the edge's, 600 per 60 s
(`aidememo serve --rate-limit 600/60`); `off` disables it. `aidememo serve` turns it on by
default only on a non-loopback address: an embedded server on 127.0.0.1 serves its own agents.

The counters live in one anonymous shared memory map made before `origin.workers` forks, under
one process-shared lock, so every worker of `--workers N` counts against the same windows (a
token cannot get N times its limit by landing on N workers). The map is a fixed table of
`SLOTS` slots, open addressing over the digest's first bytes with `PROBES` probes; a slot whose
window has passed is free again. Should every probed slot hold a token active in the current
window (more than tens of thousands of tokens in one minute), the request is let through:
the limit protects the service from one busy token, never refuses an idle one.
"""

from __future__ import annotations

import math
import mmap
import multiprocessing
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass

from aidememo.domain.errors import ErrorCode
from aidememo.http.app import RetryLater

DEFAULT_LIMIT = 600
DEFAULT_PERIOD_S = 60
SLOTS = 1 << 15
PROBES = 16
_SLOT = struct.Struct("<16sqq")  # key (digest prefix), window number + 1 (0: empty), count
OFF = "off"


@dataclass(frozen=True, slots=True)
class RateSetting:
    """`limit` requests per `period_s` seconds per token."""

    limit: int = DEFAULT_LIMIT
    period_s: int = DEFAULT_PERIOD_S


def parse_rate(text: str) -> RateSetting | None:
    """`N/S` (N requests per S seconds, both positive integers) or `off` (None); ValueError
    otherwise."""
    value = text.strip().lower()
    if value == OFF:
        return None
    count, sep, period = value.partition("/")
    if not sep or not count.isdigit() or not period.isdigit():
        raise ValueError(f"expected N/SECONDS (e.g. 600/60) or off, got {text!r}")
    setting = RateSetting(int(count), int(period))
    if setting.limit < 1 or setting.period_s < 1:
        raise ValueError(f"the limit and the period must be positive, got {text!r}")
    return setting


class RateLimiter:
    """Fixed-window counters per token digest, shared by the processes forked after it was
    made. Calling it with a digest counts one request, or raises 429 `rate_limited`."""

    def __init__(
        self,
        setting: RateSetting,
        *,
        slots: int = SLOTS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.setting = setting
        self.slots = slots
        self._clock = clock  # CLOCK_MONOTONIC is one clock for every process of the machine
        self._mem = mmap.mmap(-1, slots * _SLOT.size)  # MAP_SHARED | MAP_ANONYMOUS
        self._lock = multiprocessing.get_context("fork").Lock()

    def __call__(self, digest: bytes) -> None:
        wait = self.hit(digest)
        if wait is not None:
            raise RetryLater(
                ErrorCode.RATE_LIMITED,
                f"more than {self.setting.limit} requests in {self.setting.period_s} s "
                f"with this token; retry in {wait} s",
                wait,
            )

    def hit(self, digest: bytes) -> int | None:
        """Count one request of `digest`; None when it is allowed, else the whole seconds
        until its window ends (at least 1)."""
        period = self.setting.period_s
        now = self._clock()
        window = int(now // period) + 1
        key = digest[:16]
        start = int.from_bytes(key[:8], "little") % self.slots
        mem, size, unpack, pack = self._mem, _SLOT.size, _SLOT.unpack_from, _SLOT.pack_into
        with self._lock:
            free = -1
            for probe in range(PROBES):
                offset = ((start + probe) % self.slots) * size
                held, held_window, count = unpack(mem, offset)
                if held == key:
                    if held_window != window:
                        pack(mem, offset, key, window, 1)
                        return None
                    if count >= self.setting.limit:
                        return max(1, math.ceil(window * period - now))
                    pack(mem, offset, key, window, count + 1)
                    return None
                if free < 0 and held_window != window:
                    free = offset
            if free >= 0:
                pack(mem, free, key, window, 1)
        return None

    def close(self) -> None:
        """Release the shared map."""
        self._mem.close()
