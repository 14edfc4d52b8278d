"""Schema version table and migrations of the SQLite store (STORE-SQL rules)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from aidememo.domain.errors import AidememoError, ErrorCode
from aidememo.stores.sqlite import SCHEMA_VERSION, SqliteStore
from aidememo.stores.sqlite.schema import COMPONENT, MIGRATIONS
from tests.doubles.do_storage import DoStorage
from tests.stores._support import SCOPE, commit_all, mutation, provision


def _set_version(path: Path, version: int) -> None:
    conn = sqlite3.connect(path)
    with conn:
        conn.execute(
            "UPDATE aidememo_schema SET version = ? WHERE component = ?", (version, COMPONENT)
        )
    conn.close()


def test_store6_schema_version_in_table_not_user_version(tmp_path: Path) -> None:
    store = SqliteStore.open_file(tmp_path / "db.sqlite")
    store.close()
    conn = sqlite3.connect(tmp_path / "db.sqlite")
    rows = conn.execute("SELECT component, version FROM aidememo_schema").fetchall()
    (user_version,) = conn.execute("PRAGMA user_version").fetchone()
    conn.close()
    assert rows == [(COMPONENT, SCHEMA_VERSION)]
    assert user_version == 0


def test_store6_migrations_ordered_and_end_at_schema_version() -> None:
    versions = [version for version, _ in MIGRATIONS]
    assert versions == sorted(versions) == list(range(1, SCHEMA_VERSION + 1))


def test_store6_newer_schema_refused(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    SqliteStore.open_file(path).close()
    _set_version(path, SCHEMA_VERSION + 1)
    with pytest.raises(AidememoError) as info:
        SqliteStore.open_file(path)
    assert info.value.code is ErrorCode.STORAGE_FAILURE
    assert info.value.message == (
        f"database schema {SCHEMA_VERSION + 1} is newer than this code's {SCHEMA_VERSION}"
    )


def test_store6_newer_schema_refused_do_executor() -> None:
    storage = DoStorage()
    try:
        SqliteStore.on_durable_object(storage)
        storage.sql.exec("UPDATE aidememo_schema SET version = ?", SCHEMA_VERSION + 7)
        with pytest.raises(AidememoError) as info:
            SqliteStore.on_durable_object(storage)
        assert info.value.code is ErrorCode.STORAGE_FAILURE
        assert "is newer than this code's" in info.value.message
    finally:
        storage.close()


def test_store6_migrations_idempotent_on_reopen(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    store = SqliteStore.open_file(path)
    store.transaction(provision)
    commit_all(store, [mutation(1, "r1"), mutation(2, "r2")])
    store.close()
    for _ in range(3):
        store = SqliteStore.open_file(path)
        assert store.schema_version() == SCHEMA_VERSION
        project = store.read(lambda tx: tx.get_project(SCOPE))
        assert project is not None and project.head_seq == 2
        store.close()
    conn = sqlite3.connect(path)
    (count,) = conn.execute("SELECT count(*) FROM aidememo_schema").fetchone()
    conn.close()
    assert count == 1


def test_store6_migrations_idempotent_on_do_reopen() -> None:
    storage = DoStorage()
    try:
        first = SqliteStore.on_durable_object(storage)
        first.transaction(provision)
        commit_all(first, [mutation(1, "r1")])
        again = SqliteStore.on_durable_object(storage)  # a restarted object runs migrate again
        assert again.schema_version() == SCHEMA_VERSION
        assert again.read(lambda tx: tx.get_project(SCOPE)).head_seq == 1  # type: ignore[union-attr]
    finally:
        storage.close()


def test_store7_all_tables_strict(tmp_path: Path) -> None:
    store = SqliteStore.open_file(tmp_path / "db.sqlite")
    store.close()
    conn = sqlite3.connect(tmp_path / "db.sqlite")
    rows = conn.execute(
        "SELECT name, strict FROM pragma_table_list WHERE schema = 'main' AND type = 'table' "
        "AND name NOT LIKE 'sqlite%'"
    ).fetchall()
    fts_shadow = {f"fact_search_fts_{s}" for s in ("data", "idx", "config")}  # FTS5's own
    rows = [row for row in rows if row[0] not in fts_shadow]
    conn.close()
    assert rows and all(strict == 1 for _, strict in rows), rows


def test_store6_arc9_a_version_1_database_gains_the_import_staging_table(tmp_path: Path) -> None:
    """Migrations are ordered: a database left at version 1 gets only the later steps (the
    import staging table, outside the tenant data; version 3's receipts index for the session
    list, READS-3), and its rows stay."""
    path = tmp_path / "db.sqlite"
    (version, steps), *later = MIGRATIONS
    assert version == 1 and [v for v, _ in later] == list(range(2, SCHEMA_VERSION + 1))
    conn = sqlite3.connect(path)
    with conn:
        conn.execute(
            "CREATE TABLE aidememo_schema (component TEXT PRIMARY KEY, version INTEGER NOT NULL)"
        )
        for statement in steps:
            conn.execute(statement)
        conn.execute("INSERT INTO aidememo_schema VALUES (?, 1)", (COMPONENT,))
    conn.close()
    store = SqliteStore.open_file(path)
    store.transaction(provision)
    store.close()
    store = SqliteStore.open_file(path)  # and again: the migration ran once
    assert store.schema_version() == SCHEMA_VERSION == 8
    store.transaction(lambda tx: tx.stage_import_page("import_1", "p", 0, b"{}\n", 1))
    assert store.read(lambda tx: tx.staged_import_page("import_1", "p", 0)) == b"{}\n"
    assert store.read(lambda tx: tx.get_project(SCOPE)) is not None
    store.close()
    conn = sqlite3.connect(path)
    found = conn.execute("SELECT name FROM sqlite_schema WHERE name = 'receipts_session_idx'")
    assert found.fetchall() == [("receipts_session_idx",)]
    conn.close()
    conn = sqlite3.connect(path)
    (strict,) = conn.execute(
        "SELECT strict FROM pragma_table_list WHERE name = 'aidememo_import_staging'"
    ).fetchone()
    conn.close()
    assert strict == 1
