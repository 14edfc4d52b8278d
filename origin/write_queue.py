"""Where the adapter hands requests instead of its dispatch pool: a queue the event loop fills
and threads of its own empty.

`WriteQueue` is what the adapter (`origin.asgi`, `origin.direct`) sees: `accepts(method,
path)` says which requests it takes, `submit` queues one from the loop, `stop` answers what is
queued and ends the threads. Two kinds serve it, both on `QueueThreads`: the write committer
(`origin.committer`, HTTP-10: one thread answering commands in batches, one commit for many)
and the store pool (`origin.store_pool`, HTTP-12: as many threads as the store has
connections). `QueueThreads` holds what they share: the queue, the threads started on the
first request, the retryable 503 for a request submitted after `stop`, and the hand-over of
answers to their loops (`hand_over`, then `deliver_answers` on the loop).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from queue import SimpleQueue
from typing import Protocol

from aidememo.http.types import Request, Response
from origin.asgi_common import internal_error

Deliver = Callable[[Response], None]
"""Called on the request's loop with its answer."""

Item = tuple[asyncio.AbstractEventLoop, Request, Deliver]
"""A queued request: its loop, the request and where its answer goes."""

log = logging.getLogger("aidememo.error")


class WriteQueue(Protocol):
    """The adapter's side of a queue: `origin.committer.Committer` (a store with write
    batches, HTTP-10) or `origin.store_pool.StorePool` (a store with a bounded connection
    pool, HTTP-12)."""

    accepts: Callable[[str, str], bool]

    def submit(self, loop: asyncio.AbstractEventLoop, request: Request, deliver: Deliver) -> None:
        """Queue `request`; `deliver(response)` is called on `loop` with its answer."""
        ...

    def stop(self) -> None:
        """Answer everything queued, then end the threads (idempotent)."""
        ...


class QueueThreads:
    """`threads` threads named `name` taking the queued requests `accepts` admits (`_run`,
    which a subclass defines: it returns when it takes `None`); started on the first request,
    ended by `stop`."""

    def __init__(self, accepts: Callable[[str, str], bool], threads: int, name: str) -> None:
        if threads < 1:
            raise ValueError("threads must be at least 1")
        self.accepts = accepts
        """`accepts(method, path)`: True for a request this queue may take."""
        self.threads = threads
        self._name = name
        self._queue: SimpleQueue[Item | None] = SimpleQueue()
        self._running: list[threading.Thread] = []
        self._start_lock = threading.Lock()
        self._stopped = False

    def submit(self, loop: asyncio.AbstractEventLoop, request: Request, deliver: Deliver) -> None:
        """Queue `request`; `deliver(response)` is called on `loop` once it was answered."""
        if not self._running and not self._start():
            loop.call_soon(deliver, internal_error(request.request_id))  # stopped: retry later
            return
        self._queue.put((loop, request, deliver))

    def stop(self) -> None:
        """Answer everything queued, then end the threads (idempotent)."""
        with self._start_lock:
            self._stopped = True
            running, self._running = self._running, []
        for _ in running:
            self._queue.put(None)
        for thread in running:
            thread.join()

    def _start(self) -> bool:
        """Start the threads unless they run; False once stopped."""
        with self._start_lock:
            if self._stopped:
                return False
            if not self._running:
                for n in range(self.threads):
                    name = self._name if self.threads == 1 else f"{self._name}-{n}"
                    thread = threading.Thread(target=self._run, name=name, daemon=True)
                    thread.start()
                    self._running.append(thread)
            return True

    def _run(self) -> None:
        raise NotImplementedError


def hand_over(loop: asyncio.AbstractEventLoop, answers: list[tuple[Deliver, Response]]) -> None:
    """From a queue's thread: have `loop` deliver `answers` (nothing when it is closed: the
    server is gone, nobody to answer)."""
    try:
        loop.call_soon_threadsafe(deliver_answers, answers)
    except RuntimeError:
        pass


def deliver_answers(answers: list[tuple[Deliver, Response]]) -> None:
    """On the loop: hand each answer to its request."""
    for deliver, response in answers:
        try:
            deliver(response)
        except Exception:
            log.exception("delivering an answer failed")
