"""A request body as a bounded stream of bytes: read lazily, counted against the route's limit.

A front hands the core a `Body`; nothing in the core requires it whole in memory:

- `Body.of(data)`: a body the front already holds whole (one ASGI message, an RPC payload,
  a test). Its size is known, so stage one of the pipeline (`aidememo.http.pipeline`) checks
  it against the route's limit before authentication, as it checks a declared
  `Content-Length`.
- `Body.unread(length)`: a body the front reads itself once stage one admitted the request
  (the edge Worker, whose reads are awaited); `length` is the declared size, None when the
  request announced a body of unknown size, 0 when it has none. The core never reads it.
- `StreamBody(chunks, length)`: a body still arriving; the pipeline `bound`s it to the
  route's limit, and iterating it counts every chunk, refusing with `payload_too_large` as
  soon as the count passes the limit, so the rest is never read. `read()` collects it whole
  (JSON routes, at most their 1 MiB) and keeps the result; a streamed route (the archive
  import) iterates the chunks instead.

`read_async` is the same count for a front whose chunks are awaited.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, Iterator

from aidememo.domain.errors import ErrorCode, fail
from aidememo.domain.limits import MAX_REQUEST_BODY_BYTES


def too_large(limit: int) -> Exception:
    """The `payload_too_large` refusal of a body over `limit` bytes."""
    return fail(ErrorCode.PAYLOAD_TOO_LARGE, f"request body is larger than {limit} bytes")


def declared_length(headers: dict[str, str]) -> int | None:
    """The body size a request declares: its `Content-Length` when that is plain digits."""
    raw = headers.get("content-length")
    if raw is None:
        return None
    raw = raw.strip()
    return int(raw) if raw.isdigit() else None


class Body:
    """A body held whole (re-readable), or one the front reads itself (`unread`)."""

    __slots__ = ("_data", "length")

    def __init__(self, data: bytes | None, length: int | None) -> None:
        self._data = data
        self.length = length  # the size stage one checks; None: not known before reading

    @classmethod
    def of(cls, data: bytes) -> Body:
        """A body the front holds whole."""
        return cls(data, len(data))

    @classmethod
    def unread(cls, length: int | None) -> Body:
        """A body the front reads itself after stage one (never read by the core)."""
        return cls(None, length)

    @property
    def complete(self) -> bool:
        """True when nothing of the body is left unread at the front."""
        return self._data is not None or self.length == 0

    def bound(self, limit: int) -> None:
        """Count the body against `limit` as it is read (a whole body was checked already)."""

    def take(self, limit: int) -> bytes:
        """The whole body, counted against `limit` (the pipeline's `ReadBody` step)."""
        self.bound(limit)
        return self.read()

    def read(self) -> bytes:
        """The whole body."""
        if self._data is None:
            if self.length == 0:
                return b""
            raise RuntimeError("an unread body is read by its front, not by the core")
        return self._data

    def __iter__(self) -> Iterator[bytes]:
        """The body chunk by chunk."""
        data = self.read()
        if data:
            yield data


EMPTY = Body.of(b"")


class StreamBody(Body):
    """A body still arriving: read once, chunk by chunk, counted against the route's limit.

    `chunks` is the front's source (it raises an `AidememoError` when the client goes away);
    until the pipeline `bound`s it, the limit is the JSON routes' 1 MiB.
    """

    __slots__ = ("_chunks", "_done", "_limit", "_seen")

    def __init__(self, chunks: Iterator[bytes], length: int | None = None) -> None:
        super().__init__(None, length)
        self._chunks = chunks
        self._limit = MAX_REQUEST_BODY_BYTES
        self._seen = 0
        self._done = False

    @property
    def complete(self) -> bool:
        return self._done

    def bound(self, limit: int) -> None:
        self._limit = limit

    def __iter__(self) -> Iterator[bytes]:
        if self._data is not None:  # read whole already
            yield from super().__iter__()
            return
        if self._done:
            raise RuntimeError("a streamed body is read once")
        for chunk in self._chunks:
            self._seen += len(chunk)
            if self._seen > self._limit:
                raise too_large(self._limit)
            yield chunk
        self._done = True

    def read(self) -> bytes:
        if self._data is None:
            self._data = b"".join(list(self))
        return self._data


async def read_async(chunks: AsyncIterable[bytes], limit: int) -> bytes:
    """An awaited body collected whole, refused as soon as it passes `limit` bytes."""
    parts: list[bytes] = []
    seen = 0
    async for chunk in chunks:
        seen += len(chunk)
        if seen > limit:
            raise too_large(limit)
        parts.append(chunk)
    return b"".join(parts)
