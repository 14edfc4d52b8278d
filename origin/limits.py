"""The origin transport's bounds (SPEC.md HTTP-4, HTTP-5), apart from the protocol enforcing
them (`origin.transport`), so settings can be built without importing the server.

The three timeouts can be shortened through environment variables (`TIMEOUT_ENVIRON`), read
by `aidememo serve`: the tests use that to see a timeout fire in a second instead of 10 or 30.
The sizes are fixed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

MAX_HEAD_BYTES = 64 * 1024
MAX_HEADER_FIELDS = 100
HEADER_TIMEOUT_S = 10.0
BODY_TIMEOUT_S = 30.0
IDLE_TIMEOUT_S = 75.0

# Test-only overrides of the three timeouts, in seconds (SPEC.md HTTP-5); sizes are fixed.
TIMEOUT_ENVIRON = {
    "header_timeout_s": "AIDEMEMO_HEADER_TIMEOUT_S",
    "body_timeout_s": "AIDEMEMO_BODY_TIMEOUT_S",
    "idle_timeout_s": "AIDEMEMO_IDLE_TIMEOUT_S",
}


@dataclass(frozen=True, slots=True)
class TransportLimits:
    """The bounds of SPEC.md HTTP-4 and HTTP-5."""

    max_head_bytes: int = MAX_HEAD_BYTES
    max_header_fields: int = MAX_HEADER_FIELDS
    header_timeout_s: float = HEADER_TIMEOUT_S
    body_timeout_s: float = BODY_TIMEOUT_S
    idle_timeout_s: float = IDLE_TIMEOUT_S

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> TransportLimits:
        """The defaults, with the timeouts `TIMEOUT_ENVIRON` names overridden (tests use short
        ones); a value that is not a positive number raises ValueError naming the variable."""
        env = os.environ if environ is None else environ
        return cls(
            header_timeout_s=_seconds(env, "header_timeout_s", HEADER_TIMEOUT_S),
            body_timeout_s=_seconds(env, "body_timeout_s", BODY_TIMEOUT_S),
            idle_timeout_s=_seconds(env, "idle_timeout_s", IDLE_TIMEOUT_S),
        )


def _seconds(env: Mapping[str, str], field: str, default: float) -> float:
    name = TIMEOUT_ENVIRON[field]
    text = env.get(name)
    if text is None:
        return default
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0 < value < float("inf"):
        raise ValueError(f"{name} must be a positive number of seconds, not {text!r}")
    return value
