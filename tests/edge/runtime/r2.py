"""A stand-in R2 bucket binding (`env.ARTIFACTS`) with the Workers API's shapes.

- `await put(key, value, onlyIf=None, sha256=None, httpMetadata=None)`: `value` is bytes, a
  str or a `ReadableStream` (read whole here); `onlyIf={"etagDoesNotMatch": "*"}` makes a put
  on an existing key return None without reading the value; a `sha256` that is not the
  value's is refused (R2's 10037); returns the `R2Object`.
- `await head(key)`: the `R2Object` or None. `await get(key, range=None)`: an `R2ObjectBody`
  (`.body` a `ReadableStream`, `.size`, `.etag`) or None; `range={"offset", "length"}`.
- `await delete(key)` (a key or a list of keys): idempotent. `fail_deletes` makes it raise.
- `reset()`: forget every object, as an emptied bucket would.
Objects live in memory; `keys()` lists them for tests.
"""

from __future__ import annotations

import hashlib
from typing import Any

from tests.edge.runtime.streams import ReadableStream


class R2Error(Exception):
    """What the binding raises on a refused call."""


class R2Object:
    """Metadata of a stored object."""

    def __init__(self, key: str, data: bytes) -> None:
        self.key = key
        self.size = len(data)
        self.etag = hashlib.md5(data, usedforsecurity=False).hexdigest()
        self.httpEtag = f'"{self.etag}"'


class R2ObjectBody(R2Object):
    """An object with its body as a stream."""

    def __init__(self, key: str, data: bytes, body: bytes) -> None:
        super().__init__(key, data)
        self.body = ReadableStream.of(body)


class R2Bucket:
    """The binding."""

    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}
        self.fail_deletes = False
        self.puts = 0

    def keys(self) -> list[str]:
        return sorted(self.objects)

    def reset(self) -> None:
        self.objects.clear()

    async def put(
        self,
        key: str,
        value: Any,
        onlyIf: dict[str, str] | None = None,
        sha256: str | None = None,
        httpMetadata: Any = None,
    ) -> R2Object | None:
        if onlyIf is not None and onlyIf.get("etagDoesNotMatch") == "*" and key in self.objects:
            return None
        if value is None:
            data = b""
        elif isinstance(value, (bytes, str)):
            data = value.encode() if isinstance(value, str) else value
        elif isinstance(value, ReadableStream):
            data = await value.read_all()
        else:
            raise R2Error(f"unsupported put value {type(value).__name__}")
        if sha256 is not None and hashlib.sha256(data).hexdigest() != sha256:
            raise R2Error("put: the SHA-256 checksum you specified did not match (10037)")
        self.puts += 1
        self.objects[key] = data
        return R2Object(key, data)

    async def head(self, key: str) -> R2Object | None:
        data = self.objects.get(key)
        return None if data is None else R2Object(key, data)

    async def get(self, key: str, range: dict[str, int] | None = None) -> R2ObjectBody | None:
        data = self.objects.get(key)
        if data is None:
            return None
        body = data
        if range is not None:
            start = int(range.get("offset", 0))
            length = range.get("length")
            body = data[start:] if length is None else data[start : start + int(length)]
        return R2ObjectBody(key, data, body)

    async def delete(self, keys: str | list[str]) -> None:
        if self.fail_deletes:
            raise R2Error("delete refused by the test double")
        for key in [keys] if isinstance(keys, str) else keys:
            self.objects.pop(key, None)
