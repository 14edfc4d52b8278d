"""The live change feed at the edge (SPEC.md LIVE-*), through `Default.fetch` and the project
object's hibernatable WebSockets in the runtime double: the same behaviours as the origin's
`tests/origin/test_live_feed.py` (catch-up then push, visibility, refusals before the upgrade,
reconnects, 100 subscribers, suspension, lease notices), plus what only the edge has: the
Worker's identity headers, the object's alarm, and hibernation.

Writes go through the same Worker over HTTP (`EdgeClient`), so each commit takes the edge's
path: Worker, `ProjectCoordinator.handle`, the commit, then the push to the subscribers.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from aidememo.domain.clock import FixedClock
from aidememo.domain.model import MemberStatus, Role
from tests import pg
from tests.contract.support import (
    EPOCH,
    HERMES,
    LEASE_MS,
    OTHER_PROJECT,
    OUTSIDER,
    PROJECT,
    READER,
    RECEIVER,
    START_MS,
    TENANT,
    WRITER,
    Api,
    P,
)
from tests.edge.backend import EdgeIdentity, postgres_runtime
from tests.edge.runtime import EdgeClient, Runtime
from tests.edge.runtime.harness import BASE_URL
from tests.edge.runtime.websockets import ClientSocket

LIVE = f"{P}/changes/live"
OBJECT = f"{TENANT}/{PROJECT}"


class LiveEdge:
    """A deployment, the contract's `Api` over it, and WebSocket subscriptions."""

    def __init__(self, tmp: Path, *, lease_ms: int = LEASE_MS, db: Any = None) -> None:
        self.clock = FixedClock(START_MS)
        variables = {"HANDOFF_LEASE_MS": str(lease_ms)}
        if db is None:
            self.runtime = Runtime(tmp / "edge", self.clock, vars=variables)
        else:  # STORAGE_MODE=postgres: pg8000 through PgBouncer (transaction pool mode)
            self.runtime = postgres_runtime(tmp / "edge", self.clock, db, vars=variables)
        self.api = Api("edge", EdgeClient(self.runtime), EdgeIdentity(self.runtime), self.clock)  # type: ignore[arg-type]
        for actor in (WRITER, RECEIVER, HERMES):
            self.api.provision(actor, Role.WRITER)
        self.api.provision(READER, Role.READER)
        self.api.provision(OUTSIDER, Role.WRITER, project_id=OTHER_PROJECT, epoch=None)

    @property
    def projects(self) -> Any:
        return self.runtime.namespaces["PROJECTS"]

    def connect(
        self, as_: str | None = WRITER, headers: dict[str, str] | None = None, **query: Any
    ) -> tuple[int, Any, ClientSocket | None]:
        hdrs = dict(headers or {})
        if as_ is not None:
            hdrs["authorization"] = f"Bearer {self.api.tokens[as_]}"
        text = urlencode({k: str(v) for k, v in query.items()})
        status, _, body, client = self.runtime.connect(f"{BASE_URL}{LIVE}?{text}", hdrs)
        return status, (json.loads(body) if body else None), client

    def subscribe(self, as_: str = WRITER, after_seq: int = 0, **query: Any) -> ClientSocket:
        status, body, client = self.connect(as_, project_epoch=EPOCH, after_seq=after_seq, **query)
        assert status == 101, body
        assert client is not None
        return client

    def note(self, note_id: str, as_: str = WRITER) -> int:
        receipt = self.api.put_note(note_id, {"n": note_id}, as_=as_).expect(200)
        return int(receipt["project_seq"])

    def materialized(self, after_seq: int, as_: str = WRITER, **query: Any) -> dict[str, Any]:
        body: dict[str, Any] = self.api.get(
            f"{P}/changes/materialized",
            as_,
            query={"project_epoch": EPOCH, "after_seq": after_seq, **query},
        ).expect(200)
        return body

    def alarm_ms(self) -> int | None:
        storage = self.projects.storages.get(OBJECT)
        return None if storage is None else storage.alarm_ms

    def close(self) -> None:
        self.runtime.close()


@pytest.fixture
def edge(tmp_path: Path) -> Iterator[LiveEdge]:
    made = LiveEdge(tmp_path)
    try:
        yield made
    finally:
        made.close()


