"""Where an origin request runs: one decision and one scheduler for every HTTP request the
transport (`origin.transport`) reads.

`lane(method, route, whole, store)` is the decision: a pure function of the method and the
route's properties, whether the body is whole, and what the store can do. It names one of
three lanes:

- `LOOP`: on the event loop, for what costs less than a thread hop: a read (GET, HEAD) of a
  local store (SQLite, the in-memory store), answered at the end of the loop turn that read it
  when its whole body came with its head (HTTP-11).
- `POOL`: in the dispatch pool (`threads` threads), for what may wait on something the loop
  must not wait for: a body still arriving, a write's fsync outside a batch, object storage,
  the admin routes, and every request of a network store that is not the store lane's. A
  costly read (`Route.costly`: a search, SRCH-7) queues on the pool's one search thread
  rather than taking turns with the loop and the other threads for the interpreter.
- `STORE`: the store lane, for a request whose only I/O is the store's, on a store that has
  such a lane: its commands (`Route.batch`) on a store that runs write batches (the committer,
  `origin.committer`, HTTP-10), its commands and member reads (`Route.store_read`) on a store
  whose connection pool bounds its transactions (the store pool: as many threads as the store
  has connections, so none waits for one, HTTP-12).

`Scheduler` resolves the route once (`Request.match`, which the pipeline then uses), takes the
decision, and runs the request there; every lane answers through the same `dispatch` (the
committer through `run_admitted`), a dispatch that raises is the retryable 503, and a thread's
answer is handed to the request's loop (`hand_over`).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from enum import StrEnum
from queue import SimpleQueue
from typing import Protocol

from aidememo.http.routes import Route, resolve
from aidememo.http.types import Request, Response
from origin.asgi_common import internal_error
from origin.committer import Committer, Deliver, hand_over

SEARCH_THREADS = 1
"""Threads costly reads run on in the pool lane: searches queue there rather than many of them
taking turns with the event loop for the interpreter (docs/bench-notes.md, SRCH-7)."""

DISPATCH_THREADS = 64
"""Threads of the dispatch pool: enough for many requests waiting on a client, on object
storage or in the store's group commit at once (`MAX_BATCH` writers share one fsync)."""

_READS = frozenset({"GET", "HEAD"})

errors = logging.getLogger("aidememo.error")


class Lane(StrEnum):
    """Where a request runs (see the module doc)."""

    LOOP = "loop"
    POOL = "pool"
    STORE = "store"


@dataclass(frozen=True, slots=True)
class StoreTraits:
    """What the store behind the app can do, as far as the lanes care."""

    batches: bool = False
    """It runs write batches (`CAP_WRITE_BATCH`): commands go to the committer."""
    connections: int | None = None
    """A connection pool of this size bounds its transactions (a network store): its
    commands and member reads go to the store pool, and nothing that reads it runs on the
    loop."""


def lane(method: str, route: Route | None, whole: bool, store: StoreTraits) -> Lane:
    """The lane of a `method` request to `route` (None: no route takes it) whose body is
    `whole` (or still arriving), on a store with `store`'s traits. In the store lane a command
    goes to the committer when the store runs write batches, anything else to the store pool."""
    if not whole:
        return Lane.POOL  # its body is read from a thread while the loop receives it
    if route is not None:
        if route.batch and (store.batches or store.connections is not None):
            return Lane.STORE
        if route.store_read and store.connections is not None:
            return Lane.STORE
    if method in _READS and store.connections is None and not (route and route.costly):
        return Lane.LOOP
    return Lane.POOL


class Dispatcher(Protocol):
    """What the scheduler needs from the core: `aidememo.http.app.HttpApp` fits (and so does
    `origin.metrics.MeteredApp`); `admitted`, `run_admitted`, `batches` and `connections`
    are optional."""

    def dispatch(self, request: Request) -> Response:
        """Answer one request; never raises."""
        ...


def traits_of(app: Dispatcher) -> StoreTraits:
    """The store traits `app` declares (none, for a dispatcher without a store)."""
    connections = getattr(app, "connections", None)
    return StoreTraits(
        batches=getattr(app, "batches", False) is True and hasattr(app, "run_admitted"),
        connections=connections if isinstance(connections, int) else None,
    )


