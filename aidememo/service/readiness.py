"""The canonical store's state for `/ready` and `/health` (SPEC.md READY-1, READY-2).

The state is one of `ok`, `read_only`, `full` and `unavailable`. It comes from two sources:

- the outcome of the last request that used the store: a write that succeeded makes it `ok`;
  a storage error of any request sets what the error says (`AidememoError.store_state`:
  `full` for `storage_full`, `read_only` or `unavailable` for `storage_failure`). A read that
  succeeds changes nothing (a full disk does not stop reads);
- a probe, run by the state's reader at most every `PROBE_INTERVAL_S`: a read of the schema
  version (a failure is that error's state). When the state was not `ok`, the probe goes on:
  a `full` store whose file system is known (`free_bytes`) stays `full` while less than
  `STORAGE_FULL_FLOOR_BYTES` are free; otherwise a write transaction whose one statement
  changes no row decides (it needs a writable database, but no space). So a store that
  recovered (space freed, a database writable again, a server back) is `ok` again without a
  restart and without a client write, and a healthy store costs one read per probe.

The probe runs on the thread that asks (one at a time; others get the last state), so a
server without requests never probes. Nothing here needs more than the stdlib.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from aidememo.domain.errors import STORE_FULL, STORE_OK, STORE_UNAVAILABLE, AidememoError
from aidememo.domain.limits import STORAGE_FULL_FLOOR_BYTES
from aidememo.ports import Store, WriteTx

PROBE_INTERVAL_S = 5.0
"""The probe runs at most this often; between probes the state is the last outcome's."""


class Readiness:
    """The last known state of one store, refreshed by requests' outcomes and the probe."""

    def __init__(self, store: Store, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._store = store
        self._monotonic = monotonic
        self._state = STORE_OK
        self._probed_at: float | None = None
        self._probing = threading.Lock()
        self.schema_version: int | None = None  # as last read by the probe

    def observe(self, wrote: bool, error: AidememoError | None) -> None:
        """Record one request's outcome: `wrote` when it was a write that succeeded, `error`
        when it failed (only storage errors say anything about the store)."""
        if error is not None:
            state = error.store_state
            if state is not None:
                self._state = state
        elif wrote:
            self._state = STORE_OK

    def state(self) -> str:
        """The store's state, probing first when the last probe is `PROBE_INTERVAL_S` old."""
        now = self._monotonic()
        probed = self._probed_at
        if probed is not None and now - probed < PROBE_INTERVAL_S:
            return self._state
        if not self._probing.acquire(blocking=False):
            return self._state  # another thread is probing: its answer comes soon enough
        try:
            self._probed_at = now
            self._state = self._probe(self._state)
        finally:
            self._probing.release()
        return self._state

    def _probe(self, previous: str) -> str:
        store = self._store
        try:
            self.schema_version = store.schema_version()
            if previous == STORE_OK:
                return STORE_OK
            if previous == STORE_FULL:
                free_bytes: Callable[[], int | None] | None = getattr(store, "free_bytes", None)
                free = None if free_bytes is None else free_bytes()
                if free is not None and free < STORAGE_FULL_FLOOR_BYTES:
                    return STORE_FULL
            store.transaction(_write_nothing)
        except AidememoError as error:
            return error.store_state or STORE_UNAVAILABLE
        except Exception:  # a driver fault the store did not map: the store is not usable
            return STORE_UNAVAILABLE
        return STORE_OK


NO_TOKEN = bytes(32)
"""A token digest no token has (no SHA-256 is known to be all zeros): the probe's write."""


def _write_nothing(tx: WriteTx) -> None:
    """A write statement that changes no row: it needs a writable database (PostgreSQL
    refuses it in a read-only transaction, SQLite on a read-only file) but no space."""
    tx.set_token_active(NO_TOKEN, False)
