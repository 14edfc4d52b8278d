"""The live feed at the edge, continued (SPEC.md LIVE-7 and the object's hibernation): lease
notices, subscribers surviving hibernation, and the PostgreSQL mode's feed; the fixtures are
`tests/edge/live_support.py`'s."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aidememo.domain.model import MemberStatus
from tests import pg
from tests.contract.support import (
    EPOCH,
    READER,
    RECEIVER,
    WRITER,
)
from tests.edge.live_support import OBJECT, LiveEdge, edge, revoke, seqs
from tests.edge.runtime.websockets import ClientSocket

__all__ = ["edge"]  # the fixture, used by name


@pytest.fixture
def short_lease(tmp_path: Path) -> Iterator[LiveEdge]:
    made = LiveEdge(tmp_path, lease_ms=1000)
    try:
        yield made
    finally:
        made.close()


def _accepted(edge: LiveEdge) -> tuple[list[ClientSocket], dict[str, Any]]:
    """A handoff to RECEIVER, three subscribers, then the claim accepted."""
    edge.api.session("s1")
    edge.api.send("h1", "s1", RECEIVER).expect(200)
    subs = [edge.subscribe(actor, after_seq=2) for actor in (RECEIVER, WRITER, READER)]
    for ws in subs:
        ws.recv()
    receipt: dict[str, Any] = edge.api.transition("h1", "accept", {"claim_id": "c1"}, 1).expect(200)
    for ws in subs:
        assert ws.recv()["next_cursor"]["after_seq"] == receipt["project_seq"]
    return subs, receipt


NOTICE = {"type": "lease_expired", "handoff_id": "h1", "claim_id": "c1"}


def test_live7_lease_expired_notice_reaches_participants(short_lease: LiveEdge) -> None:
    edge = short_lease
    (receiver, sender, reader), receipt = _accepted(edge)
    accepted_at = edge.clock.now_ms()
    assert edge.alarm_ms() == accepted_at + 1000  # the earliest live claim expiry
    edge.clock.advance(999)
    assert edge.runtime.fire_alarms() == 0
    edge.clock.advance(1)
    assert edge.runtime.fire_alarms() == 1
    assert receiver.drain() == [NOTICE] and sender.drain() == [NOTICE]
    assert reader.inbox == []  # not a participant (VIS-1)
    # Nothing was written (HO-6): the head did not move; the state is evaluated when read.
    assert edge.api.head() == receipt["project_seq"]
    # Announced once.
    edge.clock.advance(10_000)
    edge.runtime.fire_alarms()
    assert receiver.inbox == [] and sender.inbox == []


def test_live7_heartbeat_renews_so_no_early_notice(short_lease: LiveEdge) -> None:
    edge = short_lease
    (receiver, _, _), accept = _accepted(edge)
    edge.clock.advance(500)
    beat = edge.api.transition("h1", "heartbeat", {"claim_id": "c1"}, accept["revision"])
    assert beat.status == 200
    receiver.recv()
    edge.clock.advance(500)  # the first claim expiry: renewed, so nothing to announce
    edge.runtime.fire_alarms()
    assert receiver.inbox == []
    assert edge.alarm_ms() == edge.clock.now_ms() + 500  # the renewed expiry
    edge.clock.advance(500)
    assert edge.runtime.fire_alarms() == 1
    assert receiver.drain() == [NOTICE]


def test_live7_returned_claim_is_not_announced(short_lease: LiveEdge) -> None:
    edge = short_lease
    (receiver, sender, _), accept = _accepted(edge)
    edge.api.fact("f1", "s1", "result", as_=RECEIVER)
    body = {"claim_id": "c1", "result_fact_id": "f1", "outcome": "succeeded"}
    edge.api.transition("h1", "return", body, accept["revision"]).expect(200)
    receiver.drain(), sender.drain()
    edge.clock.advance(2000)
    edge.runtime.fire_alarms()
    assert receiver.inbox == [] and sender.inbox == []


def test_live7_claim_expired_before_subscribing_is_not_announced(short_lease: LiveEdge) -> None:
    edge = short_lease
    edge.api.session("s1")
    edge.api.send("h1", "s1", RECEIVER).expect(200)
    edge.api.transition("h1", "accept", {"claim_id": "c1"}, 1).expect(200)
    edge.clock.advance(5000)
    ws = edge.subscribe(RECEIVER, after_seq=3)
    ws.recv()
    edge.clock.advance(5000)
    edge.runtime.fire_alarms()
    assert ws.inbox == []


# -- hibernation ---------------------------------------------------------------------------------


def test_live2_hibernation_subscribers_survive_and_resume_from_their_cursors(
    edge: LiveEdge,
) -> None:
    edge.api.session("s1")
    writer = edge.subscribe(WRITER, after_seq=1)
    reader = edge.subscribe(READER, after_seq=1)
    writer.recv(), reader.recv()
    edge.note("a")
    assert seqs(writer.recv()) == [2] and seqs(reader.recv()) == [2]
    created = edge.projects.created
    edge.projects.hibernate(OBJECT)
    assert OBJECT not in edge.projects.live
    edge.api.send("h1", "s1", RECEIVER).expect(200)  # wakes the object: a new instance
    assert edge.projects.created == created + 1
    hidden, seen = reader.recv(), writer.recv()
    assert hidden["entries"] == [] and hidden["next_cursor"]["after_seq"] == 3
    assert seqs(seen) == [3] and seen == edge.materialized(2)
    edge.projects.hibernate(OBJECT)
    edge.note("b")
    assert seqs(writer.recv()) == [4] and seqs(reader.recv()) == [4]
    assert writer.inbox == [] and reader.inbox == []
    # A close delivered to a re-created object forgets that subscriber only.
    edge.projects.hibernate(OBJECT)
    reader.close()
    edge.note("c")
    assert seqs(writer.recv()) == [5] and reader.inbox == []


def test_live5_hibernation_suspension_after_waking(edge: LiveEdge) -> None:
    reader = edge.subscribe(READER)
    reader.recv()
    edge.projects.hibernate(OBJECT)
    edge.api.set_status(READER, MemberStatus.SUSPENDED)
    assert reader.recv()["error"]["code"] == "project_unauthorized"
    assert reader.close_code == 4403


def test_live7_hibernation_lease_expiring_while_away_is_announced_once(
    short_lease: LiveEdge,
) -> None:
    edge = short_lease
    (receiver, sender, reader), _ = _accepted(edge)
    edge.projects.hibernate(OBJECT)
    edge.clock.advance(1500)  # the alarm (stored, not in the instance) wakes the object late
    assert edge.runtime.fire_alarms() == 1
    assert receiver.drain() == [NOTICE] and sender.drain() == [NOTICE]
    assert reader.inbox == []
    edge.projects.hibernate(OBJECT)
    edge.note("later")  # a re-created object reads the leases again: no second notice
    edge.clock.advance(5000)
    edge.runtime.fire_alarms()
    assert [m.get("type") for m in receiver.drain()] == [None]


# -- STORAGE_MODE=postgres ---------------------------------------------------------------------


@pytest.fixture
def pg_edge(tmp_path: Path) -> Iterator[LiveEdge]:
    """The edge on PostgreSQL (a fresh migrated schema through PgBouncer), 1 s leases."""
    with pg.fresh_database(pooled=True) as db:
        made = LiveEdge(tmp_path, lease_ms=1000, db=db)
        try:
            yield made
        finally:
            made.close()


def _fire_recheck_alarm(edge: LiveEdge, since: int) -> None:
    """The object's re-check alarm is due within 5 s of `since` (LIVE-5): go there, fire it."""
    alarm = edge.alarm_ms()
    assert alarm is not None and alarm - since <= 5000
    edge.clock.advance(alarm - since)
    assert edge.runtime.fire_alarms() == 1


