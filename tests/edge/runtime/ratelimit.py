"""The rate-limit binding: `await env.RATE_LIMITER.limit({"key": k})` -> `{success}`.

Cloudflare documents a per-location counter over `simple = {limit, period}` with period 10
or 60 s; this double counts per key in fixed windows of `period` on the test clock, by default
with the `simple` settings of wrangler.toml's `RATE_LIMITER` binding (600 per 60 s). The result
is a `JsDict`, as the SDK's `_BindingWrapper` returns plain JS objects.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from aidememo.ports import Clock
from tests.doubles.do_storage import JsDict

WRANGLER_TOML = Path(__file__).resolve().parents[3] / "wrangler.toml"


def configured() -> tuple[int, int]:
    """`(limit, period)` of the `RATE_LIMITER` binding wrangler.toml declares."""
    with WRANGLER_TOML.open("rb") as f:
        conf = tomllib.load(f)
    (binding,) = [b for b in conf["ratelimits"] if b["name"] == "RATE_LIMITER"]
    return int(binding["simple"]["limit"]), int(binding["simple"]["period"])


class RateLimiter:
    """Fixed-window counter per key."""

    def __init__(self, clock: Clock, limit: int = 600, period_s: int = 60) -> None:
        if period_s not in (10, 60):
            raise ValueError("period must be 10 or 60 seconds")
        self.clock = clock
        self.limit_per_period = limit
        self.period_ms = period_s * 1000
        self._counts: dict[tuple[str, int], int] = {}

    async def limit(self, options: Any) -> JsDict:
        key = options["key"]
        if not isinstance(key, str):
            raise TypeError("key must be a string")
        window = self.clock.now_ms() // self.period_ms
        count = self._counts.get((key, window), 0) + 1
        self._counts[(key, window)] = count
        return JsDict(success=count <= self.limit_per_period)
