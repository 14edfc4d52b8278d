"""The store lane (`origin.lanes.Lane.STORE`): requests whose only I/O is the store's, queued by
the event loop and answered by threads of the lane's own.

`StoreLane` is `threads` threads taking the queued work, each up to `max_batch` items at a
time, and answering them with one call of `run_batch`. Its two settings, by what the store can
do (`origin.lanes.StoreTraits`):

- `Committer` (a store that runs write batches, `CAP_WRITE_BATCH`: the SQLite file store;
  SPEC.md HTTP-10): one thread, up to `MAX_BATCH` commands the loop admitted, answered by
  `HttpApp.run_admitted` with one `COMMIT`. What arrives while a batch runs waits for the
  next, so batches grow with the load by themselves.
- `StorePool` (a store whose connection pool bounds its transactions: PostgreSQL; HTTP-12):
  as many threads as the store has connections, one request at a time through `dispatch`,
  so no thread waits for a connection and none sleeps while requests are queued.

Either way the loop only appends to a queue (`submit`), a request is answered only once its
call (and so its commit) returned, the answers of one call are handed to their loop with one
`call_soon_threadsafe`, a bug is the adapter's retryable 503, and `stop` answers what is
queued before the threads end; a request submitted after `stop` is answered 503 (retry).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Sequence
from queue import Empty, SimpleQueue
from typing import Generic, TypeVar

from aidememo.http.pipeline import Admission
from aidememo.http.types import Request, Response
from origin.asgi_common import internal_error

MAX_BATCH = 64
"""Most requests one write batch carries (STORE-7's bound on a shared transaction)."""

Deliver = Callable[[Response], None]
"""Called on the request's loop with its answer."""

W = TypeVar("W")

Item = tuple[asyncio.AbstractEventLoop, W, str, Deliver]
"""Queued work: its loop, the work, its request id and where its answer goes."""

Admitted = tuple[Request, Admission]
"""A command the loop admitted: what the committer runs."""

log = logging.getLogger("aidememo.error")


class StoreLane(Generic[W]):
    """`threads` threads named `name`, each answering up to `max_batch` queued items at a
    time with `run_batch` (which never raises); started on the first item, ended by `stop`."""

    def __init__(
        self,
        run_batch: Callable[[Sequence[W]], list[Response]],
        threads: int,
        max_batch: int,
        name: str,
    ) -> None:
        if threads < 1 or max_batch < 1:
            raise ValueError("threads and max_batch must be at least 1")
        self.threads = threads
        self._run_batch = run_batch
        self._max_batch = max_batch
        self._name = name
        self._queue: SimpleQueue[Item[W] | None] = SimpleQueue()
        self._running: list[threading.Thread] = []
        self._start_lock = threading.Lock()
        self._stopped = False

    def submit(
        self, loop: asyncio.AbstractEventLoop, work: W, request_id: str, deliver: Deliver
    ) -> None:
        """Queue `work`; `deliver(response)` is called on `loop` once it was answered."""
        if not self._running and not self._start():
            loop.call_soon(deliver, internal_error(request_id))  # stopped: retry later
            return
        self._queue.put((loop, work, request_id, deliver))

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

    def _answer(self, batch: list[Item[W]]) -> None:
        try:
            responses = self._run_batch([work for _, work, _, _ in batch])
        except Exception:  # `run_batch` never raises; a bug here must not strand the callers
            log.exception("dispatch raised; request_id=%s", batch[0][2])
            responses = [internal_error(rid) for _, _, rid, _ in batch]
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[Deliver, Response]]] = {}
        for (loop, _, _, deliver), response in zip(batch, responses, strict=True):
            by_loop.setdefault(loop, []).append((deliver, response))
        for loop, answers in by_loop.items():
            hand_over(loop, answers)


class Committer(StoreLane[Admitted]):
    """The write committer of one origin process (HTTP-10): `take` admits a command on the
    loop (`admitted`: its admission, or the answer refusing it), and one thread answers the
    admitted ones in batches of at most `max_batch` through `run_admitted`."""

    def __init__(
        self,
        admitted: Callable[[Request], Admission | Response],
        run_admitted: Callable[[Sequence[Admitted]], list[Response]],
        *,
        max_batch: int = MAX_BATCH,
    ) -> None:
        super().__init__(run_admitted, 1, max_batch, "aidememo-committer")
        self._admitted = admitted

    def take(self, loop: asyncio.AbstractEventLoop, request: Request, deliver: Deliver) -> None:
        """Admit `request` now, then queue it unless it was refused."""
        admission = self._admitted(request)
        if isinstance(admission, Response):
            deliver(admission)
        else:
            self.submit(loop, (request, admission), request.request_id, deliver)


class StorePool(StoreLane[Request]):
    """`threads` threads (the store's connections) answering the queued requests one at a
    time through `dispatch`, in the order they came (HTTP-12)."""

    def __init__(self, dispatch: Callable[[Request], Response], threads: int) -> None:
        super().__init__(lambda requests: [dispatch(requests[0])], threads, 1, "aidememo-store")

    def take(self, loop: asyncio.AbstractEventLoop, request: Request, deliver: Deliver) -> None:
        """Queue `request`."""
        self.submit(loop, request, request.request_id, deliver)


def hand_over(loop: asyncio.AbstractEventLoop, answers: list[tuple[Deliver, Response]]) -> None:
    """From a thread: have `loop` deliver `answers` (nothing when it is closed: the server is
    gone, nobody to answer)."""
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
