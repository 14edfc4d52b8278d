"""What the three Durable Object classes share: one `SqliteStore` on the object's own SQLite.

Every object keeps its rows in the shared SQLite schema through `DoSqlExecutor`
(`ctx.storage.sql.exec` + `transactionSync`), so the project, the tenant registry and the
token directory all run the core's services unchanged.

Schema migrations run when the object wakes, inside `ctx.blockConcurrencyWhile`, so no RPC
call is delivered before they finish (Cloudflare: "blockConcurrencyWhile ... no other events
will be delivered until the callback completes"). They are idempotent: an up-to-date object
is only read. An object that was never provisioned has no schema and gets none until its
first write, so stray names (a mistyped project, a token shard nobody uses) cost no storage.

With `STORAGE_MODE=postgres` (`durable_objects.pg_connection`) the store is instead the shared
`PostgresStore` over pg8000 through the Hyperdrive binding, opened on the first call (not at
wake: a database that is unreachable or not migrated then answers that call with a clear
`storage_failure`, and the next call tries again), never migrated, and kept for the object's
lifetime. Every call that touches it holds `_serial`: a socket wait suspends the call and lets
the runtime deliver the next one (Hyperdrive's Python Workers notes), so without the lock two
calls of one object would interleave on its one connection. Each project's writes therefore
still reach PostgreSQL one at a time.

Time and ids are class attributes so a test harness can run the objects on a fixed clock by
subclassing; production uses the system clock and random ids.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aidememo.domain.clock import RandomIds, SystemClock
from aidememo.domain.errors import ErrorCode, fail
from aidememo.ports import Clock, Ids, WriteTx
from aidememo.service.artifact_gc import tenant_intents
from aidememo.stores.postgres import PostgresStore
from aidememo.stores.sqlite.do_executor import DoSqlExecutor
from aidememo.stores.sqlite.schema import read_version
from aidememo.stores.sqlite.store import SqliteStore
from durable_objects import pg_connection

Store = SqliteStore | PostgresStore


class StoredObject:
    """Mixin for a `DurableObject` subclass: call `_init_store()` from `__init__`."""

    clock: Clock = SystemClock()
    ids: Ids = RandomIds()

    ctx: Any
    env: Any
    _store: Store | None
    _postgres: bool
    _serial: asyncio.Lock

    def _init_store(self) -> None:
        self._store = None
        self._postgres = pg_connection.postgres_mode(self.env)
        self._serial = asyncio.Lock()
        # Not awaited: the constructor cannot await; the runtime holds incoming calls until
        # the returned promise settles.
        self.ctx.blockConcurrencyWhile(self._wake)

    async def _wake(self) -> None:
        if not self._postgres:
            self._open(create=False)

    def _open(self, *, create: bool) -> Store | None:
        """The object's store; `create=False` leaves an empty object without a schema (in
        PostgreSQL mode the shared database always has one, so the store always opens)."""
        if self._store is None and self._postgres:
            self._store = pg_connection.open_store(self.env)
        elif self._store is None:
            executor = DoSqlExecutor(self.ctx.storage)
            if create or executor.read(lambda: read_version(executor)) > 0:
                self._store = SqliteStore(executor, mode="edge")  # migrates, idempotently
        return self._store

    def _import_identity(self, spec: Any, *, epochs: bool) -> dict[str, Any]:
        """Write an import's identity records (`{tenant_id, records[, epochs]}`) into this
        object's store, without history; `answer`'s `{"ok"}` or `{"error"}`."""
        from aidememo.service.archive import Archive, Plan
        from durable_objects.rpc import answer, plain

        s = plain(spec)

        def run() -> None:
            plan = Plan.build(s["tenant_id"], list(s["records"]), history=False)
            given = dict(s["epochs"]) if epochs else {}
            Archive(self._writable(), self.clock, self.ids).import_plan(plan, given, history=False)

        return answer(run)

    def _check_in_store(self, spec: Any, check: Any) -> dict[str, Any]:
        """`check(spec, tx)` in one read of this object's store (nothing to check in an object
        that was never provisioned); `answer`'s `{"ok"}` or `{"error"}`."""
        from durable_objects.rpc import answer, plain

        s = plain(spec)

        def run() -> None:
            store = self._open(create=False)
            if store is not None:
                store.read(lambda tx: check(s, tx))

        return answer(run)

    def _writable(self) -> Store:
        store = self._open(create=True)
        assert store is not None  # create=True always opens
        return store


def delete_rows(
    store: Any, tenant_id: str, now_ms: int | None = None, grant_window_ms: int = 0
) -> dict[str, dict[str, int]]:
    """Delete the tenant's rows from one object's store and count what is left (ARC-4).

    An object that never held the tenant removes nothing; if any row survived, the deletion is
    rolled back and reported as `storage_failure`.
    """
    if store is None:
        return {"removed": {}, "left": {}}

    def run(tx: WriteTx) -> dict[str, dict[str, int]]:
        before = {k: v for k, v in tx.count_tenant_rows(tenant_id).items() if v}
        if before:
            when = SystemClock().now_ms() if now_ms is None else now_ms
            tenant_intents(tx, tenant_id, when, grant_window_ms)  # its bodies: GC intents (ART-7)
            tx.delete_tenant(tenant_id)
        left = {k: v for k, v in tx.count_tenant_rows(tenant_id).items() if v}
        if left:  # roll back: a deletion is whole or not at all
            raise fail(ErrorCode.STORAGE_FAILURE, f"tenant rows survived deletion: {left}")
        return {"removed": before, "left": left}

    result: dict[str, dict[str, int]] = store.transaction(run)
    return result