@pytest.mark.postgres
def test_live1_live3_postgres_catch_up_push_and_visibility(pg_edge: LiveEdge) -> None:
    edge = pg_edge
    edge.api.session("s1")
    writer = edge.subscribe(WRITER, limit=1)
    reader = edge.subscribe(READER, after_seq=1)
    assert writer.recv() == edge.materialized(0, limit=1)
    assert reader.recv()["entries"] == []
    edge.api.send("h1", "s1", RECEIVER).expect(200)
    assert seqs(writer.recv()) == [2]
    hidden = reader.recv()
    assert hidden == edge.materialized(1, as_=READER) and hidden["entries"] == []
    edge.projects.hibernate(OBJECT)  # its pg8000 connection closes with it
    edge.note("n")
    assert seqs(writer.recv()) == [3] and seqs(reader.recv()) == [3]


@pytest.mark.postgres
def test_live5_postgres_suspension_by_the_worker_is_found_by_the_alarm(pg_edge: LiveEdge) -> None:
    """In PostgreSQL mode the Worker writes memberships itself; the object re-checks from its
    alarm while subscribers exist, so the member is closed within 5 s without a commit."""
    edge = pg_edge
    reader = edge.subscribe(READER)
    reader.recv()
    subscribed = edge.clock.now_ms()
    edge.api.set_status(READER, MemberStatus.SUSPENDED)
    assert reader.inbox == []
    _fire_recheck_alarm(edge, subscribed)
    assert reader.recv()["error"]["code"] == "project_unauthorized"
    assert reader.close_code == 4403


@pytest.mark.postgres
def test_live5_postgres_revoked_token_is_found_by_the_alarm_with_4401(pg_edge: LiveEdge) -> None:
    """In PostgreSQL mode the Worker revokes on the database; the object's alarm re-check
    reads the tokens too, as the origin's timer does."""
    edge = pg_edge
    writer = edge.subscribe(WRITER)
    writer.recv()
    subscribed = edge.clock.now_ms()
    revoke(edge, WRITER)
    assert writer.inbox == []
    _fire_recheck_alarm(edge, subscribed)
    assert writer.recv()["error"]["code"] == "authentication_failed"
    assert writer.close_code == 4401


@pytest.mark.postgres
def test_live7_postgres_lease_notice(pg_edge: LiveEdge) -> None:
    edge = pg_edge
    (receiver, sender, reader), receipt = _accepted(edge)
    deadline = edge.clock.now_ms() + 1000
    while edge.clock.now_ms() < deadline:
        alarm = edge.alarm_ms()
        assert alarm is not None
        edge.clock.advance(max(0, min(alarm, deadline) - edge.clock.now_ms()))
        edge.runtime.fire_alarms()
    assert receiver.drain() == [NOTICE] and sender.drain() == [NOTICE]
    assert reader.inbox == []
    assert edge.api.head() == receipt["project_seq"]


def test_live1_failed_catch_up_is_an_http_error_and_leaves_no_socket(
    edge: LiveEdge, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    from aidememo.domain.errors import ErrorCode, fail

    def broken(page: Any) -> str:
        raise fail(ErrorCode.STORAGE_FAILURE, "read failed")

    edge.note("a")
    monkeypatch.setattr(sys.modules["durable_objects.live"], "page_message", broken)
    status, body, ws = edge.connect(WRITER, project_epoch=EPOCH, after_seq=0)
    assert (status, body["error"]["code"], ws) == (503, "storage_failure", None)
    assert edge.projects.instance(OBJECT).ctx.getWebSockets() == []
    monkeypatch.undo()
    edge.note("b")  # the feed still works, and nobody is pushed to
    assert seqs(edge.subscribe().recv()) == [1, 2]
