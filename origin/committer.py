"""The write committer of one origin process (SPEC.md HTTP-10), the store lane on a store that
runs write batches (`CAP_WRITE_BATCH`: the SQLite file store).

The loop admits each command as it is queued (`take`: `HttpApp.admitted`, a refused one is
answered at once); one thread takes every admitted command queued, at most `max_batch`, and
answers them with one `run_admitted` call: their handlers in one write transaction, one
`COMMIT`. What arrives while a batch runs waits for the next, so batches grow with the load by
themselves. The answers of a batch are handed to their loops together, once it committed; a
bug is the retryable 503; `stop` answers what is queued before the thread ends, and a command
taken after `stop` is answered 503 (retry).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Sequence
from queue import Empty, SimpleQueue

from aidememo.http.pipeline import Admission
from aidememo.http.types import Request, Response
from origin.asgi_common import internal_error

MAX_BATCH = 64
"""Most commands one write batch carries (STORE-7's bound on a shared transaction)."""

Deliver = Callable[[Response], None]
"""Called on the request's loop with its answer."""

Admitted = tuple[Request, Admission]
"""A command the loop admitted: what the committer runs."""

_Item = tuple[asyncio.AbstractEventLoop, Admitted, Deliver]

log = logging.getLogger("aidememo.error")


class Committer:
    """One thread answering the admitted commands in batches of at most `max_batch`."""

    def __init__(
        self,
        admitted: Callable[[Request], Admission | Response],
        run_admitted: Callable[[Sequence[Admitted]], list[Response]],
        *,
        max_batch: int = MAX_BATCH,
    ) -> None:
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        self._admitted = admitted
        self._run_admitted = run_admitted
        self._max_batch = max_batch
        self._queue: SimpleQueue[_Item | None] = SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._stopped = False

    def take(self, loop: asyncio.AbstractEventLoop, request: Request, deliver: Deliver) -> None:
        """Admit `request` now, then queue it unless it was refused."""
        admission = self._admitted(request)
        if isinstance(admission, Response):
            deliver(admission)
        elif self._thread is None and not self._start():
            loop.call_soon(deliver, internal_error(request.request_id))  # stopped: retry
        else:
            self._queue.put((loop, (request, admission), deliver))

    def stop(self) -> None:
        """Answer everything queued, then end the thread (idempotent)."""
        with self._lock:
            self._stopped = True
            thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(None)
            thread.join()

    def _start(self) -> bool:
        with self._lock:
            if self._stopped:
                return False
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="aidememo-committer", daemon=True
                )
                self._thread.start()
            return True

    def _run(self) -> None:
        queue = self._queue
        while (item := queue.get()) is not None:
            batch = [item]
            while len(batch) < self._max_batch:
                try:
                    item = queue.get_nowait()
                except Empty:
                    break
                if item is None:
                    self._answer(batch)
                    return
                batch.append(item)
            self._answer(batch)

    def _answer(self, batch: list[_Item]) -> None:
        try:
            responses = self._run_admitted([work for _, work, _ in batch])
        except Exception:  # `run_admitted` never raises; a bug here must not strand callers
            log.exception("dispatch raised; request_id=%s", batch[0][1][0].request_id)
            responses = [internal_error(request.request_id) for _, (request, _), _ in batch]
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[Deliver, Response]]] = {}
        for (loop, _, deliver), response in zip(batch, responses, strict=True):
            by_loop.setdefault(loop, []).append((deliver, response))
        for loop, answers in by_loop.items():
            hand_over(loop, answers)


def hand_over(loop: asyncio.AbstractEventLoop, answers: list[tuple[Deliver, Response]]) -> None:
    """From a thread: have `loop` deliver `answers` (nothing when it is closed: the server is
    gone, nobody to answer)."""
    try:
        loop.call_soon_threadsafe(_deliver_all, answers)
    except RuntimeError:
        pass


def _deliver_all(answers: list[tuple[Deliver, Response]]) -> None:
    for deliver, response in answers:
        try:
            deliver(response)
        except Exception:
            log.exception("delivering an answer failed")
