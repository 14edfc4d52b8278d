"""LIVE-9 on PostgreSQL: a commit notifies only while a backend is registered as listening
(`aidememo_listeners`, schema version 10), and the commit listener keeps its registration:
made before its `LISTEN`, removed with its `UNLISTEN` and at stop, and a registration left by
a backend that is gone is removed by the next one."""

from __future__ import annotations

import queue
import secrets
import time
from collections.abc import Iterator
from typing import Any

import pytest

from aidememo.conformance.harness import PROJECT as FX_PROJECT
from aidememo.conformance.harness import TENANT as FX_TENANT
from aidememo.conformance.harness import Fixture
from aidememo.domain.model import Scope
from aidememo.stores.postgres.sql import (
    COMMIT_CHANNEL,
    REGISTER_LISTENER,
    UNREGISTER_LISTENER,
    parse_commit_payload,
)
from origin.notify import CommitListener
from tests import pg

pytestmark = pytest.mark.postgres

WAIT_S = 30.0  # a bound on waiting for what must happen, never a measured expectation
QUIET_S = 1.0  # how long a notification that must not come is waited for


@pytest.fixture
def db() -> Iterator[pg.Database]:
    with pg.fresh_database() as database:
        yield database


def _heard(conn: Any, timeout: float) -> list[tuple[str, str, int]]:
    """The commit notifications `conn` receives within `timeout`."""
    heard: list[tuple[str, str, int]] = []
    for note in conn.notifies(timeout=timeout, stop_after=1):
        assert note.channel == COMMIT_CHANNEL
        parsed = parse_commit_payload(note.payload)
        assert parsed is not None
        heard.append(parsed)
    return heard


def _registered(db: pg.Database) -> set[int]:
    with pg.admin(db.url) as conn:
        return {row[0] for row in conn.execute("SELECT backend_pid FROM aidememo_listeners")}


def test_live9_a_commit_notifies_only_while_a_listener_is_registered(db: pg.Database) -> None:
    fx = Fixture.create(lambda: db.open("psycopg"))
    generic = Fixture.create(lambda: db.open("psycopg"))
    tag = secrets.token_hex(3)
    with pg.admin(db.url) as conn:
        conn.execute(f"LISTEN {COMMIT_CHANNEL}")  # listening, but not registered
        fx.put(f"cmd_{tag}_1", "a")
        generic.put_generic(f"cmd_{tag}_2", "b")
        assert _heard(conn, QUIET_S) == []
        conn.execute(REGISTER_LISTENER)
        fx.put(f"cmd_{tag}_3", "c")  # the one-statement path
        assert _heard(conn, WAIT_S) == [(FX_TENANT, FX_PROJECT, 3)]
        generic.put_generic(f"cmd_{tag}_4", "d")  # begin_command + commit_mutation
        assert _heard(conn, WAIT_S) == [(FX_TENANT, FX_PROJECT, 4)]
        conn.execute(UNREGISTER_LISTENER)
        fx.put(f"cmd_{tag}_5", "e")
        assert _heard(conn, QUIET_S) == []
    fx.store.close()
    generic.store.close()


def _wait_for(condition: Any, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"still waiting for {what}"
        time.sleep(0.05)


def test_live9_the_listener_registers_while_listening_and_clears_what_died(
    db: pg.Database,
) -> None:
    with pg.admin(db.url) as conn:  # a backend that registered, then died without a word
        conn.execute(REGISTER_LISTENER)
        dead = conn.info.backend_pid
    assert _registered(db) == {dead}
    heard: queue.Queue[tuple[Scope, int]] = queue.Queue()
    listener = CommitListener(db.url, lambda s, seq: heard.put((s, seq)), on_demand=True)
    listener.start()
    fx = Fixture.create(lambda: db.open("psycopg"))
    try:
        assert listener.connected.wait(WAIT_S)
        assert _registered(db) == {dead}  # unwanted: not registered, nothing cleared yet
        listener.want(True)
        assert listener.listening.wait(WAIT_S)
        mine = _registered(db)
        assert len(mine) == 1 and dead not in mine  # the dead one's row went on the way
        fx.put("cmd_listened_1", "a")
        assert heard.get(timeout=WAIT_S) == (Scope(FX_TENANT, FX_PROJECT), 1)
        listener.want(False)
        _wait_for(lambda: not _registered(db), "the registration to go with UNLISTEN")
        listener.want(True)
        assert listener.listening.wait(WAIT_S)
        _wait_for(lambda: len(_registered(db)) == 1, "the registration to come back")
    finally:
        listener.stop()
        fx.store.close()
    assert _registered(db) == set()  # removed at stop