def seqs(batch: dict[str, Any]) -> list[int]:
    return [entry["change"]["seq"] for entry in batch["entries"]]


def test_live1_catch_up_then_push(edge: LiveEdge) -> None:
    for i in range(5):
        edge.note(f"n{i}")
    ws = edge.subscribe(limit=2)
    # Catch-up pages are exactly the /changes/materialized pages, all sent before the 101.
    assert ws.recv() == edge.materialized(0, limit=2)
    assert ws.recv() == edge.materialized(2, limit=2)
    last = ws.recv()
    assert last == edge.materialized(4, limit=2)
    assert last["has_more"] is False and seqs(last) == [5]
    assert ws.inbox == []
    # Then every commit as it happens, one batch per commit, same entry shape.
    seq = edge.note("pushed")
    pushed = ws.recv()
    assert pushed == edge.materialized(5)
    assert seqs(pushed) == [seq] and pushed["next_cursor"]["after_seq"] == seq
    assert ws.inbox == [] and not ws.closed


def test_live1_caught_up_subscriber_gets_one_empty_page(edge: LiveEdge) -> None:
    edge.note("a")
    ws = edge.subscribe(after_seq=1)
    page = ws.recv()
    assert page["entries"] == [] and page["has_more"] is False
    assert page["cursor"] == page["next_cursor"] == {"project_epoch": EPOCH, "after_seq": 1}
    edge.note("b")
    assert seqs(ws.recv()) == [2]


def test_live3_vis1_hidden_commits_are_empty_batches(edge: LiveEdge) -> None:
    edge.api.session("s1")
    reader = edge.subscribe(READER, after_seq=1)
    receiver = edge.subscribe(RECEIVER, after_seq=1)
    assert reader.recv()["entries"] == [] and receiver.recv()["entries"] == []
    edge.api.send("h1", "s1", RECEIVER).expect(200)
    hidden = reader.recv()
    assert hidden["entries"] == [] and hidden["next_cursor"]["after_seq"] == 2
    assert hidden["cursor"]["after_seq"] == 1
    seen = receiver.recv()
    assert seqs(seen) == [2] and seen["entries"][0]["resource"]["resource"]["kind"] == "handoff"
    assert seen == edge.materialized(1, as_=RECEIVER)
    assert hidden == edge.materialized(1, as_=READER)
    edge.note("visible")
    assert seqs(reader.recv()) == [3]
    assert seqs(receiver.recv()) == [3]


def test_live3_identity_headers_from_the_client_are_not_trusted(edge: LiveEdge) -> None:
    """The Worker deletes any `x-aidememo-*` header the client sent and sets the identity it
    authenticated: a reader claiming to be the receiver still sees the handoff hidden."""
    edge.api.session("s1")
    edge.api.send("h1", "s1", RECEIVER).expect(200)
    forged = {"x-aidememo-actor": RECEIVER, "x-aidememo-tenant": TENANT}
    status, _, ws = edge.connect(READER, forged, project_epoch=EPOCH, after_seq=1)
    assert status == 101 and ws is not None
    assert ws.recv()["entries"] == []
    # Without a bearer token the forged identity gets nowhere: 401 before the object.
    calls = len(edge.projects.calls)
    status, body, ws = edge.connect(None, forged, project_epoch=EPOCH, after_seq=0)
    assert (status, body["error"]["code"], ws) == (401, "authentication_failed", None)
    assert len(edge.projects.calls) == calls


