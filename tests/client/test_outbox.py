"""The durable outbox (`aidememo.client.outbox`, built by `aidememo.cli.agent.queueing`) on every
backend (OUTBOX-1..OUTBOX-6): items survive reopening, fail closed when their profile, payload
or plan changed, and their recorded bytes replay a command that was already committed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from aidememo.cli.agent.profiles import Profile
from aidememo.cli.agent.queueing import binding, publish_items, send_request
from aidememo.client import AidememoUnreachable, AsyncClient, Client
from aidememo.client.outbox import INTENT_PREFIX, ITEM_PREFIX, QUEUED, Outbox, intent_key
from aidememo.domain.command_ids import create_command_id, stable_id
from tests.client.transports import Faulty, async_transport_for, posts_to
from tests.contract.support import PROJECT, RECEIVER, TENANT, WRITER, Api

Connect = Callable[..., tuple[Client, Faulty]]
PROFILE = Profile("codex-a", "http://127.0.0.1:9", TENANT, PROJECT, WRITER, "writer", "t", "d")


def _send_ns(
    session_id: str, handoff_id: str | None = None, focus: str = "gate"
) -> argparse.Namespace:
    return argparse.Namespace(
        session=session_id, to=RECEIVER, focus=focus, done_when=None, context=None, id=handoff_id
    )


def _edit(path: Path, sql: str, *args: object) -> None:
    conn = sqlite3.connect(path)
    conn.execute(sql, args)
    conn.commit()
    conn.close()


def test_outbox2_outbox6_pending_send_is_reused_after_reopen(tmp_path: Path) -> None:
    path = tmp_path / "outbox.sqlite"
    first = send_request(PROFILE, _send_ns("s1"))
    with Outbox(path) as box:
        queued = box.add(binding(PROFILE), first, "unreachable: no answer")
    assert path.stat().st_mode & 0o777 == 0o600
    again = send_request(PROFILE, _send_ns("s1"))  # a new process: a new generated id
    assert again.resource_id != first.resource_id and again.intent == first.intent
    with Outbox(path) as reopened:
        found = reopened.pending(again)
        assert found is not None and found.item == queued.item
        assert found.ids == {"handoff_id": first.resource_id, "command_id": first.command_id}
        other = send_request(PROFILE, _send_ns("s1", focus="another job"))
        assert reopened.pending(other) is None


def test_outbox6_replay_plan_actor_binding_and_last_error_survive_reopen(tmp_path: Path) -> None:
    path = tmp_path / "outbox.sqlite"
    request = send_request(PROFILE, _send_ns("s1", "H1"))
    with Outbox(path) as box:
        box.add(binding(PROFILE), request, "503 service_unavailable: injected server outage")
    with Outbox(path) as reopened:
        (item,) = reopened.items()
    assert (item.state, item.command, item.resource_id) == (QUEUED, "handoff send", "H1")
    assert item.command_id == create_command_id(PROJECT, "handoff", "H1")
    assert item.body == request.body and item.target == request.target
    assert item.base_revision == 0 and "injected server outage" in (item.last_error or "")
    assert item.problem(binding(PROFILE)) is None
    assert item.document()["ids"] == {"handoff_id": "H1", "command_id": item.command_id}


def test_outbox4_changed_profile_generation_fails_closed(tmp_path: Path) -> None:
    with Outbox(tmp_path / "outbox.sqlite") as box:
        item = box.add(binding(PROFILE), send_request(PROFILE, _send_ns("s1")), "lost")
    for field, value in (("url", "https://elsewhere.example"), ("actor_id", "codex-b"),
                         ("project_id", "p2"), ("tenant_id", "t2")):  # fmt: skip
        problem = item.problem({**binding(PROFILE), field: value})
        assert problem is not None and field in problem


def test_outbox4_changed_pending_payload_fails_closed(tmp_path: Path) -> None:
    path = tmp_path / "outbox.sqlite"
    with Outbox(path) as box:
        item = box.add(binding(PROFILE), send_request(PROFILE, _send_ns("s1", "H1")), "lost")
    edited = item.body.replace(b'"to_actor":"codex-p2"', b'"to_actor":"hermes"')
    assert edited != item.body
    _edit(path, "UPDATE items SET body = ? WHERE item = ?", edited, item.item)
    with Outbox(path) as box:
        (changed,) = box.items()
    assert "digest" in (changed.problem(binding(PROFILE)) or "")


def test_outbox4_changed_replay_plan_fails_closed(tmp_path: Path) -> None:
    path = tmp_path / "outbox.sqlite"
    with Outbox(path) as box:
        item = box.add(binding(PROFILE), send_request(PROFILE, _send_ns("s1", "H1")), "lost")
    _edit(path, "UPDATE items SET base_revision = 3 WHERE item = ?", item.item)
    with Outbox(path) as box:
        (changed,) = box.items()
    assert changed.problem(binding(PROFILE)) is not None
    # a plan edited with its digest recomputed still disagrees with the item's columns
    from aidememo.client.outbox import item_digest

    plan = item.plan.replace('"base_revision":0', '"base_revision":5')
    digest = item_digest(item.binding, plan, item.target, item.body)
    _edit(path, "UPDATE items SET base_revision = 0, plan = ?, digest = ? WHERE item = ?",
          plan, digest, item.item)  # fmt: skip
    with Outbox(path) as box:
        (replanned,) = box.items()
    assert "plan" in (replanned.problem(binding(PROFILE)) or "")


def test_outbox3_committed_exact_send_is_recovered_but_not_pending(
    api: Api, connect: Connect, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    writer, transport = connect(WRITER, retries=0)
    sid = writer.create_session("lost send").id
    request = send_request(PROFILE, _send_ns(sid))
    transport.lose_answer(posts_to("/handoffs"))
    with pytest.raises(AidememoUnreachable):  # committed, its answer lost
        writer.send_recorded(request.target, request.body, "handoff", request.resource_id)
    committed = api.status_of(request.resource_id)
    with Outbox(tmp_path / "outbox.sqlite") as box:
        box.add(binding(PROFILE), request, "unreachable: the answer was lost")
        capsys.readouterr()
        assert publish_items(argparse.Namespace(json=True), PROFILE, writer, box) == 0
        report = json.loads(capsys.readouterr().out)
        assert box.items() == []  # recovered is published: nothing is left pending
    assert report["summary"] == "published 1, failed 0, conflicts 0"
    assert report["items"][0]["result"] == "recovered"
    assert report["items"][0]["handoff_id"] == request.resource_id
    assert api.status_of(request.resource_id) == committed


def test_outbox3_commit_marker_is_idempotent_for_same_operation(api: Api, connect: Connect) -> None:
    writer, _ = connect(WRITER)
    sid = writer.create_session("sent twice").id
    request = send_request(PROFILE, _send_ns(sid))
    first = writer.send_recorded(request.target, request.body, "handoff", request.resource_id)
    assert not first.recovered
    for _ in range(2):
        again = writer.send_recorded(request.target, request.body, "handoff", request.resource_id)
        assert again.recovered and again.receipt == first.receipt
    assert api.status_of(request.resource_id)["revision"] == first.receipt.revision


def test_outbox3_changed_committed_send_starts_a_new_assignment(api: Api, connect: Connect) -> None:
    writer, _ = connect(WRITER)
    sid = writer.create_session("two sends").id
    first = send_request(PROFILE, _send_ns(sid))
    done = writer.send_recorded(first.target, first.body, "handoff", first.resource_id)
    assert not done.recovered
    second = send_request(PROFILE, _send_ns(sid))  # the same inputs once nothing is pending
    assert second.intent == first.intent and second.resource_id != first.resource_id
    fresh = writer.send_recorded(second.target, second.body, "handoff", second.resource_id)
    assert not fresh.recovered and fresh.receipt.project_seq > done.receipt.project_seq
    outbox = writer.outbox(include_completed=True)
    ids = {a.record.handoff_id for a in outbox.assignments}
    assert {first.resource_id, second.resource_id} <= ids


def test_outbox4_outbox6_stable_operation_ids_are_repeatable_and_domain_separated() -> None:
    bound = binding(PROFILE)
    inputs = {"session_id": "s1", "to_actor": "b"}
    assert intent_key(bound, "handoff send", inputs) == intent_key(bound, "handoff send", inputs)
    assert intent_key(bound, "handoff send", inputs) != intent_key(
        bound, "handoff send", {**inputs, "to_actor": "c"}
    )
    assert intent_key(bound, "handoff send", inputs) != intent_key(
        {**bound, "actor_id": "x"}, "handoff send", inputs
    )
    parts = ("a", "b", "c", b"d")
    assert stable_id(ITEM_PREFIX, *parts) == stable_id(ITEM_PREFIX, *parts)
    assert stable_id(ITEM_PREFIX, *parts) != stable_id(INTENT_PREFIX, *parts)
    assert stable_id(ITEM_PREFIX, "ab", "c") != stable_id(ITEM_PREFIX, "a", "bc")
    assert create_command_id(PROJECT, "session", "x") != create_command_id(PROJECT, "fact", "x")


def test_outbox3_async_client_replays_recorded_bytes_too(api: Api, connect: Connect) -> None:
    writer, _ = connect(WRITER)
    sid = writer.create_session("async publish").id
    request = send_request(PROFILE, _send_ns(sid))
    first = writer.send_recorded(request.target, request.body, "handoff", request.resource_id)

    async def run() -> None:
        base_url, transport = async_transport_for(api.client)
        async with AsyncClient(base_url, api.tokens[WRITER], PROJECT, transport=transport) as c:
            again = await c.send_recorded(
                request.target, request.body, "handoff", request.resource_id
            )
        assert again.recovered and again.receipt == first.receipt

    asyncio.run(run())
