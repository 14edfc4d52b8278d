"""Every store the conformance suite runs against, each with the capabilities it declares.

Later issues add backends (PostgreSQL with psycopg and with pg8000) by adding an entry to
`BACKENDS`; tests that need a capability are skipped where it is absent, never by type.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from aidememo.ports import CAP_REOPEN, CAP_TWO_CONNECTIONS, Store
from aidememo.stores.in_memory import InMemoryStore
from aidememo.stores.postgres import PostgresStore
from aidememo.stores.sqlite import SqliteStore
from tests import pg
from tests.doubles.do_storage import DoStorage


@dataclass
class Backend:
    """Opens stores on one backend; `open()` called twice opens the same database."""

    name: str
    open: Callable[[], Store]
    capabilities: frozenset[str]
    path: Path | None = None
    db: pg.Database | None = None  # the PostgreSQL database of a postgres backend
    cleanups: list[Callable[[], None]] = field(default_factory=list)

    def require(self, capability: str) -> None:
        """Skip the calling test unless this backend has `capability`."""
        if capability not in self.capabilities:
            pytest.skip(f"{self.name} lacks capability {capability!r}")


def _memory(tmp_path: Path) -> Backend:
    return Backend("memory", InMemoryStore, InMemoryStore.capabilities)


def _sqlite_file(tmp_path: Path) -> Backend:
    path = tmp_path / "canonical.sqlite"
    probe = SqliteStore.open_file(path)
    caps = probe.capabilities
    probe.close()
    return Backend("sqlite_file", lambda: SqliteStore.open_file(path), caps, path)


def _sqlite_memory(tmp_path: Path) -> Backend:
    return Backend("sqlite_memory", SqliteStore.open_memory, frozenset())


def _do_sql(tmp_path: Path) -> Backend:
    # A file under the double stands for the object's durable SQLite, so it survives a
    # restart of the object like the real one does.
    path = tmp_path / "do.sqlite"
    opened: list[DoStorage] = []

    def open_object() -> Store:
        # The runtime owns the object's database; the double's connection is closed at teardown.
        storage = DoStorage(str(path))
        opened.append(storage)
        return SqliteStore.on_durable_object(storage, frozenset({CAP_REOPEN}))

    backend = Backend("do_sql", open_object, frozenset({CAP_REOPEN}), path)
    backend.cleanups.append(lambda: [storage.close() for storage in opened])
    return backend


def _project_object(tmp_path: Path) -> Backend:
    # The store as a ProjectCoordinator holds it, in the edge's CPython runtime double: every
    # open() drops the live object and wakes a new one on the same storage, so the schema
    # check and migration inside blockConcurrencyWhile run each time.
    from aidememo.domain.clock import FixedClock
    from tests.edge.runtime import Runtime

    runtime = Runtime(tmp_path / "edge", FixedClock(1_000))
    projects = runtime.namespaces["PROJECTS"]
    name = "tenant/project"

    def open_object() -> Store:
        projects.evict(name)
        live = projects.instance(name)
        while live.ctx.gate:
            runtime.run(live.ctx.gate.pop(0))
        store: Store = live.obj._writable()
        return store

    backend = Backend("project_object", open_object, frozenset({CAP_REOPEN}))
    backend.cleanups.append(runtime.close)
    return backend


def _project_object_postgres(tmp_path: Path) -> Backend:
    # The store a ProjectCoordinator holds with STORAGE_MODE=postgres: pg8000 through the
    # Hyperdrive binding, here PgBouncer in transaction pool mode in front of a fresh migrated
    # schema. Every open() drops the live object (closing its connection) and wakes a new one.
    from aidememo.domain.clock import FixedClock
    from tests.edge.backend import postgres_runtime

    db = pg.create_database(pooled=True)
    runtime = postgres_runtime(tmp_path / "edge", FixedClock(1_000), db)
    projects = runtime.namespaces["PROJECTS"]
    name = "tenant/project"

    def open_object() -> Store:
        projects.evict(name)
        live = projects.instance(name)
        while live.ctx.gate:
            runtime.run(live.ctx.gate.pop(0))
        store: Store = live.obj._writable()
        return store

    # One connection per object, and one call at a time: no two-connection races here.
    caps = frozenset({CAP_REOPEN} | (PostgresStore.capabilities - {CAP_TWO_CONNECTIONS}))
    backend = Backend("project_object_postgres", open_object, caps)
    backend.db = db
    backend.cleanups.append(runtime.close)
    backend.cleanups.append(db.drop)
    return backend


def _postgres(driver: str, *, pooled: bool = False) -> Callable[[Path], Backend]:
    # A fresh database per test, cloned from a migrated template; every store opened on it is
    # closed before the database is dropped.
    def make(tmp_path: Path) -> Backend:
        db = pg.create_database(pooled=pooled)
        opened: list[PostgresStore] = []

        def open_store() -> Store:
            store = PostgresStore.open(db.connect(driver), migrate=True)
            opened.append(store)
            return store

        name = f"{'pgbouncer' if pooled else 'postgres'}_{driver}"
        backend = Backend(name, open_store, PostgresStore.capabilities)
        backend.db = db
        backend.cleanups.append(lambda: [store.close() for store in opened])
        backend.cleanups.append(db.drop)
        return backend

    return make


BACKENDS: dict[str, Callable[[Path], Backend]] = {
    "memory": _memory,
    "sqlite_file": _sqlite_file,
    "sqlite_memory": _sqlite_memory,
    "do_sql": _do_sql,
    "project_object": _project_object,
    "project_object_postgres": _project_object_postgres,
    "postgres_psycopg": _postgres("psycopg"),
    "postgres_pg8000": _postgres("pg8000"),
    # Once more through PgBouncer in transaction pool mode: every setting SET LOCAL, every
    # lock a transaction lock, nothing depending on session state (STORE-8).
    "pgbouncer_psycopg": _postgres("psycopg", pooled=True),
    "pgbouncer_pg8000": _postgres("pg8000", pooled=True),
}


@pytest.fixture(params=sorted(BACKENDS))
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """One backend per test run."""
    backend = BACKENDS[request.param](tmp_path)
    yield backend
    for cleanup in backend.cleanups:
        cleanup()