@pytest.mark.parametrize(
    ("as_", "query", "status", "code"),
    [
        (WRITER, {"project_epoch": "other_epoch", "after_seq": 0}, 409, "cursor_epoch_mismatch"),
        (WRITER, {"project_epoch": EPOCH, "after_seq": 99}, 409, "cursor_out_of_range"),
        (None, {"project_epoch": EPOCH, "after_seq": 0}, 401, "authentication_failed"),
        (OUTSIDER, {"project_epoch": EPOCH, "after_seq": 0}, 403, "project_unauthorized"),
        (WRITER, {"project_epoch": EPOCH}, 400, "invalid_command"),
        (WRITER, {"project_epoch": EPOCH, "after_seq": 0, "x": 1}, 400, "invalid_command"),
        (WRITER, {"project_epoch": EPOCH, "after_seq": 0, "limit": 0}, 400, "invalid_change_batch"),
        (WRITER, {"project_epoch": "bad epoch", "after_seq": 0}, 400, "invalid_identifier"),
        (WRITER, {"project_epoch": EPOCH, "after_seq": 0, "actor_id": RECEIVER}, 400, None),
    ],
)
def test_live1_refused_before_upgrade_like_changes(
    edge: LiveEdge, as_: str | None, query: dict[str, Any], status: int, code: str | None
) -> None:
    edge.note("a")
    ws_status, ws_body, ws = edge.connect(as_, **query)
    changes = edge.api.call("GET", f"{P}/changes", as_=as_, query=query)
    assert ws is None
    assert (ws_status, ws_body["error"]["code"]) == (changes.status, changes.code)
    assert ws_status == status and (code is None or changes.code == code)
    plain = edge.api.call("GET", LIVE, as_=as_, query=query)
    assert (plain.status, plain.code) == (status, changes.code)
    # Nothing was accepted: the object holds no WebSocket.
    assert edge.projects.sockets.get(OBJECT, []) == []


def test_live1_plain_get_is_426_after_every_check(edge: LiveEdge) -> None:
    reply = edge.api.call("GET", LIVE, as_=WRITER, query={"project_epoch": EPOCH, "after_seq": 0})
    assert (reply.status, reply.code) == (426, "upgrade_required")


def test_live1_websocket_elsewhere_is_refused(edge: LiveEdge) -> None:
    hdrs = {"authorization": f"Bearer {edge.api.tokens[WRITER]}"}
    url = f"{BASE_URL}{P}/changes?project_epoch={EPOCH}&after_seq=0"
    status, _, body, ws = edge.runtime.connect(url, hdrs)
    assert (status, json.loads(body)["error"]["code"], ws) == (404, "route_not_found", None)


def test_live1_unknown_project_is_403_and_creates_nothing(edge: LiveEdge) -> None:
    hdrs = {"authorization": f"Bearer {edge.api.tokens[WRITER]}"}
    url = f"{BASE_URL}/v1/projects/project_nowhere/changes/live?project_epoch={EPOCH}&after_seq=0"
    status, _, body, ws = edge.runtime.connect(url, hdrs)
    assert (status, json.loads(body)["error"]["code"], ws) == (403, "project_unauthorized", None)


def test_live1_upgrade_is_rate_limited(tmp_path: Path) -> None:
    made = LiveEdge(tmp_path)
    try:
        made.runtime.env.RATE_LIMITER.limit_per_period = 0
        status, body, ws = made.connect(WRITER, project_epoch=EPOCH, after_seq=0)
        assert (status, body["error"]["code"], ws) == (429, "rate_limited", None)
    finally:
        made.close()


def test_live2_reconnect_from_cursor_without_loss_or_duplication(edge: LiveEdge) -> None:
    for i in range(3):
        edge.note(f"a{i}")
    received: list[int] = []
    ws = edge.subscribe()
    page = ws.recv()
    received += seqs(page)
    edge.note("b0")
    batch = ws.recv()
    received += seqs(batch)
    cursor = batch["next_cursor"]["after_seq"]
    ws.close()
    assert edge.projects.instance(OBJECT).ctx.getWebSockets() == []
    for i in range(4):  # while disconnected
        edge.note(f"c{i}")
    ws = edge.subscribe(after_seq=cursor)
    received += seqs(ws.recv())
    edge.note("d0")
    received += seqs(ws.recv())
    assert ws.inbox == []
    assert received == list(range(1, 10))


