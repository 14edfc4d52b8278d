"""PostgreSQL search as one statement (SPEC.md SRCH-6) and a read's timeouts on its BEGIN.

The scores themselves are checked against the memory store, bit for bit, by the conformance
suite (tests/conformance/test_search_pair.py, test_search_scope.py) and
`test_srch4_search_finds_the_same_facts_and_scores_on_every_backend`; here, what reaches the
server and that the folded timeouts still bound the transaction.
"""

from __future__ import annotations

from typing import Any

import pytest

from aidememo.domain.clock import FixedClock
from aidememo.domain.errors import AidememoError, ErrorCode
from aidememo.domain.model import ResourceRef, Role, Scope
from aidememo.http.app import HttpApp
from aidememo.stores.postgres import PostgresStore
from aidememo.stores.postgres import sql as q
from tests import pg
from tests.contract.support import PROJECT, START_MS, TENANT, WRITER, Api, InProcessClient, P
from tests.stores.test_postgres_store import _counting

pytestmark = pytest.mark.postgres


def _seeded(store: PostgresStore) -> Scope:
    return _seeded_api(store)[0]


def _seeded_api(store: PostgresStore) -> tuple[Scope, Api]:
    app = HttpApp(store, clock=FixedClock(START_MS))
    api = Api("search", InProcessClient(app), app.services.identity, FixedClock(START_MS))
    api.provision(WRITER, Role.WRITER)
    api.session("s-a", source_id="src-a")
    for i, text in enumerate(["redis cache timeout", "cache eviction", "redis", "timeout"]):
        api.fact(f"fact-{i}", "s-a", text)
    return Scope(TENANT, PROJECT), api


def test_srch6_store10_a_search_is_one_round_trip_on_psycopg_and_framed_on_pg8000(
    db: pg.Database, driver: str
) -> None:
    """psycopg: `aidememo_search` with its timeouts in one simple query. pg8000 sends every
    statement through the extended protocol, so its search is BEGIN, the timeouts,
    `aidememo_search` and COMMIT."""
    log: list[str] = []
    framed = driver == "pg8000"
    store = PostgresStore.open(_counting(db, driver, log), framed=framed)
    try:
        scope = _seeded(store)
        for terms in (["redis"], ["redis", "cache"], ["redis", "cache", "timeout"], ["zebra"]):
            log.clear()
            page = store.read(lambda tx, terms=terms: tx.search(scope, terms, None, 10))
            framing = ([q.BEGIN_READ, "set_config"], ["COMMIT"]) if framed else ([], [])
            assert log == [*framing[0], "aidememo_search", *framing[1]], terms
            assert page.exhaustive
            assert (len(page.hits) > 0) is (terms != ["zebra"])
        hits = store.read(lambda tx: tx.search(scope, ["redis", "cache"], None, 10)).hits
        assert [h.fact_id for h in hits] == ["fact-0", "fact-2", "fact-1"]
        assert hits[0].score > hits[1].score > 0 and hits[2].score > 0
        assert store.read(lambda tx: tx.search(scope, ["redis"], "src-none", 10)).hits == []
        assert store.read(lambda tx: tx.search(scope, [], None, 10)).hits == []
        assert store.read(lambda tx: tx.search(scope, ["redis"], None, 0)).hits == []
    finally:
        store.close()


def test_srch6_store8_the_timeouts_on_the_begin_bound_the_read_and_end_with_it(
    db: pg.Database, driver: str
) -> None:
    """A read's statement_timeout is the store's, for that transaction only (STORE-8)."""
    store = db.open(driver, statement_timeout_ms=250, lock_timeout_ms=150)
    try:

        def show(tx: Any) -> tuple[str, str]:
            rows = tx._x.execute("SELECT current_setting('statement_timeout'), "
                                 "current_setting('lock_timeout')")  # fmt: skip
            return str(rows[0][0]), str(rows[0][1])

        assert store.read(show) == ("250ms", "150ms")
        with pytest.raises(AidememoError) as err:
            store.read(lambda tx: tx._x.execute("SELECT pg_sleep(5)"))
        assert err.value.code is ErrorCode.STORAGE_FAILURE
        assert store.read(show) == ("250ms", "150ms")  # the pool's connection still answers
        conn = store.pool.acquire()
        try:
            cur = conn.cursor()
            cur.execute("SELECT current_setting('statement_timeout')")
            assert cur.fetchall()[0][0] == "0"  # nothing outlived the transaction
            cur.close()
            conn.rollback()
        finally:
            store.pool.release(conn)
    finally:
        store.close()


def test_srch6_the_hits_facts_come_with_the_search(db: pg.Database, driver: str) -> None:
    """`aidememo_search` returns each hit's body, read in the same view, so `GET .../search`
    sends no read per hit."""
    log: list[str] = []
    store = PostgresStore.open(_counting(db, driver, log), framed=driver == "pg8000")
    try:
        scope, api = _seeded_api(store)
        page = store.read(lambda tx: tx.search(scope, ["redis", "cache"], None, 10))
        assert page.bodies is not None and len(page.bodies) == len(page.hits) == 3
        for hit, body in zip(page.hits, page.bodies, strict=True):
            stored = store.read(
                lambda tx, h=hit: tx.get_resource(scope, ResourceRef("fact", h.fact_id))
            )
            assert stored is not None and body == stored.body
        log.clear()
        found = api.get(f"{P}/search", query={"q": "redis cache"}).expect(200)["results"]
        assert [r["fact_id"] for r in found] == ["fact-0", "fact-2", "fact-1"]
        assert found[0]["content"] == "redis cache timeout"
        assert log.count("aidememo_search") == 1
        assert not [s for s in log if s.startswith("SELECT revision, body FROM resources")], log
    finally:
        store.close()


