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
from collections.abc import Callable, Sequence
from queue import Empty

from aidememo.http.types import Request, Response
from origin.asgi_common import internal_error
from origin.write_queue import Deliver, Item, QueueThreads, hand_over

MAX_BATCH = 64
"""Most requests one batch carries (STORE-7's bound on a shared transaction)."""

log = logging.getLogger("aidememo.error")


class Committer(QueueThreads):
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
        super().__init__(accepts, 1, "aidememo-committer")
        self._run_batch = run_batch
        self._max_batch = max_batch

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

    def _answer(self, batch: list[Item]) -> None:
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
            hand_over(loop, answers)