def test_live2_100_concurrent_subscribers_get_every_commit_once_in_order(
    edge: LiveEdge,
) -> None:
    store = edge.projects.instance(OBJECT).obj._store
    original = store.read
    reads: list[int] = []

    def counting(fn: Any) -> Any:
        reads.append(1)
        return original(fn)

    store.read = counting
    edge.note("before")
    alone = len(reads)  # the reads of one commit's request without subscribers
    actors = [WRITER, RECEIVER, HERMES, READER]
    subs = [edge.subscribe(actors[i % len(actors)]) for i in range(100)]
    total = 30
    reads.clear()
    for i in range(total):
        edge.note(f"w{i}", as_=actors[i % 3])
    # One shared read per commit, whatever the number of subscribers (LIVE-3).
    assert len(reads) == total * (alone + 1)
    for ws in subs:
        cursor, got = 0, []
        for batch in ws.drain():
            assert batch["cursor"]["after_seq"] == cursor
            got += seqs(batch)
            cursor = batch["next_cursor"]["after_seq"]
        assert got == list(range(1, total + 2))
        assert not ws.closed


# -- LIVE-5: membership ------------------------------------------------------------------------


def _suspend_behind_the_objects_back(edge: LiveEdge, actor: str) -> None:
    """A suspension the object does not hear of (as in PostgreSQL mode, where the Worker
    writes memberships to the database itself): written straight into its store."""
    from aidememo.domain.model import Membership

    store = edge.projects.instance(OBJECT).obj._store
    member = Membership(TENANT, PROJECT, actor, Role.READER, MemberStatus.SUSPENDED)
    store.transaction(lambda tx: tx.put_membership(member, edge.clock.now_ms()))


def test_live5_suspension_through_admin_closes_with_4403_at_once(edge: LiveEdge) -> None:
    reader = edge.subscribe(READER)
    writer = edge.subscribe(WRITER)
    reader.recv(), writer.recv()
    edge.api.set_status(READER, MemberStatus.SUSPENDED)  # no commit, no time passes
    assert reader.recv()["error"]["code"] == "project_unauthorized"
    assert (reader.close_code, reader.close_reason) == (4403, "project_unauthorized")
    assert not writer.closed and writer.inbox == []
    assert len(edge.projects.instance(OBJECT).ctx.getWebSockets()) == 1
    edge.note("after")
    assert seqs(writer.recv()) == [1] and reader.inbox == []


def test_live5_suspension_without_commit_is_found_by_the_alarm_within_5_s(
    edge: LiveEdge,
) -> None:
    edge.projects.cls.live_recheck = True  # what PostgreSQL mode does
    reader = edge.subscribe(READER)
    reader.recv()
    subscribed = edge.clock.now_ms()
    alarm = edge.alarm_ms()
    assert alarm is not None and alarm - subscribed <= 5000
    _suspend_behind_the_objects_back(edge, READER)
    edge.clock.advance(alarm - subscribed)
    assert edge.runtime.fire_alarms() == 1
    assert reader.recv()["error"]["code"] == "project_unauthorized"
    assert reader.close_code == 4403
    assert edge.clock.now_ms() - subscribed <= 5000


def test_live5_alarm_keeps_rechecking_while_subscribers_exist(edge: LiveEdge) -> None:
    edge.projects.cls.live_recheck = True
    ws = edge.subscribe()
    ws.recv()
    for _ in range(3):
        alarm = edge.alarm_ms()
        assert alarm is not None and alarm - edge.clock.now_ms() <= 5000
        edge.clock.advance(alarm - edge.clock.now_ms())
        assert edge.runtime.fire_alarms() == 1
        assert ws.inbox == [] and not ws.closed
    ws.close()
    edge.clock.advance(5000)
    edge.runtime.fire_alarms()
    assert edge.alarm_ms() is None  # no subscriber left: no alarm set again


def test_live5_suspension_is_seen_on_the_next_push(edge: LiveEdge) -> None:
    reader = edge.subscribe(READER)
    reader.recv()
    _suspend_behind_the_objects_back(edge, READER)
    assert reader.inbox == [] and edge.alarm_ms() is None  # SQLite mode: no recheck alarm
    edge.note("after_suspension")
    assert reader.recv()["error"]["code"] == "project_unauthorized"
    assert reader.close_code == 4403


def test_live5_deleted_tenant_closes_with_4403(edge: LiveEdge) -> None:
    ws = edge.subscribe()
    ws.recv()
    status, _, _ = edge.runtime.admin("DELETE", f"/v1/admin/tenants/{TENANT}?confirm={TENANT}")
    assert status == 200
    assert ws.recv()["error"]["code"] == "project_unauthorized"
    assert ws.close_code == 4403