def test_srch6_each_term_is_one_index_range_whatever_the_statistics(db: pg.Database) -> None:
    """On tables never analyzed (a new deployment) as on analyzed ones, every postings,
    frequency and body read of `aidememo_search` is an index lookup by its full key, never a
    scan of the project's rows filtered afterwards (auto_explain of the nested statements)."""
    import psycopg

    from aidememo.domain import ranking

    store = db.open("psycopg")
    try:
        scope, api = _seeded_api(store)
        for i in range(200):  # enough rows that a scan of the project's postings would show
            api.fact(f"more-{i}", "s-a", f"word{i} another{i % 7} redis" if i % 50 else "cache")
        notes: list[str] = []
        with psycopg.connect(db.url, autocommit=True, prepare_threshold=None) as conn:
            conn.add_notice_handler(lambda d: notes.append(d.message_primary or ""))
            for analyzed in (False, True):
                if analyzed:
                    conn.execute("ANALYZE")
                conn.execute("LOAD 'auto_explain'")
                for setting in ("log_min_duration = 0", "log_nested_statements = on",
                                "log_analyze = on", "log_level = notice"):  # fmt: skip
                    conn.execute(f"SET auto_explain.{setting}")
                notes.clear()
                for terms in ("redis cache", "redis", "redis cache timeout"):
                    conn.execute(
                        "SELECT * FROM aidememo_search(%s, %s, %s, NULL, 10, %s, %s, %s, %s, %s)",
                        (scope.tenant_id, scope.project_id, terms, ranking.SEARCH_WINDOW,
                         *ranking.SQL_CONSTANTS),
                    )  # fmt: skip
                plans = "\n".join(notes)
                scans = [line for line in plans.splitlines() if "fact_search_postings" in line]
                assert scans and not [line for line in scans if "Seq Scan" in line], plans
                assert "Rows Removed by Join Filter" not in plans, plans
    finally:
        store.close()


def _two_term_answers(store: PostgresStore, scope: Scope, words: list[str]) -> list[Any]:
    found = []
    for a in words:
        for b in words:
            for source in (None, "src-a") if a < b else ():
                page = store.read(lambda tx, t=[a, b], s=source: tx.search(scope, t, s, 7))
                found.append([(h.fact_id, h.score) for h in page.hits])
    return found


def test_srch6_version_9_joins_two_terms_in_one_hash_full_join_with_the_same_answers() -> None:
    """A database searched at version 8 (each range materialized, three short lists) answers
    every two-term query with the same hits, scores and order after the migration to version
    9, whose two ranges meet in one hash full join."""
    import random

    import psycopg

    from aidememo.domain import ranking
    from aidememo.stores.postgres import schema as pg_schema
    from tests.stores.test_reads_migration import old_code

    words = ["redis", "cache", "timeout", "queue", "lease", "token"]
    rng = random.Random(9)
    with pg.fresh_database(migrated=False) as db:
        with old_code(pg_schema, 8):
            store = PostgresStore.open(db.connect("psycopg"), migrate=True)
            try:
                assert store.schema_version() == 8
                scope, api = _seeded_api(store)
                api.session("s-b", source_id="src-b")
                for i in range(120):  # repeated words, equal lengths: ties the order breaks
                    text = " ".join(rng.choice(words) for _ in range(rng.randint(1, 4)))
                    api.fact(f"mix-{i:03d}", "s-a" if i % 3 else "s-b", text)
                before = _two_term_answers(store, scope, words)
            finally:
                store.close()
        assert any(len(hits) == 7 for hits in before)
        store = PostgresStore.open(db.connect("psycopg"), migrate=True)
        try:
            assert store.schema_version() == pg_schema.SCHEMA_VERSION == 15
            assert _two_term_answers(store, scope, words) == before
        finally:
            store.close()
        notes: list[str] = []
        with psycopg.connect(db.url, autocommit=True) as conn:
            row = conn.execute("SELECT prosrc FROM pg_proc WHERE proname = 'aidememo_search'")
            source = row.fetchone()
            conn.execute("LOAD 'auto_explain'")
            for setting in ("log_min_duration = 0", "log_nested_statements = on",
                            "log_level = notice"):  # fmt: skip
                conn.execute(f"SET auto_explain.{setting}")
            conn.add_notice_handler(lambda d: notes.append(d.message_primary or ""))
            conn.execute(
                "SELECT * FROM aidememo_search(%s, %s, 'redis cache', NULL, 10, "
                "%s, %s, %s, %s, %s)",
                (scope.tenant_id, scope.project_id, ranking.SEARCH_WINDOW, *ranking.SQL_CONSTANTS),
            )
    assert source is not None and "FULL JOIN" in source[0] and "MATERIALIZED" not in source[0]
    assert "Hash Full Join" in "\n".join(notes), notes
