"""Answers made in one event-loop iteration go out together at its end (SPEC.md HTTP-11).

A direct-path answer (`origin.transport.LimitedHttpProtocol._respond`) is not written the
moment it is made: `HeldWrites.hold` keeps it, and the loop's `LoopFlush` writes every held
answer in one callback that runs once the iteration's other ready callbacks (the reads of the
other ready connections, the committer's answers) have run, before the loop polls again.
Written one by one, each answer woke a client that had gone back to sleep while the server
made the next one; written back to back, a client thread wakes once for all of its answers
(Redis writes its replies before it sleeps for the same reason). docs/bench-notes.md has the
measurement. An answer waits at most for the rest of its iteration's work; with one request
ready, that is nothing.

Order and completeness: `HeldWrites` is the connection's transport as the protocol (and every
cycle it makes) sees it. Any other write, `writelines`, `write_eof` or `close` on it writes the
held answer first, so a refusal, a pipelined ASGI answer, a stream or a close after a held
answer keeps the connection's byte order, and closing never drops what was held. `abort` and
a lost connection drop it (there is nobody to read it).
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from typing import Any

_logger = logging.getLogger("aidememo.server")


class LoopFlush:
    """The held answers of one event loop, written by one callback per iteration."""

    __slots__ = ("__weakref__", "_due", "_loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._due: list[HeldWrites] = []

    def due(self, held: HeldWrites) -> None:
        """`held` has an answer to write at the end of this iteration."""
        if not self._due:
            self._loop.call_soon(self._release)
        self._due.append(held)

    def _release(self) -> None:
        due, self._due = self._due, []
        for held in due:
            try:
                held.release()
            except Exception as exc:  # one connection's failure is not the others'
                _logger.error("writing a held answer failed", exc_info=exc)


_FLUSHES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopFlush] = (
    weakref.WeakKeyDictionary()
)


def loop_flush(loop: asyncio.AbstractEventLoop) -> LoopFlush:
    """The `LoopFlush` of `loop` (one per loop, made on first use)."""
    flush = _FLUSHES.get(loop)
    if flush is None:
        flush = _FLUSHES[loop] = LoopFlush(loop)
    return flush


class HeldWrites:
    """A connection's transport whose `hold` writes wait for the end of the loop iteration;
    everything else is the transport's, with held bytes written before any other write or
    close."""

    __slots__ = ("_flush", "_held", "transport")

    def __init__(self, transport: asyncio.Transport, flush: LoopFlush) -> None:
        self.transport = transport
        self._flush = flush
        self._held: bytes | None = None

    def hold(self, data: bytes) -> None:
        """Write `data` at the end of this loop iteration (or before the next other write)."""
        if self._held is None:
            self._held = data
            self._flush.due(self)
        else:
            self._held += data

    def release(self) -> None:
        """Write what is held now."""
        data = self._held
        if data is not None:
            self._held = None
            if not self.transport.is_closing():
                self.transport.write(data)

    def drop(self) -> None:
        """Forget what is held (the connection is gone)."""
        self._held = None

    # -- the transport's interface ------------------------------------------------------------

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.release()
        self.transport.write(data)

    def writelines(self, data: Any) -> None:
        self.release()
        self.transport.writelines(data)

    def write_eof(self) -> None:
        self.release()
        self.transport.write_eof()

    def close(self) -> None:
        self.release()
        self.transport.close()

    def abort(self) -> None:
        self._held = None
        self.transport.abort()

    def is_closing(self) -> bool:
        return self.transport.is_closing()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self.transport.get_extra_info(name, default)

    def pause_reading(self) -> None:
        self.transport.pause_reading()

    def resume_reading(self) -> None:
        self.transport.resume_reading()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.transport, name)
