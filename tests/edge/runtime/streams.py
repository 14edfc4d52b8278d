"""Web streams as the Worker's body code uses them, and the stand-in `pyodide.ffi`.

- `ReadableStream`: async-iterable, each chunk a `Uint8Array` (`to_bytes()`), as Pyodide
  iterates a JS stream. A request body is one, cut into `REQUEST_CHUNK` pieces as it is read
  (so the stream holds no copy of the body and line splitting across chunk boundaries is
  exercised).
- `TransformStream.new()`: `.readable`, and `.writable.getWriter()` with `write(chunk)`,
  `close()`, `abort(reason)`. As in the WHATWG default (writable high-water mark 1, readable 0)
  a write settles only once the reader took the chunk before it, so a writer that awaits every
  write never runs more than one chunk ahead of its reader. Only `Uint8Array` chunks are
  accepted: a response body stream refuses anything else, as workerd does.
- `TextEncoder.new().encode(text)` -> `Uint8Array`.
- `pyodide.ffi.create_proxy(obj)`: a proxy with `destroy()`.
"""

from __future__ import annotations

import asyncio
import types
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

REQUEST_CHUNK = 64 * 1024


class Uint8Array:
    """A JS `Uint8Array` proxy: `to_bytes()`, `length`."""

    def __init__(self, data: bytes | memoryview) -> None:
        self._data = bytes(data)
        self.length = len(data)

    @staticmethod
    def empty(start: int) -> Uint8Array:
        return Uint8Array(b"")

    def to_bytes(self) -> bytes:
        return self._data


class StreamAborted(Exception):
    """What a reader sees when the writer aborted the stream."""


class ReadableStream:
    """The readable side: async iteration yields `Uint8Array` chunks until closed."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue(maxsize=1)
        self._source: Iterator[int] | None = None  # a request body's chunk offsets
        self._cut: Callable[[int], Uint8Array] = Uint8Array.empty
        self.locked = False

    @classmethod
    def of(cls, data: bytes, chunk: int | None = None) -> ReadableStream:
        """A finished stream of `data` (a request body), cut into chunks of `chunk` bytes
        (`REQUEST_CHUNK` by default) as they are read, so the stream itself holds no copy."""
        stream = cls()
        size = chunk or REQUEST_CHUNK
        view = memoryview(data)
        stream._source = iter(range(0, len(data), size))
        stream._cut = lambda start: Uint8Array(view[start : start + size])
        return stream

    def __bool__(self) -> bool:
        return True

    def __aiter__(self) -> AsyncIterator[Uint8Array]:
        if self.locked:
            raise TypeError("ReadableStream is locked")
        self.locked = True
        return self._chunks()

    async def _chunks(self) -> AsyncIterator[Uint8Array]:
        if self._source is not None:
            for start in self._source:
                yield self._cut(start)
            return
        while True:
            kind, value = await self._queue.get()
            if kind == "close":
                return
            if kind == "abort":
                raise StreamAborted(str(value))
            yield value

    async def read_all(self) -> bytes:
        """Every byte until the writer closes (what a client reading the response does)."""
        return b"".join([chunk.to_bytes() async for chunk in self])


class _Writer:
    def __init__(self, readable: ReadableStream) -> None:
        self._readable = readable
        self.closed = False

    async def write(self, chunk: Any) -> None:
        if self.closed:
            raise TypeError("write after close")
        if not isinstance(chunk, Uint8Array):
            raise TypeError("a body stream carries Uint8Array chunks only")
        await self._readable._queue.put(("chunk", chunk))

    async def close(self) -> None:
        self.closed = True
        await self._readable._queue.put(("close", None))

    async def abort(self, reason: Any = None) -> None:
        self.closed = True
        await self._readable._queue.put(("abort", reason))


class _Writable:
    def __init__(self, readable: ReadableStream) -> None:
        self._readable = readable

    def getWriter(self) -> _Writer:
        return _Writer(self._readable)


class TransformStream:
    """`new TransformStream()`: an identity pipe."""

    def __init__(self) -> None:
        self.readable = ReadableStream()
        self.writable = _Writable(self.readable)

    @classmethod
    def new(cls) -> TransformStream:
        return cls()


class TextEncoder:
    """`new TextEncoder()`: UTF-8."""

    @classmethod
    def new(cls) -> TextEncoder:
        return cls()

    def encode(self, text: str) -> Uint8Array:
        return Uint8Array(text.encode("utf-8"))


class _Proxy:
    def __init__(self, obj: Any) -> None:
        self.obj = obj
        self.destroyed = False

    def destroy(self) -> None:
        self.destroyed = True


def pyodide_modules() -> dict[str, types.ModuleType]:
    """Stand-in `pyodide` and `pyodide.ffi` modules."""
    ffi = types.ModuleType("pyodide.ffi")
    ffi.__dict__["create_proxy"] = _Proxy
    package = types.ModuleType("pyodide")
    package.__path__ = []
    package.__dict__["ffi"] = ffi
    return {"pyodide": package, "pyodide.ffi": ffi}
