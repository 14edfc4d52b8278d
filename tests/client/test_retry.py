"""The retry and recovery promises of `aidememo.client` on every backend (CLIENT-1, CLIENT-2).

The faults are injected under the client (`tests.client.transports.Faulty`): a refused
connection never reaches the server; a lost answer reaches it, is applied and committed, and
the client sees only a timeout or a reset, the case the stable ids exist for.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from aidememo.client import AidememoUnreachable, AsyncClient, Client
from tests.client.transports import AsyncAdapter, Faulty, posts_to, transport_for
from tests.contract.support import PROJECT, RECEIVER, WRITER, Api

Connect = Callable[..., tuple[Client, Faulty]]


def _changes_of(client: Client, kind: str, resource_id: str) -> list[int]:
    """The revisions of every change of one resource, in order."""
    batch = client.changes(0, limit=10_000)
    return [
        e.revision for e in batch.entries if (e.resource.kind, e.resource.id) == (kind, resource_id)
    ]


@pytest.mark.parametrize("error", ["ReadTimeout", "RemoteProtocolError", "ReadError"])
def test_client1_client2_lost_answer_is_replayed_not_duplicated(
    api: Api, connect: Connect, error: str
) -> None:
    writer, transport = connect(WRITER)
    sid = writer.create_session("lost answers").id
    fault = transport.lose_answer(posts_to("/facts"), error=error)
    fact = writer.create_fact(sid, "written once, answered once")
    assert fault.hits == 1
    assert fact.recovered
    posts = [body for method, path, body in transport.sent if path.endswith("/facts")]
    assert len(posts) == 2 and posts[0] == posts[1]  # the identical body, sent twice
    assert _changes_of(writer, "fact", fact.id) == [1]  # applied once
    assert writer.get_resource("fact", fact.id).revision == 1


def test_client1_refused_connection_is_retried_and_not_recovered(
    api: Api, connect: Connect
) -> None:
    writer, transport = connect(WRITER)
    transport.refuse(posts_to("/sessions"))
    session = writer.create_session("first attempt never arrived")
    assert not session.recovered
    assert _changes_of(writer, "session", session.id) == [1]


def test_client1_one_retry_then_unreachable(api: Api, connect: Connect) -> None:
    writer, transport = connect(WRITER)
    sid = writer.create_session("retries").id
    transport.refuse(posts_to("/facts"), times=2)
    with pytest.raises(AidememoUnreachable) as failed:
        writer.create_fact(sid, "never arrives", fact_id="fact_unreachable")
    assert failed.value.transport and failed.value.status is None
    assert failed.value.code == "unreachable"
    # Two sends were tried (the call and its one retry); neither reached the server.
    assert not [path for _, path, _ in transport.sent if path.endswith("/facts")]
    assert _changes_of(writer, "fact", "fact_unreachable") == []


def test_client1_retries_zero_gives_up_at_once(api: Api, connect: Connect) -> None:
    writer, transport = connect(WRITER, retries=0)
    sid = writer.create_session("no retries").id
    fault = transport.lose_answer(posts_to("/facts"))
    with pytest.raises(AidememoUnreachable):
        writer.create_fact(sid, "applied, answer lost", fact_id="fact_lost")
    assert fault.hits == 1
    # The server applied it; the same call again replays it and says so.
    again = writer.create_fact(sid, "applied, answer lost", fact_id="fact_lost")
    assert _changes_of(writer, "fact", "fact_lost") == [1]
    assert again.receipt.revision == 1


def test_client1_client2_lost_transition_answers_are_recovered(api: Api, connect: Connect) -> None:
    writer, _ = connect(WRITER)
    receiver, transport = connect(RECEIVER)
    sid = writer.create_session("lost transitions").id
    hid = writer.send_handoff(sid, RECEIVER, focus="recover me").id
    transport.lose_answer(posts_to("/accept"))
    accepted = receiver.accept_handoff(hid)
    assert accepted.recovered
    transport.lose_answer(posts_to("/heartbeat"), error="RemoteProtocolError")
    beat = receiver.heartbeat_handoff(hid)
    assert beat.recovered and beat.claim_id == accepted.claim_id
    fact = receiver.create_fact(sid, "the result")
    transport.lose_answer(posts_to("/return"))
    returned = receiver.return_handoff(hid, fact.id)
    assert returned.recovered
    assert _changes_of(writer, "handoff", hid) == [1, 2, 3, 4]  # send, accept, heartbeat, return
    assert writer.handoff_status(hid).record.status == "completed"


def test_client2_rerun_accept_and_return_report_recovered(api: Api, connect: Connect) -> None:
    """A re-run (a new client, as a new process would be) after an uncertain outcome finds its
    exact command applied: the same claim and command ids, `recovered: true`; the next accept
    after a failed return is a new claim."""
    writer, _ = connect(WRITER)
    first, _ = connect(RECEIVER)
    sid = writer.create_session("re-runs").id
    hid = writer.send_handoff(sid, RECEIVER).id
    accepted = first.accept_handoff(hid)
    assert not accepted.recovered
    again, _ = connect(RECEIVER)
    rerun = again.accept_handoff(hid)
    assert rerun.recovered
    assert (rerun.claim_id, rerun.command_id) == (accepted.claim_id, accepted.command_id)
    assert rerun.receipt == accepted.receipt

    fact = first.create_fact(sid, "it did not work")
    failed = first.return_handoff(hid, fact.id, "failed")
    assert not failed.recovered
    rerun_failed = again.return_handoff(hid, fact.id, "failed", claim_id=accepted.claim_id)
    assert rerun_failed.recovered and rerun_failed.receipt == failed.receipt

    second = again.accept_handoff(hid)
    assert not second.recovered
    assert second.claim_id != accepted.claim_id and second.command_id != accepted.command_id
    assert writer.handoff_status(hid).record.attempt_count == 2
    good = again.create_fact(sid, "now it works")
    done = again.return_handoff(hid, good.id)
    rerun_done = first.return_handoff(hid, good.id)
    assert not done.recovered and rerun_done.recovered
    assert rerun_done.receipt == done.receipt
    assert writer.outbox().assignments[0].record.status == "completed"
    assert _changes_of(writer, "handoff", hid) == [1, 2, 3, 4, 5]


def test_client1_client2_async_lost_answer_is_replayed_not_duplicated(api: Api) -> None:
    """`AsyncClient` runs the same plans: the same retry and the same recovery."""
    base_url, inner = transport_for(api.client)
    faulty = Faulty(inner)

    async def run() -> None:
        async with AsyncClient(
            base_url, api.tokens[WRITER], PROJECT, transport=AsyncAdapter(faulty)
        ) as writer:
            sid = (await writer.create_session("async lost answers")).id
            faulty.lose_answer(posts_to("/facts"), error="RemoteProtocolError")
            fact = await writer.create_fact(sid, "once")
            assert fact.recovered
            entries = (await writer.changes(0, limit=10_000)).entries
            assert [e.revision for e in entries if e.resource.id == fact.id] == [1]

    asyncio.run(run())


def test_client2_cmd7_rerun_create_in_a_new_client_reports_recovered(
    api: Api, connect: Connect
) -> None:
    """A create re-run by a new client (a new process) with the same resource id replays
    under its derived command id and reports `recovered: true` from the server's
    `aidememo-replayed` header; a raw put the same way."""
    first, _ = connect(WRITER)
    again, _ = connect(WRITER)
    made = first.create_session("re-run creates", session_id="s_rerun")
    assert not made.recovered
    rerun = again.create_session("re-run creates", session_id="s_rerun")
    assert rerun.recovered and rerun.receipt == made.receipt
    fact = first.create_fact("s_rerun", "only once", fact_id="f_rerun")
    fact_again = again.create_fact("s_rerun", "only once", fact_id="f_rerun")
    assert not fact.recovered and fact_again.recovered
    assert fact_again.command_id == fact.command_id
    put = first.put_resource("custom.note", "n_rerun", {"v": 1}, command_id="cmd_n_rerun")
    put_again = again.put_resource("custom.note", "n_rerun", {"v": 1}, command_id="cmd_n_rerun")
    assert not put.recovered and put_again.recovered
    assert _changes_of(first, "fact", "f_rerun") == [1]