def _revoke(edge: LiveEdge, actor: str) -> None:
    digest = hashlib.sha256(edge.api.tokens[actor].encode()).hexdigest()
    body = {"token_sha256": digest}
    status, _, answer = edge.runtime.admin("POST", "/v1/admin/tokens/revoke", json=body)
    assert status == 200, answer


def test_live5_revoked_token_closes_its_feeds_with_4401_at_once(edge: LiveEdge) -> None:
    """The Worker's revoke reaches every project object of the token's actor, which closes
    the feeds opened with that token; other members' feeds stay open."""
    writer, other = edge.subscribe(WRITER), edge.subscribe(READER)
    writer.recv(), other.recv()
    _revoke(edge, WRITER)  # no commit, no time passes
    assert writer.recv()["error"]["code"] == "authentication_failed"
    assert (writer.close_code, writer.close_reason) == (4401, "authentication_failed")
    assert not other.closed and other.inbox == []
    edge.note("after", as_=RECEIVER)
    assert seqs(other.recv()) == [1]


def test_hibernation_revoked_token_after_waking(edge: LiveEdge) -> None:
    writer = edge.subscribe(WRITER)
    writer.recv()
    edge.projects.hibernate(OBJECT)  # the token digest survives in the attachment
    _revoke(edge, WRITER)
    assert writer.recv()["error"]["code"] == "authentication_failed"
    assert writer.close_code == 4401


def test_live4_client_messages_are_ignored(edge: LiveEdge) -> None:
    ws = edge.subscribe()
    ws.recv()
    ws.send('{"type": "hello"}')
    assert ws.inbox == [] and not ws.closed
    edge.note("a")
    assert seqs(ws.recv()) == [1]


def test_live8_the_object_keeps_no_queue_and_hands_each_message_to_the_runtime(
    edge: LiveEdge,
) -> None:
    """A subscriber that reads nothing: every commit's message is already with the runtime's
    socket when the write is answered (the object holds nothing pending, so LIVE-6's bound
    is the platform's), in order, and the socket is not closed."""
    ws = edge.subscribe()
    ws.recv()
    big = "x" * 200_000
    for i in range(20):
        edge.api.put_note(f"big{i}", {"text": big}).expect(200)
        assert len(ws.inbox) == i + 1  # handed over before the write was answered
    assert not ws.closed
    assert [s for batch in ws.drain() for s in seqs(batch)] == list(range(1, 21))


# -- LIVE-7: lease notices from the object's alarm ------------------------------------------------


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


def test_hibernation_subscribers_survive_and_resume_from_their_cursors(edge: LiveEdge) -> None:
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


def test_hibernation_suspension_after_waking(edge: LiveEdge) -> None:
    reader = edge.subscribe(READER)
    reader.recv()
    edge.projects.hibernate(OBJECT)
    edge.api.set_status(READER, MemberStatus.SUSPENDED)
    assert reader.recv()["error"]["code"] == "project_unauthorized"
    assert reader.close_code == 4403


def test_hibernation_lease_expiring_while_away_is_announced_once(short_lease: LiveEdge) -> None:
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
def test_postgres_catch_up_push_and_visibility(pg_edge: LiveEdge) -> None:
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
def test_postgres_suspension_by_the_worker_is_found_by_the_alarm(pg_edge: LiveEdge) -> None:
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
def test_postgres_revoked_token_is_found_by_the_alarm_with_4401(pg_edge: LiveEdge) -> None:
    """In PostgreSQL mode the Worker revokes on the database; the object's alarm re-check
    reads the tokens too, as the origin's timer does."""
    edge = pg_edge
    writer = edge.subscribe(WRITER)
    writer.recv()
    subscribed = edge.clock.now_ms()
    _revoke(edge, WRITER)
    assert writer.inbox == []
    _fire_recheck_alarm(edge, subscribed)
    assert writer.recv()["error"]["code"] == "authentication_failed"
    assert writer.close_code == 4401


@pytest.mark.postgres
def test_postgres_lease_notice(pg_edge: LiveEdge) -> None:
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
