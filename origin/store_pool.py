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
The interface is the write committer's (`origin.committer.WriteQueue`), so the adapter hands
requests to either alike.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from queue import SimpleQueue

from aidememo.http.types import Request, Response
from origin.asgi_common import internal_error
from origin.committer import Deliver, deliver_answers

log = logging.getLogger("aidememo.error")

_Item = tuple[asyncio.AbstractEventLoop, Request, Deliver] | None


class StorePool:
    """`threads` threads answering the requests `accepts(method, path)` admits, in the order
    `submit` queued them; started on the first request, ended by `stop`."""

    def __init__(
        self,
        dispatch: Callable[[Request], Response],
        accepts: Callable[[str, str], bool],
        threads: int,
    ) -> None:
        if threads < 1:
            raise ValueError("threads must be at least 1")
        self.accepts = accepts
        """`accepts(method, path)`: True for a request the pool may take."""
        self.threads = threads
        self._dispatch = dispatch
        self._queue: SimpleQueue[_Item] = SimpleQueue()
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
                    thread = threading.Thread(
                        target=self._run, name=f"aidememo-store-{n}", daemon=True
                    )
                    thread.start()
                    self._running.append(thread)
            return True

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
            try:
                loop.call_soon_threadsafe(deliver_answers, [(deliver, response)])
            except RuntimeError:  # the loop is closed: the server is gone, nobody to answer
                pass
