"""What `ProjectCoordinator` does for semantic search (SPEC.md SEM-10, SEM-11), as a mixin.

With the `AI` and `VECTORIZE` bindings the object keeps its project's vectors in Vectorize:
- every commit names the project (`_learn`, remembered in the ledger for an alarm after an
  eviction) and asks for an index step now (`_index_due`), which the object's one alarm runs
  (`_run_index`): up to `STEPS` steps of `EdgeIndexer`; while Vectorize has not yet shown a
  batch, or after a failure, the next try comes after a backoff of 250 ms doubling up to
  30 s;
- a search with `at_least_seq` beyond the index (`_await_index`, before the request takes
  the object's lock) runs index steps itself until the index reaches it or `index_wait_s`
  (SEM-5's 2 s) passed; the core then answers or falls back as at the origin, with no wait
  of its own;
- tenant deletion clears the project's vectors from Vectorize at once (`_clear_index`), and
  an import's project is indexed anew (its index state is absent: the indexer resets).
Without the bindings none of this runs and `semantic`/`hybrid` answer 422
`semantic_unavailable`, as an origin without a provider does.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs

from aidememo.domain.errors import AidememoError
from aidememo.domain.model import Scope
from aidememo.domain.semantic import MODE_LEXICAL
from aidememo.domain.semantic_index import index_wait_over
from durable_objects.edge_indexer import IDLE, PROGRESS, WAITING, EdgeIndexer
from durable_objects.edge_search import EdgeVectors
from durable_objects.vectors import FINGERPRINT, Ledger, bindings

log = logging.getLogger("aidememo.edge")

STEPS = 8  # index steps per alarm
BACKOFF_MS = 250
BACKOFF_MAX_MS = 30_000
POLL_S = 0.05


class ProjectIndex:
    """Mixin for `ProjectCoordinator`: call `_init_index()` from `__init__`."""

    index_wait_s: float = 2.0  # SEM-5's bounded wait for `at_least_seq`

    ctx: Any
    env: Any
    clock: Any
    _serial: asyncio.Lock
    _open: Callable[..., Any]

    def _init_index(self) -> None:
        found = bindings(self.env)
        self._ledger = Ledger(self.ctx.storage)
        self._vectors = None if found is None else EdgeVectors(self._ledger, *found)
        self._indexer = None if found is None else EdgeIndexer(self._ledger, *found)
        self._scope: Scope | None = None
        self._index_due: int | None = None
        self._index_tries = 0
        self._index_lock = asyncio.Lock()  # one step at a time (alarm, or a waiting search)

    def _learn(self, scope: Scope) -> None:
        """A commit of `scope`: index it soon."""
        if self._indexer is None:
            return
        self._know(scope)
        self._index_due = self.clock.now_ms()

    def _know(self, scope: Scope) -> None:
        """Remember the project this object indexes (in the ledger too: a batch is recorded
        on its row)."""
        if self._scope is None:
            self._ledger.learn(scope)
            self._scope = scope

    async def _store_run(self, fn: Callable[[Any], Any]) -> Any:
        async with self._serial:
            store = self._open(create=False)
            return None if store is None else fn(store)

    async def _index_step(self) -> str:
        """One indexer step; a failure is logged and counts as waiting (backoff)."""
        if self._indexer is None:
            return IDLE
        if self._scope is None:
            self._scope = self._ledger.scope()
            if self._scope is None:
                return IDLE
        try:
            async with self._index_lock:
                return await self._indexer.step(self._scope, self._store_run)
        except AidememoError as error:
            log.warning("semantic index step failed: %s", error.message)
            return WAITING

    async def _run_index(self) -> None:
        """The alarm's index work: steps until idle, waiting or `STEPS`; sets `_index_due`."""
        if self._indexer is None:
            self._index_due = None
            return
        outcome = IDLE
        for _ in range(STEPS):
            outcome = await self._index_step()
            if outcome != PROGRESS:
                break
        now = self.clock.now_ms()
        if outcome == IDLE:
            self._index_due, self._index_tries = None, 0
        elif outcome == PROGRESS:
            self._index_due, self._index_tries = now, 0
        else:
            delay = min(BACKOFF_MS << min(self._index_tries, 10), BACKOFF_MAX_MS)
            self._index_due, self._index_tries = now + delay, self._index_tries + 1

    async def _await_index(self, request: Any, scope: Scope) -> None:
        """SEM-5 at the edge: with `at_least_seq` beyond the index, index until it is reached
        or `index_wait_s` passed. Anything unparsable is left to the core to refuse."""
        if self._indexer is None:
            return
        query = parse_qs(str(request.get("query") or ""))
        if query.get("mode", [""])[0] == MODE_LEXICAL or "at_least_seq" not in query:
            return
        try:
            wanted = int(query["at_least_seq"][0])
        except ValueError:
            return
        deadline = time.monotonic() + self.index_wait_s
        fingerprint = FINGERPRINT.text()
        while True:
            found = await self._store_run(
                lambda store: store.read(lambda tx: tx.semantic_head(scope))
            )
            if index_wait_over(found, wanted, fingerprint) or time.monotonic() >= deadline:
                return
            self._know(scope)
            if await self._index_step() != PROGRESS:
                await asyncio.sleep(POLL_S)

    async def _clear_index(self) -> None:
        """Tenant deletion: the project's vectors leave Vectorize now."""
        if self._indexer is None:
            return
        try:
            await self._indexer.clear()
        except AidememoError as error:  # the indexer clears them at its next reset
            log.warning("clearing the semantic index failed: %s", error.message)
