"""SQLite schema 4 and PostgreSQL schema 5 (READS-4, SNAP-3, SNAP-4): a database written by
the previous version keeps its rows, gains the session facts index and the change log's
index by resource, built from those rows in the migration's transaction, and the page token
key; the new reads then serve the old rows.

"The previous version" is the code's own migration list cut before the new step, so the old
rows are written by the real pipeline against the real old schema.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from aidememo.domain.clock import FixedClock
from aidememo.domain.model import Role
from aidememo.http.app import HttpApp
from aidememo.stores.postgres import PostgresStore
from aidememo.stores.postgres import schema as pg_schema
from aidememo.stores.postgres import sql as pg_sql
from aidememo.stores.sqlite import schema as sqlite_schema
from aidememo.stores.sqlite import search_schema as sqlite_search_schema
from aidememo.stores.sqlite.store import SqliteStore
from tests import pg
from tests.contract.support import READER, START_MS, WRITER, Api, InProcessClient, P
from tests.doubles.do_storage import DoStorage

NEW_OBJECTS = ("changes_fact_session_idx", "changes_resource_idx", "aidememo_store_keys")


@contextmanager
def old_code(module: Any, version: int) -> Iterator[None]:
    """The schema module as the previous version shipped it: migrations up to `version`.

    The old history is written by this code, whose commits on PostgreSQL read the listener
    registry of version 10 (LIVE-9) and write raw commands through version 15's function
    (STORE-9) and, on SQLite, write the FTS5 index of version 7: an older schema gets those
    with its last step (the real migration rebuilds the SQLite index again), as the old code,
    which never used them, did not need."""
    saved = module.MIGRATIONS, module.SCHEMA_VERSION
    module.MIGRATIONS = [step for step in saved[0] if step[0] <= version]
    if module is pg_schema and version < 15:
        last, steps = module.MIGRATIONS[-1]
        later = (*(pg_schema.V10 if version < 10 else ()), *pg_schema.V15)
        module.MIGRATIONS[-1] = (last, (*steps, *later))
    if module is sqlite_schema and version < 7:
        last, steps = module.MIGRATIONS[-1]
        module.MIGRATIONS[-1] = (last, (*steps, *sqlite_search_schema.V7))
    module.SCHEMA_VERSION = version
    try:
        yield
    finally:
        module.MIGRATIONS, module.SCHEMA_VERSION = saved


def _api(store: Any, tokens: dict[str, str] | None = None) -> Api:
    clock = FixedClock(START_MS)
    app = HttpApp(store, clock=clock)
    api = Api("migration", InProcessClient(app), app.services.identity, clock)
    if tokens is None:
        api.provision(WRITER, Role.WRITER)
        api.provision(READER, Role.READER)
    else:
        api.tokens.update(tokens)
    return api


def write_old_history(store: Any) -> dict[str, str]:
    """Sessions, facts and notes written by the old version; its tokens."""
    api = _api(store)
    api.session("s1")
    api.session("s2")
    for i in range(5):
        api.fact(f"f{9 - i}", "s1" if i % 2 == 0 else "s2", f"old fact {i}")
        api.put_note(f"n{i}", {"v": i}).expect(200)
    return api.tokens


def check_new_reads(store: Any, tokens: dict[str, str]) -> None:
    """The session facts and the paged snapshot over the migrated rows."""
    api = _api(store, tokens)
    facts = api.get(f"{P}/sessions/s1/facts", READER).expect(200)
    assert [f["record"]["fact_id"] for f in facts["facts"]] == ["f9", "f7", "f5"]
    assert facts["next_after_seq"] is None
    whole = api.get(f"{P}/snapshot", READER).expect(200)["resources"]
    first = api.get(f"{P}/snapshot", READER, query={"limit": 4}).expect(200)
    api.put_note("n_after", {"v": "after"}).expect(200)  # the next pages are reconstructed
    pages, token = list(first["resources"]), first["next_page_token"]
    while token is not None:
        page = api.get(f"{P}/snapshot", READER, query={"limit": 4, "page_token": token})
        body = page.expect(200)
        pages += body["resources"]
        token = body["next_page_token"]
    assert pages == whole and len(whole) == 12


def back_to_sqlite_3(store: SqliteStore) -> None:
    """Take version 4's objects out of a database written by this code and record version 3:
    the rows the previous version wrote, as version 4's migration finds them (the code that
    writes them has moved on, so the history is written by this one)."""
    x = store.executor

    def run() -> None:
        for statement in (
            "DROP INDEX changes_fact_session_idx",
            "DROP INDEX changes_resource_idx",
            "DROP TABLE aidememo_store_keys",
        ):
            x.execute(statement)
        x.execute(sqlite_schema.UPSERT_VERSION, (sqlite_schema.COMPONENT, 3))

    x.transaction(run)


def test_store6_reads4_snap3_sqlite_schema_3_migrates_to_4_keeping_its_rows(
    tmp_path: Path,
) -> None:
    path = tmp_path / "db.sqlite"
    old = SqliteStore.open_file(path)
    tokens = write_old_history(old)
    back_to_sqlite_3(old)
    assert old.schema_version() == 3
    old.close()
    with old_code(sqlite_schema, 4):
        store = SqliteStore.open_file(path)
        assert store.schema_version() == sqlite_schema.SCHEMA_VERSION == 4
        key = store.read(lambda tx: tx.page_token_key())
        check_new_reads(store, tokens)
        store.close()
        again = SqliteStore.open_file(path)  # reopening migrates nothing and keeps the key
    assert again.read(lambda tx: tx.page_token_key()) == key and len(key) == 32
    names = again.executor.read(
        lambda: again.executor.execute("SELECT name FROM sqlite_schema WHERE name LIKE '%_idx'")
    )
    assert {name for (name,) in names} >= set(NEW_OBJECTS[:2])
    again.close()


def test_store6_reads4_snap3_durable_object_schema_3_migrates_to_4() -> None:
    storage = DoStorage()
    old = SqliteStore.on_durable_object(storage)
    tokens = write_old_history(old)
    back_to_sqlite_3(old)
    with old_code(sqlite_schema, 4):
        store = SqliteStore.on_durable_object(storage)
        assert store.schema_version() == 4
        check_new_reads(store, tokens)
    storage.close()


def test_reads4_snap4_the_new_reads_use_their_indexes_on_sqlite() -> None:
    from aidememo.stores.sqlite import sql as q

    store = SqliteStore.open_memory()
    x = store.executor

    def plans() -> list[str]:
        statements: list[tuple[str, tuple[Any, ...]]] = [
            (q.SESSION_FACTS, ("t", "p", "s", 0, 10)),
            (q.RESOURCES_AT_AFTER, (5, "t", "p", "k", "i", 10)),
        ]
        return [
            " | ".join(str(row[-1]) for row in x.execute("EXPLAIN QUERY PLAN " + sql, params))
            for sql, params in statements
        ]

    facts, at = x.read(plans)
    assert "USING INDEX changes_fact_session_idx" in facts
    assert "changes_resource_idx" in at and "SCAN" not in at
    store.close()


@pytest.mark.postgres
@pytest.mark.parametrize("driver", pg.DRIVERS)
def test_store6_reads4_snap3_postgres_schema_4_migrates_to_5_keeping_its_rows(
    driver: str,
) -> None:
    with pg.fresh_database(migrated=False) as db:
        connect: Callable[[], Any] = db.connect(driver)
        old = PostgresStore.open(connect, migrate=True)
        tokens = write_old_history(old)

        def back_to_4(tx: Any) -> None:
            # Version 5's objects out, version 4 recorded: the rows as its migration finds
            # them (the code that wrote them has moved on, so this code writes the history).
            for statement in (
                "DROP INDEX changes_fact_session_idx",
                "DROP INDEX changes_resource_idx",
                "DROP TABLE aidememo_store_keys",
                "DROP FUNCTION aidememo_fact_session(BYTEA)",
            ):
                tx._x.execute(statement)
            tx._x.execute(pg_schema.UPSERT_VERSION, (pg_schema.COMPONENT, 4))

        old.transaction(back_to_4)
        assert old.schema_version() == 4
        old.close()
        with old_code(pg_schema, 5):
            with pytest.raises(Exception, match="aidememo admin migrate"):
                PostgresStore.open(connect)
            store = PostgresStore.open(connect, migrate=True)
            assert store.schema_version() == pg_schema.SCHEMA_VERSION == 5
            key = store.read(lambda tx: tx.page_token_key())
            check_new_reads(store, tokens)
            assert store.migrate() == 5  # idempotent: the key stays
            assert store.read(lambda tx: tx.page_token_key()) == key and len(key) == 32

        def plan(tx: Any) -> str:
            tx._x.execute("SET LOCAL enable_seqscan = off")
            sql = "EXPLAIN " + pg_sql.SESSION_FACTS
            return " | ".join(row[0] for row in tx._x.execute(sql, ("t", "p", "s", 0, 10)))

        assert "changes_fact_session_idx" in store.read(plan)
        store.close()


@pytest.mark.postgres
@pytest.mark.parametrize("driver", pg.DRIVERS)
def test_id5_reads4_postgres_schema_10_migrates_to_a_fact_session_without_jsonb(
    driver: str,
) -> None:
    """Version 11: the session facts index no longer casts a body to jsonb, which cannot hold
    U+0000; the rows of version 10 are found as before and a fact holding U+0000 commits."""
    with pg.fresh_database(migrated=False) as db:
        connect: Callable[[], Any] = db.connect(driver)
        with old_code(pg_schema, 10):
            old = PostgresStore.open(connect, migrate=True)
            assert old.schema_version() == 10
            tokens = write_old_history(old)
            old.close()
        store = PostgresStore.open(connect, migrate=True)
        assert store.schema_version() == pg_schema.SCHEMA_VERSION == 15
        check_new_reads(store, tokens)
        api = _api(store, tokens)
        api.fact("f_nul", "s1", "before\x00after")
        facts = api.get(f"{P}/sessions/s1/facts", READER).expect(200)["facts"]
        assert facts[-1]["record"]["content"] == "before\x00after"

        def plan(tx: Any) -> str:
            tx._x.execute("SET LOCAL enable_seqscan = off")
            sql = "EXPLAIN " + pg_sql.SESSION_FACTS
            return " | ".join(row[0] for row in tx._x.execute(sql, ("t", "p", "s", 0, 10)))

        assert "changes_fact_session_idx" in store.read(plan)
        store.close()
