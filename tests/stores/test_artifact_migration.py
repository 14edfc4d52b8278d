"""SQLite schema 6 and PostgreSQL schema 7 (ART-*): a database written by the previous version
keeps its rows and gains the artifact catalog, which then serves the whole lifecycle.

As in tests/stores/test_reads_migration.py, "the previous version" is this code's migration
list cut before the new step (`old_code`), with the rows written by the real pipeline.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from aidememo.bodies.memory import MemoryBodies
from aidememo.domain.clock import FixedClock
from aidememo.http.app import HttpApp
from aidememo.stores.postgres import PostgresStore
from aidememo.stores.postgres import schema as pg_schema
from aidememo.stores.sqlite import schema as sqlite_schema
from aidememo.stores.sqlite.store import SqliteStore
from tests import pg
from tests.contract.support import READER, START_MS, WRITER, Api, InProcessClient, P
from tests.doubles.do_storage import DoStorage
from tests.stores.test_reads_migration import old_code, write_old_history

ARTIFACT_TABLES = ("artifact_reservations", "artifact_gc_intents", "artifact_catalog")


def check_artifacts(store: Any, tokens: dict[str, str]) -> None:
    """The old rows are still there and the catalog serves a publication."""
    clock = FixedClock(START_MS)
    app = HttpApp(store, clock=clock, bodies=MemoryBodies())
    api = Api("migration", InProcessClient(app), app.services.identity, clock)
    api.tokens.update(tokens)
    assert len(api.get(f"{P}/snapshot", READER).expect(200)["resources"]) == 12
    payload = {"path": "sessions/s1/canvas.md", "size_bytes": 3}
    r = api.post(f"{P}/artifact-reservations", {"command_id": "m1", "payload": payload})
    rid = r.expect(200)["reservation_id"]
    api.call(
        "PUT", f"{P}/artifact-reservations/{rid}/body", as_=WRITER, body=b"abc",
        headers={"content-type": "application/octet-stream"},
    ).expect(200)  # fmt: skip
    ref = api.post(f"{P}/artifact-reservations/{rid}/publish", {"command_id": "m1.p"})
    assert ref.expect(200)["revision"] == 1


def _sqlite_back_to_5(store: SqliteStore) -> None:
    x = store.executor

    def run() -> None:
        for table in ARTIFACT_TABLES:
            x.execute(f"DROP TABLE {table}")
        x.execute(sqlite_schema.UPSERT_VERSION, (sqlite_schema.COMPONENT, 5))

    x.transaction(run)


def test_art1_store6_sqlite_schema_5_migrates_to_6_keeping_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    with old_code(sqlite_schema, 5):
        old = SqliteStore.open_file(path)
        assert old.schema_version() == 5
        tokens = write_old_history(old)
        old.close()
    store = SqliteStore.open_file(path)
    assert store.schema_version() == sqlite_schema.SCHEMA_VERSION == 8
    check_artifacts(store, tokens)
    store.close()
    again = SqliteStore.open_file(path)  # reopening migrates nothing
    assert again.schema_version() == 8
    again.close()


def test_art1_store6_durable_object_schema_5_migrates_to_6() -> None:
    storage = DoStorage()
    old = SqliteStore.on_durable_object(storage)
    tokens = write_old_history(old)
    _sqlite_back_to_5(old)
    assert old.schema_version() == 5
    store = SqliteStore.on_durable_object(storage)
    assert store.schema_version() == 8
    check_artifacts(store, tokens)
    storage.close()


@pytest.mark.postgres
@pytest.mark.parametrize("driver", pg.DRIVERS)
def test_art1_store6_postgres_schema_6_migrates_to_7_keeping_its_rows(driver: str) -> None:
    with pg.fresh_database(migrated=False) as db:
        connect: Callable[[], Any] = db.connect(driver)
        with old_code(pg_schema, 6):
            old = PostgresStore.open(connect, migrate=True)
            assert old.schema_version() == 6
            tokens = write_old_history(old)
            old.close()
        with pytest.raises(Exception, match="aidememo admin migrate"):
            PostgresStore.open(connect)
        store = PostgresStore.open(connect, migrate=True)
        assert store.schema_version() == pg_schema.SCHEMA_VERSION == 15
        check_artifacts(store, tokens)
        assert store.migrate() == 15  # idempotent
        store.close()
