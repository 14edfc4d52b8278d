"""One event-loop turn's answers made together and written together (SPEC.md HTTP-11).

A turn of the loop reads every connection that has bytes ready. A request it completes, whole
with its head (`origin.direct.DirectCycle`), that is answered on the loop (the loop lane,
`origin.lanes`) is not answered inside its read: `LoopTurn.later` queues it, and one callback,
run once the turn's other ready callbacks have run and before the loop polls again, answers the
queued requests in the order they were read and then writes every answer held in the turn. An
answer is not written the moment it is made either: `HeldWrites.hold` keeps it until that same
callback (the store lane's answers, handed to the loop, are held the same way). Phase by phase,
a client thread wakes once for all of its answers and the server's socket reads, core work and
writes each run warm, rather than alternating per request. A request waits at most for the rest
of its turn's work; with one request ready, that is nothing.

Order and completeness: a request queued for the end of the turn is answered before anything
else happens on its connection (a pipelined request's head, a malformed request's 400, an
oversized head's 431, an upgrade: `origin.transport.LimitedHttpProtocol._answer_ready`), so
answers keep the order of the requests. `HeldWrites` is the connection's transport as the
protocol (and every cycle it makes) sees it: any other write, `writelines`, `write_eof` or
`close` on it writes the held answer first, so closing never drops what was held; `abort`
and a lost connection drop it (there is nobody to read it).
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Callable
from typing import Any

_logger = logging.getLogger("aidememo.server")


class LoopTurn:
    """The end of one event-loop turn: the requests read in it answered (`later`), then every
    held answer written (`due`), by one callback that runs once the turn's other ready
    callbacks have run, before the loop polls again."""

    __slots__ = ("__weakref__", "_due", "_loop", "_ready", "_scheduled")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._ready: list[Callable[[], None]] = []
        self._due: list[HeldWrites] = []
        self._scheduled = False

    def later(self, answer: Callable[[], None]) -> None:
        """Run `answer` at the end of this turn, after the turn's reads, in call order."""
        self._ready.append(answer)
        self._schedule()

    def due(self, held: HeldWrites) -> None:
        """`held` has an answer to write at the end of this turn."""
        self._due.append(held)
        self._schedule()

    def _schedule(self) -> None:
        if not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self._end)

    def _end(self) -> None:
        try:
            while self._ready:  # an answer may make another ready (a pipelined request)
                ready, self._ready = self._ready, []
                for answer in ready:
                    try:
                        answer()
                    except Exception as exc:  # one request's failure is not the others'
                        _logger.error("answering a request failed", exc_info=exc)
            due, self._due = self._due, []
            for held in due:
                try:
                    held.release()
                except Exception as exc:  # one connection's failure is not the others'
                    _logger.error("writing a held answer failed", exc_info=exc)
        finally:
            self._scheduled = False
            if self._ready or self._due:  # left by a BaseException that ended the callback
                self._schedule()


_TURNS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopTurn] = weakref.WeakKeyDictionary()


def loop_turn(loop: asyncio.AbstractEventLoop) -> LoopTurn:
    """The `LoopTurn` of `loop` (one per loop, made on first use)."""
    turn = _TURNS.get(loop)
    if turn is None:
        turn = _TURNS[loop] = LoopTurn(loop)
    return turn


class HeldWrites:
    """A connection's transport whose `hold` writes wait for the end of the loop iteration;
    everything else is the transport's, with held bytes written before any other write or
    close."""

    __slots__ = ("_held", "transport", "turn")

    def __init__(self, transport: asyncio.Transport, turn: LoopTurn) -> None:
        self.transport = transport
        self.turn = turn
        self._held: bytes | None = None

    def hold(self, data: bytes) -> None:
        """Write `data` at the end of this loop iteration (or before the next other write)."""
        if self._held is None:
            self._held = data
            self.turn.due(self)
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

    def __getattr__(self, name: str) -> Any:
        return getattr(self.transport, name)


JOIN_MAX_BYTES = 64 * 1024
"""Bodies up to this size are joined to the held head (uvloop sends a single buffer at once;
`writelines` of two takes its queued write path)."""
