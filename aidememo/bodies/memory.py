"""An in-memory `BodyStore`: the reference the conformance suite runs the catalog with."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator

from aidememo.domain.errors import ErrorCode, fail

MEMORY_IDENTITY = "memory:v1"


class MemoryBodies:
    """Bodies in a dict; `fail_deletes` makes every delete raise (the GC backoff tests)."""

    identity = MEMORY_IDENTITY

    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}
        self.fail_deletes = False
        self._lock = threading.Lock()

    def create(self, key: str, chunks: Iterator[bytes], size: int) -> tuple[int, str]:
        data = b"".join(chunks)
        if len(data) != size:
            raise fail(ErrorCode.ARTIFACT_BODY_MISMATCH, f"got {len(data)} bytes, not {size}")
        with self._lock:
            stored = self.objects.setdefault(key, data)
        return len(stored), hashlib.sha256(stored).hexdigest()

    def head(self, key: str) -> int | None:
        data = self.objects.get(key)
        return None if data is None else len(data)

    def read(self, key: str, start: int = 0, end: int | None = None) -> Iterator[bytes]:
        data = self.objects.get(key)
        if data is None:
            raise fail(ErrorCode.ARTIFACT_NOT_FOUND, "no body under this key")
        return iter([data[start:end]])

    def delete(self, key: str) -> None:
        if self.fail_deletes:
            raise OSError("delete refused by the test double")
        with self._lock:
            self.objects.pop(key, None)
