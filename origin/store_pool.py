"""Requests whose only I/O is the store's, on a store with a bounded connection pool
(PostgreSQL): as many threads as the store has connections (SPEC.md HTTP-12).

A command (`Route.batch`) or a member read (`Route.store_read`) does no I/O but the store's, so
it holds one of the store's connections for nearly all of its run. In the adapter's dispatch
pool (64 threads, sized for requests that wait on a client or on object storage) every such
request beyond the store's connections wakes an idle thread that then sleeps again in the
store's pool until a connection is released, and is woken once more: two hand-offs between
threads per request, each a futex wake-up, a task switch and a turn of the GIL. Here the
requests wait in one queue instead, in the order they came, and each of the `threads` threads
takes the next as soon as it finished the one before, so a thread never waits for a connection
and never sleeps while requests are queued (docs/bench-notes.md has the measurements).

Each request runs through the same `dispatch` as any other (the whole request pipeline, its
transaction and its commit); its answer is handed to its loop with `call_soon_threadsafe`
once `dispatch` returned, so never before its commit. A dispatch that raises is answered with
the adapter's retryable 503. `stop` lets the threads answer everything queued, then ends them.
The queue, its threads and the hand-over are the write committer's too
(`origin.write_queue.QueueThreads`), so the adapter hands requests to either alike.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from aidememo.http.types import Request, Response
from origin.asgi_common import internal_error
from origin.write_queue import QueueThreads, hand_over

log = logging.getLogger("aidememo.error")


class StorePool(QueueThreads):
    """`threads` threads answering the requests `accepts(method, path)` admits, in the order
    `submit` queued them; started on the first request, ended by `stop`."""

    def __init__(
        self,
        dispatch: Callable[[Request], Response],
        accepts: Callable[[str, str], bool],
        threads: int,
    ) -> None:
        super().__init__(accepts, threads, "aidememo-store")
        self._dispatch = dispatch

    def _run(self) -> None:
        queue, dispatch = self._queue, self._dispatch
        while True:
            item = queue.get()
            if item is None:
                return
            loop, request, deliver = item
            try:
                response = dispatch(request)
            except Exception:  # `dispatch` never raises; a bug here must not strand the caller
                log.exception("dispatch raised; request_id=%s", request.request_id)
                response = internal_error(request.request_id)
            hand_over(loop, [(deliver, response)])
