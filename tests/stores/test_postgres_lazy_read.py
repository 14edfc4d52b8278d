"""A psycopg read view's lazy BEGIN and its one-round-trip lone statement (SPEC.md STORE-10)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from aidememo.domain.errors import AidememoError, ErrorCode
from aidememo.domain.model import ResourceRef
from aidememo.stores.postgres import PostgresStore
from aidememo.stores.postgres import sql as q
from aidememo.stores.postgres.literals import inline, literal
from tests import pg
from tests.contract.support import WRITER
from tests.stores.test_postgres_search import _seeded_api
from tests.stores.test_postgres_store import _counting

pytestmark = pytest.mark.postgres

TEXTS = [
    "plain",
    "it's",
    "back\\slash \\' and '' quotes",
    "E'\\x00' looks like an escape",
    "unicode: 日本語 ünïcødé 🙂",
    "%s and %% and $1 and $$dollar$$",
    "",
    "line\nbreak\ttab\r",
]
FLOATS = [0.0, -0.0, 0.1, 1 / 3, 0.03695913387501734, 1e-300, 1.7976931348623157e308, -2.5]


def test_store10_literals_read_back_exactly_whatever_the_string_setting(db: pg.Database) -> None:
    """Every text, float, integer, byte string and NULL written as a literal reads back as the
    same value, with `standard_conforming_strings` on and off."""
    import psycopg

    ints = [0, -1, 2**63 - 1, -(2**63)]
    blobs = [b"", b"\x00\xff'\\", bytes(range(256))]
    with psycopg.connect(db.url, autocommit=True) as conn:
        for conforming in ("on", "off"):
            conn.execute(f"SET standard_conforming_strings = {conforming}")
            for value in [*TEXTS, *FLOATS, *ints, *blobs, None, True, False]:
                text = inline("SELECT %s", [value])
                got = conn.execute(text).fetchone()[0]  # type: ignore[index]
                if isinstance(value, float):
                    assert math.copysign(1, got) == math.copysign(1, value)
                assert got == value, (conforming, value, text)


def test_store10_what_has_no_literal_is_refused() -> None:
    for bad in ("nul\x00inside", math.nan, math.inf):
        with pytest.raises(ValueError):
            literal(bad)
    with pytest.raises(TypeError):
        literal(object())
    with pytest.raises(ValueError):
        inline("SELECT %s, %s", ["one"])
    with pytest.raises(ValueError):
        inline("SELECT %s LIKE 'a%'", ["a"])


def test_store10_a_search_and_a_resource_read_are_one_simple_query(db: pg.Database) -> None:
    """psycopg: the lone statement goes with its timeouts, no BEGIN or COMMIT; a view of
    several statements sends its BEGIN with the first of them."""
    log: list[str] = []
    store = PostgresStore.open(_counting(db, "psycopg", log), framed=False)
    try:
        scope, _api = _seeded_api(store)
        log.clear()
        hits = store.read(lambda tx: tx.search(scope, ["redis", "cache"], None, 10)).hits
        assert [h.fact_id for h in hits] == ["fact-0", "fact-2", "fact-1"]
        assert log == ["aidememo_search"]
        log.clear()
        found = store.read(
            lambda tx: tx.get_access_resource(scope, WRITER, None, ResourceRef("fact", "fact-0"))
        )
        assert found[2] is not None
        assert len(log) == 1 and not log[0].startswith("BEGIN")
        log.clear()
        store.read(lambda tx: (tx.tenant_exists(scope.tenant_id), tx.tenant_exists("other")))
        assert log[0] == q.BEGIN_READ + store._set_local and log[-1] == "COMMIT"
        assert len(log) == 4
        log.clear()
        assert store.read(lambda tx: 7) == 7  # a view that reads nothing sends nothing
        assert log == []
    finally:
        store.close()


def _sleep_alone(tx: Any) -> Any:
    return tx._x.execute_alone("SELECT pg_sleep(%s)", (5.0,))


def test_store10_the_timeouts_bound_a_lone_statement_and_end_with_it(db: pg.Database) -> None:
    """A lone statement runs under the store's statement_timeout; after the timeout the
    connection still answers and no setting outlived the statement."""
    store = db.open("psycopg", statement_timeout_ms=250, lock_timeout_ms=150, pool_size=1)
    try:
        with pytest.raises(AidememoError) as err:
            store.read(_sleep_alone)
        assert err.value.code is ErrorCode.STORAGE_FAILURE
        shown = store.read(
            lambda tx: tx._x.execute_alone(
                "SELECT current_setting(%s), current_setting(%s)",
                ("statement_timeout", "lock_timeout"),
            )
        )
        assert shown == [("250ms", "150ms")]
        conn = store.pool.acquire()
        try:
            cur = conn.cursor()
            cur.execute("SELECT current_setting('statement_timeout')")
            assert cur.fetchall()[0][0] == "0"
            assert conn.info.transaction_status == 0  # idle: no transaction left open
            cur.close()
        finally:
            store.pool.release(conn)
    finally:
        store.close()


def test_store10_a_lone_statement_may_not_be_followed_by_another(db: pg.Database) -> None:
    store = db.open("psycopg")
    try:

        def two(tx: Any) -> Any:
            tx._x.execute_alone("SELECT %s", (1,))
            return tx._x.execute("SELECT 2")

        with pytest.raises(AidememoError) as err:
            store.read(two)
        assert err.value.code is ErrorCode.STORAGE_FAILURE
        assert store.read(lambda tx: tx._x.execute_alone("SELECT %s", (3,))) == [(3,)]
    finally:
        store.close()


@pytest.mark.parametrize("alone", [True, False])
def test_store10_a_first_statement_on_a_connection_that_died_idle_is_sent_again(
    db: pg.Database, alone: bool
) -> None:
    """The pooled connection died while idle: the view's first round trip fails, and it is
    sent once more on a fresh connection; a statement's own failure is not."""
    log: list[str] = []
    store = PostgresStore.open(_counting(db, "psycopg", log), framed=False, pool_size=1)
    try:
        scope, _api = _seeded_api(store)

        def read(tx: Any) -> Any:
            if alone:
                return [h.fact_id for h in tx.search(scope, ["redis"], None, 5).hits]
            return tx.tenant_exists(scope.tenant_id)

        expected = store.read(read)
        db.terminate_sessions()
        log.clear()
        assert store.read(read) == expected
        first = "aidememo_search" if alone else q.BEGIN_READ + store._set_local
        assert log.count(first) == 2
        log.clear()
        with pytest.raises(AidememoError):
            store.read(lambda tx: tx._x.execute_alone("SELECT 1 / %s", (0,)))
        assert sum("SELECT 1 / 0" in e for e in log) == 1  # not sent again:
        assert log.count(q.PING) == 1  # the connection was asked, and answered
        assert store.read(read) == expected
    finally:
        store.close()