class StorePool:
    """The store pool (HTTP-12): `threads` threads, one per connection of the store, taking
    queued calls in the order they came; started with the first call, `shutdown` runs what
    is queued, then ends them. Its own threads on one queue, not an executor: a request pays
    no future or executor bookkeeping (docs/bench-notes.md)."""

    def __init__(self, threads: int, name: str) -> None:
        self._queue: SimpleQueue[Callable[[], None] | None] = SimpleQueue()
        self._threads = [
            threading.Thread(target=self._run, name=f"{name}-{n}", daemon=True)
            for n in range(threads)
        ]
        self._started = self._stopped = False

    def submit(self, call: Callable[[], None]) -> None:
        """Queue `call`; RuntimeError once shut down."""
        if self._stopped:
            raise RuntimeError("stopped")
        if not self._started:
            self._started = True
            for thread in self._threads:
                thread.start()
        self._queue.put(call)

    def shutdown(self) -> None:
        """Run what is queued, then end the threads."""
        self._stopped = True
        if self._started:
            for _ in self._threads:
                self._queue.put(None)
            for thread in self._threads:
                thread.join()

    def _run(self) -> None:
        while (call := self._queue.get()) is not None:
            call()


class Scheduler:
    """Runs each request of one app in its lane; `stop` ends the lanes' threads once they
    answered what they hold."""

    __slots__ = ("_dispatch", "_pools", "_stopped", "_store", "_threads", "committer", "traits")

    def __init__(self, app: Dispatcher, threads: int = DISPATCH_THREADS) -> None:
        if threads < 1:
            raise ValueError("threads must be at least 1")
        self._dispatch = app.dispatch
        self._threads = threads
        self._pools: dict[str, ThreadPoolExecutor] = {}
        self._stopped = False
        self.traits = traits_of(app)
        connections = self.traits.connections
        if connections is not None and connections < 1:
            raise ValueError("a store pool needs at least one connection")
        # its threads start with its first call
        self._store = StorePool(connections, "aidememo-store") if connections else None
        self.committer: Committer | None = None
        if self.traits.batches:
            self.committer = Committer(app.admitted, app.run_admitted)  # type: ignore[attr-defined]

    def place(self, request: Request, whole: bool) -> Lane:
        """Resolve `request`'s route (kept on it for the pipeline) and name its lane."""
        match = resolve(request.method, request.path)
        request.match = match
        return lane(request.method, match.route, whole, self.traits)

    def call(self, request: Request) -> Response:
        """`dispatch` on this thread; a dispatch bug is the retryable 503."""
        try:
            return self._dispatch(request)
        except Exception:
            errors.exception("dispatch raised; request_id=%s", request.request_id)
            return internal_error(request.request_id)

    def run(
        self, loop: asyncio.AbstractEventLoop, request: Request, where: Lane, deliver: Deliver
    ) -> None:
        """Answer `request` in lane `where` (the pool lane or the store lane; a loop-lane
        request is answered by `call` on the loop); `deliver(response)` is called on `loop`
        once its thread answered it (the retryable 503 after `stop`)."""
        route = request.match.route if request.match is not None else None
        if where is Lane.STORE and self.committer is not None and route and route.batch:
            self.committer.take(loop, request, deliver)
            return
        try:
            pool: StorePool | ThreadPoolExecutor
            if where is Lane.STORE and self._store is not None:
                pool = self._store
            elif route and route.costly:
                pool = self._pool("search", SEARCH_THREADS)
            else:
                pool = self.pool()
            pool.submit(lambda: hand_over(loop, [(deliver, self.call(request))]))
        except RuntimeError:  # stopped
            loop.call_soon(deliver, internal_error(request.request_id))

    def pool(self) -> ThreadPoolExecutor:
        """The dispatch pool; streamed answers read their chunks here too."""
        return self._pool("dispatch", self._threads)

    def _pool(self, name: str, threads: int) -> ThreadPoolExecutor:
        pool = self._pools.get(name)
        if pool is None:
            if self._stopped:
                raise RuntimeError("the scheduler is stopped")
            pool = self._pools[name] = ThreadPoolExecutor(threads, f"aidememo-{name}")
        return pool

    def stop(self) -> None:
        """Answer what the lanes hold, then end their threads; later requests get the 503."""
        self._stopped = True
        if self.committer is not None:
            self.committer.stop()
        if self._store is not None:
            self._store.shutdown()
        for pool in self._pools.values():
            pool.shutdown(wait=True)
