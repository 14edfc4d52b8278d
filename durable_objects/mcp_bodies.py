"""The MCP tools `artifact_read` and `artifact_write` in a project object (SPEC.md ART-11).

The tools run the synchronous lifecycle service; the bodies are in R2, reached only by
awaiting the `ARTIFACTS` binding. So the object serves an MCP request over `InlineBodies`, a
body store that holds what this request has fetched, and runs it again when the first pass
asked for a body it does not hold:

- a read (`head` of a generation not held) records the generation; the object fetches it
  from R2 (its size always, its bytes only when they fit the inline limit) and serves the
  request again, which then answers from the fetched copy;
- a write (`create` of a generation not in R2 yet) records the bytes and refuses the upload
  (`artifact_store_unavailable`, the reservation unchanged); the object writes them into R2
  (a conditional create) and serves the identical request again: the tool finds its
  reservation by command id, observes the stored bytes and publishes. The body is in R2
  before the publication commits, as on the body routes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

from aidememo.domain.errors import ErrorCode, fail
from durable_objects.artifacts import R2_IDENTITY

INLINE_READ_MAX = 768 << 10  # the tools' inline limit (aidememo.mcp.artifact_tools)


class InlineBodies:
    """A `BodyStore` over what one MCP request fetched from R2 (or is about to write)."""

    identity = R2_IDENTITY

    def __init__(self) -> None:
        self.sizes: dict[str, int] = {}
        self.data: dict[str, bytes] = {}
        self.wanted: str | None = None  # a generation to fetch, then serve again
        self.to_put: tuple[str, bytes] | None = None  # bytes to write, then serve again

    def reset(self) -> None:
        """Forget the last request's bodies: the object binds one `InlineBodies` to its MCP
        app and starts every request from nothing held."""
        self.sizes.clear()
        self.data.clear()
        self.wanted = None
        self.to_put = None

    def create(self, key: str, chunks: Iterator[bytes], size: int) -> tuple[int, str]:
        data = b"".join(chunks)
        held = self.data.get(key)
        if held is not None:
            return len(held), hashlib.sha256(held).hexdigest()
        if len(data) != size:
            raise fail(ErrorCode.ARTIFACT_BODY_MISMATCH, f"the body is not {size} bytes long")
        self.to_put = (key, data)
        raise fail(ErrorCode.ARTIFACT_STORE_UNAVAILABLE, "the body goes to R2 first")

    def head(self, key: str) -> int | None:
        if key not in self.sizes:
            self.wanted = key
        return self.sizes.get(key)

    def read(self, key: str, start: int = 0, end: int | None = None) -> Iterator[bytes]:
        data = self.data.get(key)
        if data is None:
            raise fail(ErrorCode.ARTIFACT_NOT_FOUND, "this body was not fetched")
        yield data[start:end]

    def delete(self, key: str) -> None:
        raise fail(ErrorCode.ARTIFACT_STORE_UNAVAILABLE, "bodies are deleted by the GC alarm")

    async def fetch(self, bucket: Any) -> bool:
        """Fetch the wanted generation (or write the pending bytes); True to serve again."""
        if self.to_put is not None:
            key, data = self.to_put
            self.to_put = None
            stored = await bucket.put(key, data, onlyIf={"etagDoesNotMatch": "*"})
            held = data if stored is not None else await _get(bucket, key)
            if held is None:
                return False
            self.sizes[key], self.data[key] = len(held), held
            return True
        wanted, self.wanted = self.wanted, None
        if wanted is None:
            return False
        return await self._fetch_wanted(bucket, wanted)

    async def _fetch_wanted(self, bucket: Any, key: str) -> bool:
        head = await bucket.head(key)
        if head is None:
            return False
        self.sizes[key] = int(head.size)
        if self.sizes[key] <= INLINE_READ_MAX:
            held = await _get(bucket, key)
            if held is not None:
                self.data[key] = held
        return True


async def _get(bucket: Any, key: str) -> bytes | None:
    obj = await bucket.get(key)
    if obj is None:
        return None
    parts = [chunk.to_bytes() async for chunk in obj.body]
    return b"".join(parts)
