"""The search index migration (SQLite schema 5, PostgreSQL schema 6; SPEC.md SRCH-4).

A database written by the previous layout (an FTS5 table on SQLite, a GIN-indexed tsvector and
per-project counters on PostgreSQL) keeps its search rows: the migration rebuilds the
project-scoped index from them in its transaction, after which every project answers exactly
as the reference store fed the same entries in the same order does, and new writes continue
the project's doc_seq.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from aidememo.domain.model import History, Project, Scope, SearchDoc, SearchPage
from aidememo.domain.tokenize import index_terms, query_terms
from aidememo.ports import Store
from aidememo.stores.in_memory import InMemoryStore
from aidememo.stores.postgres import PostgresStore
from aidememo.stores.postgres import schema as pg_schema
from aidememo.stores.sqlite import SqliteStore
from aidememo.stores.sqlite import schema as sqlite_schema
from tests import pg
from tests.doubles.do_storage import DoStorage

PROJECTS = [Project("tenant_a", "project_x", "e", 0), Project("tenant_b", "project_x", "e", 0)]
LONG = "x" * 1500  # over MAX_TERM_BYTES: never a posting, but part of the fact's length
ENTRIES = {
    "tenant_a": [
        SearchDoc("fact_1", "src_1", index_terms("redis timeout in the cache cluster")),
        SearchDoc("fact_2", "src_2", index_terms("cache cache eviction 서버 배포")),
        SearchDoc("fact_3", "src_1", index_terms("!!!")),  # no terms at all
        SearchDoc("fact_4", "src_2", index_terms(f"redis {LONG} timeout")),
    ],
    "tenant_b": [
        SearchDoc("fact_1", "src_1", index_terms("redis redis redis other tenant")),
        SearchDoc("fact_9", "src_1", index_terms("cache 서버")),
    ],
}
# The same fact indexed twice before the migration: only its second entry may remain.
REPLACED = SearchDoc("fact_2", "src_2", index_terms("old words eviction"))
_A_LENGTH = sum(len(doc.terms.split()) for doc in ENTRIES["tenant_a"]) + 1  # and fact_5
QUERIES = ["redis", "cache timeout", "서버 배포", "eviction", "old", "other", "zebra", LONG]


def _page(store: Store, scope: Scope, q: str) -> SearchPage:
    return store.read(lambda tx: tx.search(scope, query_terms(q), None, 10))


def _results(store: Store) -> list[list[tuple[str, float]]]:
    out = []
    for project in PROJECTS:
        for q in QUERIES:
            page = _page(store, Scope(project.tenant_id, project.project_id), q)
            assert page.exhaustive
            out.append([(h.fact_id, h.score) for h in page.hits])
    return out


def _reference() -> list[list[tuple[str, float]]]:
    store = InMemoryStore()
    for project in PROJECTS:
        _provision(store, project)
        _restore(store, project, ENTRIES[project.tenant_id])
    return _results(store)


def _restore(store: Store, project: Project, docs: list[SearchDoc]) -> None:
    history = History([], [], [], [], [], docs)
    store.transaction(lambda tx: tx.restore_history(project, history))


def _provision(store: Store, project: Project) -> None:
    def run(tx: object) -> None:
        tx.insert_tenant(project.tenant_id, 1)  # type: ignore[attr-defined]
        tx.insert_project(project, 1)  # type: ignore[attr-defined]

    store.transaction(run)


def _continues(store: Store) -> None:
    """A new entry after the migration: the next doc_seq, and the statistics move with it."""
    project = PROJECTS[0]
    _restore(store, project, [SearchDoc("fact_5", "src_1", "zebra")])
    scope = Scope(project.tenant_id, project.project_id)
    page = store.read(lambda tx: tx.search(scope, ["zebra"], None, 10))
    assert [h.fact_id for h in page.hits] == ["fact_5"]


# -- SQLite: a version 3 database with FTS5 rows ------------------------------------------------

_OLD_KEY = (
    "INSERT INTO fact_search_keys (tenant_id, project_id, fact_id) VALUES (?, ?, ?) "
    "ON CONFLICT (tenant_id, project_id, fact_id) DO UPDATE SET fact_id = excluded.fact_id "
    "RETURNING doc_rowid"
)


def _old_sqlite(conn: sqlite3.Connection) -> None:
    conn.execute(sqlite_schema.CREATE_VERSION_TABLE)
    for version, statements in sqlite_schema.MIGRATIONS:
        if version <= 3:
            for statement in statements:
                conn.execute(statement)
    conn.execute(sqlite_schema.UPSERT_VERSION, (sqlite_schema.COMPONENT, 3))
    for project in PROJECTS:
        t, p = project.tenant_id, project.project_id
        conn.execute("INSERT INTO tenants VALUES (?, 'active', 1)", (t,))
        conn.execute("INSERT INTO projects VALUES (?, ?, 'e', 0, 'active', 1)", (t, p))
        entries = ENTRIES[t]
        if t == "tenant_a":
            entries = [entries[0], REPLACED, *entries[1:]]
        for doc in entries:
            (rowid,) = conn.execute(_OLD_KEY, (t, p, doc.fact_id)).fetchone()
            conn.execute("DELETE FROM fact_search WHERE rowid = ?", (rowid,))
            conn.execute(
                "INSERT INTO fact_search (rowid, terms, tenant_id, project_id, fact_id, "
                "source_id) VALUES (?, ?, ?, ?, ?, ?)",
                (rowid, doc.terms, t, p, doc.fact_id, doc.source_id),
            )


def test_srch4_sqlite_migration_rebuilds_the_index_from_fts5_rows(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    conn = sqlite3.connect(path)
    with conn:
        _old_sqlite(conn)
    conn.close()
    store = SqliteStore.open_file(path)
    assert store.schema_version() == sqlite_schema.SCHEMA_VERSION == 8
    assert _results(store) == _reference()
    _continues(store)
    store.close()
    conn = sqlite3.connect(path)
    names = {row[0] for row in conn.execute("SELECT name FROM sqlite_schema")}
    assert "fact_search_keys" not in names and "fact_search_data" not in names
    (stats,) = conn.execute(
        "SELECT docs || ' ' || terms || ' ' || last_doc FROM fact_search_stats "
        "WHERE tenant_id = 'tenant_a'"
    ).fetchone()
    conn.close()
    assert stats == f"5 {_A_LENGTH} 5"  # four migrated facts (one of them replaced) and fact_5


def test_srch4_do_sql_migration_rebuilds_the_index_from_fts5_rows(tmp_path: Path) -> None:
    path = tmp_path / "do.sqlite"
    conn = sqlite3.connect(path)
    with conn:
        _old_sqlite(conn)
    conn.close()
    storage = DoStorage(str(path))
    try:
        store = SqliteStore.on_durable_object(storage)
        assert store.schema_version() == 8
        assert _results(store) == _reference()
        _continues(store)
    finally:
        storage.close()


# -- PostgreSQL: a version 4 database with tsvector rows ----------------------------------------


@pytest.fixture
def old_pg() -> Iterator[pg.Database]:
    with pg.fresh_database(migrated=False) as database:
        with pg.admin(database.url) as conn, conn.transaction():
            conn.execute(pg_schema.CREATE_VERSION_TABLE)
            for version, statements in pg_schema.MIGRATIONS:
                if version <= 4:
                    for statement in statements:
                        conn.execute(statement)
            conn.execute(pg_schema.UPSERT_VERSION, (pg_schema.COMPONENT, 4))
            for project in PROJECTS:
                t, p = project.tenant_id, project.project_id
                conn.execute("INSERT INTO tenants VALUES (%s, 'active', 1)", (t,))
                conn.execute(
                    "INSERT INTO projects (tenant_id, project_id, project_epoch, head_seq, "
                    "created_at_ms) VALUES (%s, %s, 'e', 0, 1)",
                    (t, p),
                )
                entries = ENTRIES[t]
                if t == "tenant_a":
                    entries = [entries[0], REPLACED, *entries[1:]]
                for seq, doc in enumerate(entries, start=1):
                    # the fact's change row gives its place in the rebuilt order
                    conn.execute(
                        "INSERT INTO changes VALUES (%s, %s, %s, 'e', 'fact', %s, 'upsert', "
                        "1, 'actor', 1, '\\x7b7d')",
                        (t, p, seq, doc.fact_id),
                    )
                    conn.execute(
                        "SELECT aidememo_index_fact(%s, %s, %s, %s, %s)",
                        (t, p, doc.fact_id, doc.source_id, doc.terms),
                    )
        yield database


@pytest.mark.postgres
@pytest.mark.parametrize("driver", pg.DRIVERS)
def test_srch4_postgres_migration_rebuilds_the_index_from_term_arrays(
    old_pg: pg.Database, driver: str
) -> None:
    store = PostgresStore.open(old_pg.connect(driver), migrate=True)
    try:
        assert store.schema_version() == pg_schema.SCHEMA_VERSION == 15
        assert _results(store) == _reference()
        _continues(store)
    finally:
        store.close()
    with pg.admin(old_pg.url) as conn:
        row = conn.execute(
            "SELECT docs, terms, last_doc FROM fact_search_stats WHERE tenant_id = 'tenant_a'"
        ).fetchone()
        columns = conn.execute(
            "SELECT column_name FROM information_schema.columns "
            "WHERE table_name = 'projects' AND column_name LIKE 'search%%' "
            "AND table_schema = current_schema()"
        ).fetchall()
    assert row == (5, _A_LENGTH, 5) and columns == []
