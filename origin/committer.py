"""The origin's write committer: one thread answering command requests in batches (HTTP-10).

On a store that runs write batches (`aidememo.ports.CAP_WRITE_BATCH`, the SQLite file store),
a command request (`Route.batch`) is not dispatched in a pool thread of its own, where each
would wait in the store's group commit for a leader thread to commit it (a futex wake-up and a
task switch per request, per hand-off). The event loop puts it on this committer's queue
instead (`submit`); the committer thread takes everything queued, up to `MAX_BATCH`, and runs
it through `HttpApp.run_batch`: each request through the same `dispatch` as any other (the
whole pipeline: stage one, the command's transaction with membership and receipt, AUTH-5,
CMD-5), all in one write transaction, one `COMMIT` (one fsync). Once that `COMMIT` returned,
one `call_soon_threadsafe` per loop hands every answer of the batch to the loop, which writes
them. What arrives while a batch runs waits for the next, so batches grow with the load by
themselves, and an idle committer is woken by the first request that comes.

A request is never answered before its commit is durable; a request whose command failed is
answered with its own error and the others of its batch commit; when the commit fails, every
request of the batch is answered with the storage error (STORE-7's rules, kept by the store's
`batch`). The loop never blocks: `submit` only appends to a queue.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Sequence
from queue import Empty, SimpleQueue
from typing import Protocol

from aidememo.http.types import Request, Response
from origin.asgi_common import internal_error

MAX_BATCH = 64
"""Most requests one batch carries (STORE-7's bound on a shared transaction)."""

Deliver = Callable[[Response], None]
"""Called on the request's loop with its answer."""

_STOP = None

log = logging.getLogger("aidememo.error")


class WriteQueue(Protocol):
    """Where the adapter hands the requests it `accepts` instead of its dispatch pool: this
    module's `Committer` (a store with write batches, HTTP-10) or
    `origin.store_pool.StorePool` (a store with a bounded connection pool, HTTP-12)."""

    accepts: Callable[[str, str], bool]

    def submit(self, loop: asyncio.AbstractEventLoop, request: Request, deliver: Deliver) -> None:
        """Queue `request`; `deliver(response)` is called on `loop` with its answer."""
        ...

    def stop(self) -> None:
        """Answer everything queued, then end the threads (idempotent)."""
        ...


class Committer:
    """The write committer of one origin process: `accepts` tells which requests it takes,
    `submit` queues one (from the loop), `stop` finishes what is queued and ends the thread."""

    def __init__(
        self,
        run_batch: Callable[[Sequence[Request]], list[Response]],
        accepts: Callable[[str, str], bool],
        *,
        max_batch: int = MAX_BATCH,
    ) -> None:
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        self.accepts = accepts
        """`accepts(method, path)`: True for a request the committer may take."""
        self._run_batch = run_batch
        self._max_batch = max_batch
        self._queue: SimpleQueue[tuple[asyncio.AbstractEventLoop, Request, Deliver] | None]
        self._queue = SimpleQueue()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._stopped = False

    def submit(self, loop: asyncio.AbstractEventLoop, request: Request, deliver: Deliver) -> None:
        """Queue `request`; `deliver(response)` is called on `loop` once its batch committed."""
        if self._thread is None and not self._start():
            loop.call_soon(deliver, internal_error(request.request_id))  # stopped: retry later
            return
        self._queue.put((loop, request, deliver))

    def stop(self) -> None:
        """Answer everything queued, then end the thread (idempotent)."""
        with self._start_lock:
            self._stopped = True
            thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(_STOP)
            thread.join()

    def _start(self) -> bool:
        """Start the thread unless it runs; False once stopped."""
        with self._start_lock:
            if self._stopped:
                return False
            if self._thread is None:
                thread = threading.Thread(target=self._run, name="aidememo-committer", daemon=True)
                thread.start()
                self._thread = thread
            return True

    def _run(self) -> None:
        queue, limit = self._queue, self._max_batch
        while True:
            item = queue.get()
            if item is None:
                return
            batch = [item]
            stop = False
            while len(batch) < limit:
                try:
                    item = queue.get_nowait()
                except Empty:
                    break
                if item is None:
                    stop = True
                    break
                batch.append(item)
            self._answer(batch)
            if stop:
                return

    def _answer(self, batch: list[tuple[asyncio.AbstractEventLoop, Request, Deliver]]) -> None:
        requests = [request for _, request, _ in batch]
        try:
            responses = self._run_batch(requests)
        except Exception:  # `run_batch` never raises; a bug here must not strand the callers
            log.exception("write batch raised")
            responses = [internal_error(request.request_id) for request in requests]
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[Deliver, Response]]] = {}
        for (loop, _, deliver), response in zip(batch, responses, strict=True):
            by_loop.setdefault(loop, []).append((deliver, response))
        for loop, answers in by_loop.items():
            try:
                loop.call_soon_threadsafe(deliver_answers, answers)
            except RuntimeError:  # the loop is closed: the server is gone, nobody to answer
                pass


def deliver_answers(answers: list[tuple[Deliver, Response]]) -> None:
    """On the loop: hand each answer to its request."""
    for deliver, response in answers:
        try:
            deliver(response)
        except Exception:
            log.exception("delivering an answer failed")
