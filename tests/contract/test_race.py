"""TYP-3: creates are race-free. Two concurrent creates of one fact id with different command
ids give exactly one 200 and one 409 `resource_already_exists`, through one app and through
two apps on two handles of the same SQLite file."""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from aidememo.domain.clock import FixedClock
from aidememo.domain.model import Role
from aidememo.http.app import HttpApp
from aidememo.stores.sqlite.store import SqliteStore
from tests.contract.support import (
    HERMES,
    LEASE_MS,
    START_MS,
    WRITER,
    Api,
    InProcessClient,
    P,
)

ROUNDS = 8


def _api(app: HttpApp, clock: FixedClock) -> Api:
    return Api("race", InProcessClient(app), app.services.identity, clock)


def _race(apis: tuple[Api, Api], fact_id: str) -> list[tuple[int, str | None]]:
    barrier = threading.Barrier(2)
    results: list[tuple[int, str | None]] = []
    lock = threading.Lock()

    def create(api: Api, actor: str, n: int) -> None:
        body: dict[str, Any] = {
            "command_id": f"cmd_{fact_id}_{n}",
            "payload": {"fact_id": fact_id, "session_id": "s_race", "content": f"writer {n}"},
        }
        barrier.wait()
        reply = api.post(f"{P}/facts", body, actor)
        with lock:
            results.append((reply.status, reply.code))

    threads = [
        threading.Thread(target=create, args=(apis[0], WRITER, 0)),
        threading.Thread(target=create, args=(apis[1], HERMES, 1)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return results


def _check(apis: tuple[Api, Api]) -> None:
    apis[0].session("s_race", source_id="race")
    for round_ in range(ROUNDS):
        results = _race(apis, f"fact_race_{round_}")
        assert Counter(results) == Counter({(200, None): 1, (409, "resource_already_exists"): 1})
    head = apis[0].head()
    assert head == 1 + ROUNDS
    snap = apis[1].get(f"{P}/snapshot").expect(200)
    facts = [r for r in snap["resources"] if r["resource"]["kind"] == "fact"]
    assert len(facts) == ROUNDS
    assert all(r["revision"] == 1 for r in facts)


def _provision(api: Api) -> None:
    api.provision(WRITER, Role.WRITER)
    api.provision(HERMES, Role.WRITER)


@pytest.mark.timeout(120)
def test_typ3_concurrent_creates_through_one_app(tmp_path: Path) -> None:
    clock = FixedClock(START_MS)
    store = SqliteStore.open_file(tmp_path / "race.sqlite")
    try:
        api = _api(HttpApp(store, clock=clock, handoff_lease_ms=LEASE_MS), clock)
        _provision(api)
        _check((api, api))
    finally:
        store.close()


@pytest.mark.timeout(120)
def test_typ3_concurrent_creates_through_two_handles_of_one_file(tmp_path: Path) -> None:
    clock = FixedClock(START_MS)
    path = tmp_path / "race.sqlite"
    first = SqliteStore.open_file(path)
    second = SqliteStore.open_file(path)
    try:
        one = _api(HttpApp(first, clock=clock, handoff_lease_ms=LEASE_MS), clock)
        _provision(one)
        two = _api(HttpApp(second, clock=clock, handoff_lease_ms=LEASE_MS), clock)
        two.tokens = one.tokens
        _check((one, two))
    finally:
        first.close()
        second.close()


@pytest.mark.postgres
@pytest.mark.timeout(120)
@pytest.mark.parametrize("driver", ["psycopg", "pg8000"])
def test_typ3_concurrent_creates_through_two_postgres_stores(driver: str) -> None:
    from tests import pg

    clock = FixedClock(START_MS)
    db = pg.create_database()
    stores = []
    try:
        stores = [db.open(driver), db.open(driver)]
        one = _api(HttpApp(stores[0], clock=clock, handoff_lease_ms=LEASE_MS), clock)
        _provision(one)
        two = _api(HttpApp(stores[1], clock=clock, handoff_lease_ms=LEASE_MS), clock)
        two.tokens = one.tokens
        _check((one, two))
        # and through one store's pool from two threads
        for round_ in range(ROUNDS):
            results = _race((one, one), f"fact_pool_{round_}")
            assert Counter(results) == Counter(
                {(200, None): 1, (409, "resource_already_exists"): 1}
            )
    finally:
        for store in stores:
            store.close()
        db.drop()
