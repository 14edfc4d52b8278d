"""The PostgreSQL store behind PgBouncer in transaction pool mode (STORE-8).

`scripts/test` starts PgBouncer 1.18 in front of the test cluster and exports
`AIDEMEMO_TEST_PGBOUNCER_URL`; the conformance and contract suites run once more through it
(the `pgbouncer_*` backends). These tests check that the tier is what it claims: the pooled
connections really pass through PgBouncer in transaction mode, a server session is shared
between clients from one transaction to the next, and the store still works when a session
setting left behind by someone else sits on the server connection it is lent.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

from aidememo.conformance.harness import Fixture
from tests import pg

pytestmark = pytest.mark.postgres


@pytest.fixture
def pooled() -> Iterator[pg.Database]:
    with pg.fresh_database(pooled=True) as database:
        yield database


def console(statement: str) -> list[tuple[Any, ...]]:
    """Rows of a PgBouncer console command (`SHOW ...`)."""
    import psycopg

    parts = urlsplit(pg.pgbouncer_url())
    url = parts._replace(path="/pgbouncer").geturl()
    with psycopg.connect(url, autocommit=True, prepare_threshold=None) as conn:
        cur = conn.execute(statement)  # type: ignore[call-overload]
        names = [d.name for d in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]  # type: ignore[misc]


def test_store8_pooled_connections_pass_through_pgbouncer_in_transaction_mode(
    pooled: pg.Database, driver: str
) -> None:
    fixture = Fixture.create(lambda: pooled.open(driver))
    try:
        assert fixture.put("cmd_pooled", "pooled").project_seq == 1
    finally:
        fixture.store.close()
    config = {row["key"]: row["value"] for row in console("SHOW CONFIG")}
    assert config["pool_mode"] == "transaction"
    pools = [row for row in console("SHOW POOLS") if row["user"] == pooled.name]
    assert pools and all(row["pool_mode"] == "transaction" for row in pools)


def test_store8_server_sessions_are_shared_between_transactions(pooled: pg.Database) -> None:
    """Two clients, one server connection: whatever a session sets is seen by the other
    client's next transaction, which is why the store may rely on none of it."""
    import psycopg

    first = psycopg.connect(pooled.url, autocommit=True, prepare_threshold=None)
    second = psycopg.connect(pooled.url, autocommit=True, prepare_threshold=None)
    try:
        pids = set()
        for conn in (first, second, first, second):
            row = conn.execute("SELECT pg_backend_pid()").fetchone()
            assert row is not None
            pids.add(row[0])
        # Sequential transactions of two clients reuse the idle server connection.
        assert len(pids) == 1
    finally:
        first.close()
        second.close()


def test_store8_a_leftover_session_setting_does_not_reach_the_store(
    pooled: pg.Database, driver: str
) -> None:
    """Session `SET`s left on the shared server connection by another client do not reach
    the store's transactions: each sets its own timeouts (SET LOCAL) before anything else."""
    import psycopg

    other = psycopg.connect(pooled.url, autocommit=True, prepare_threshold=None)
    fixture = Fixture.create(lambda: pooled.open(driver))
    try:
        other.execute("SET statement_timeout = '7s'")
        other.execute("SET lock_timeout = '7s'")
        row = other.execute("SELECT current_setting('statement_timeout')").fetchone()
        assert row == ("7s",)  # the leftover is on the server session

        def settings(tx: Any) -> list[Any]:
            rows: list[Any] = tx._x.execute(
                "SELECT current_setting('statement_timeout'), current_setting('lock_timeout')"
            )
            return rows

        for _ in range(3):
            assert [tuple(r) for r in fixture.store.read(settings)] == [("10s", "5s")]
        for i in range(5):
            assert fixture.put(f"cmd_leftover_{i}", "x" * 1000).project_seq == i + 1
    finally:
        fixture.store.close()
        other.close()
