"""The per-isolate cache of authenticated token digests.

An entry lives at most `TTL_MS` (30 s): a token revoked in the token directory keeps working
at an edge location that cached it for up to 30 s. Revocation through this isolate evicts
its entry at once. Suspension and role changes are not cached at all: the project object
checks the caller's membership on every request. Only positive answers are cached, so a
token is usable as soon as its bootstrap returns.
"""

from __future__ import annotations

from collections import OrderedDict

from aidememo.service.access import Caller

TTL_MS = 30_000
MAX_ENTRIES = 10_000


class TokenCache:
    """digest -> (caller, expiry in ms), oldest evicted first beyond `max_entries`."""

    def __init__(self, ttl_ms: int = TTL_MS, max_entries: int = MAX_ENTRIES) -> None:
        if not 0 <= ttl_ms <= TTL_MS:
            raise ValueError(f"the token cache window is at most {TTL_MS} ms")
        self.ttl_ms = ttl_ms
        self.max_entries = max_entries
        self._entries: OrderedDict[bytes, tuple[Caller, int]] = OrderedDict()

    def get(self, digest: bytes, now_ms: int) -> Caller | None:
        """The cached caller, or None when missing or expired."""
        entry = self._entries.get(digest)
        if entry is None:
            return None
        caller, expires = entry
        if now_ms >= expires:
            del self._entries[digest]
            return None
        return caller

    def put(self, digest: bytes, caller: Caller, now_ms: int) -> None:
        """Remember an authenticated digest until `now_ms + ttl_ms`."""
        self._entries[digest] = (caller, now_ms + self.ttl_ms)
        self._entries.move_to_end(digest)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def evict(self, digest: bytes) -> None:
        """Forget a digest (after a revocation through this isolate)."""
        self._entries.pop(digest, None)

    def clear(self) -> None:
        """Forget everything."""
        self._entries.clear()
