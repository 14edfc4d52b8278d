"""The live change feed at the edge (SPEC.md LIVE-*), through `Default.fetch` and the project
object's hibernatable WebSockets in the runtime double: the same behaviours as the origin's
`tests/origin/test_live_feed.py` (catch-up then push, visibility, refusals before the upgrade,
reconnects, 100 subscribers, suspension, lease notices), plus what only the edge has: the
Worker's identity headers, the object's alarm, and hibernation.

Writes go through the same Worker over HTTP (`EdgeClient`), so each commit takes the edge's
path: Worker, `ProjectCoordinator.handle`, the commit, then the push to the subscribers.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from aidememo.domain.model import MemberStatus, Role
from tests.contract.support import (
    EPOCH,
    HERMES,
    OUTSIDER,
    PROJECT,
    READER,
    RECEIVER,
    TENANT,
    WRITER,
    P,
)
from tests.edge.live_support import LIVE, OBJECT, LiveEdge, edge, revoke, seqs
from tests.edge.runtime.harness import BASE_URL

__all__ = ["edge"]  # the fixture, used by name


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


def test_live5_revoked_token_closes_its_feeds_with_4401_at_once(edge: LiveEdge) -> None:
    """The Worker's revoke reaches every project object of the token's actor, which closes
    the feeds opened with that token; other members' feeds stay open."""
    writer, other = edge.subscribe(WRITER), edge.subscribe(READER)
    writer.recv(), other.recv()
    revoke(edge, WRITER)  # no commit, no time passes
    assert writer.recv()["error"]["code"] == "authentication_failed"
    assert (writer.close_code, writer.close_reason) == (4401, "authentication_failed")
    assert not other.closed and other.inbox == []
    edge.note("after", as_=RECEIVER)
    assert seqs(other.recv()) == [1]


def test_live5_hibernation_revoked_token_after_waking(edge: LiveEdge) -> None:
    writer = edge.subscribe(WRITER)
    writer.recv()
    edge.projects.hibernate(OBJECT)  # the token digest survives in the attachment
    revoke(edge, WRITER)
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
