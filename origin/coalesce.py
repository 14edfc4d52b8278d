"""One event-loop turn's answers made together and written together (SPEC.md HTTP-11).

A turn of the loop reads every connection that has bytes ready. A request answered on the loop
(the loop lane, `origin.lanes`) is not answered inside its read: `LoopTurn.later` queues it, and
one callback, run once the turn's other ready callbacks have run and before the loop polls
again, answers the queued requests in the order they were read, then has every connection that
holds answers of the turn (`LoopTurn.due`: the connection's `release`) write them. So a client
wakes once for all of its answers, and the server's reads, core work and writes each run warm
rather than alternating per request. A request waits at most for the rest of its turn's work.
The connection (`origin.transport.HttpConnection`) keeps the order of its bytes: a queued
answer comes before anything else on it, and any other write or a close writes what it holds
first.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Callable
from typing import Protocol

_logger = logging.getLogger("aidememo.server")


class Held(Protocol):
    """A connection holding answers of this turn."""

    def release(self) -> None:
        """Write what it holds."""
        ...


class LoopTurn:
    """The end of one event-loop turn: the requests read in it answered (`later`), then every
    held answer written (`due`), by one callback that runs once the turn's other ready
    callbacks have run, before the loop polls again."""

    __slots__ = ("__weakref__", "_due", "_loop", "_ready", "_scheduled")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._ready: list[Callable[[], None]] = []
        self._due: list[Held] = []
        self._scheduled = False

    def later(self, answer: Callable[[], None]) -> None:
        """Run `answer` at the end of this turn, after the turn's reads, in call order."""
        self._ready.append(answer)
        self._schedule()

    def due(self, held: Held) -> None:
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


JOIN_MAX_BYTES = 64 * 1024
"""Bodies up to this size are joined to the held head (uvloop sends a single buffer at once;
`writelines` of two takes its queued write path)."""
