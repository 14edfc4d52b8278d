"""Every method of `Client` and `AsyncClient` against every contract backend (CLIENT-1..4).

One handoff round trip per client exercises each member route through the client: identity,
members, sessions, facts, resources, raw commands, search, both change feeds, the snapshot,
contexts, send, status, both mailboxes, accept, heartbeat and return.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from aidememo.client import AidememoClientError, AsyncClient, Client, models
from aidememo.domain import command_ids as ids
from aidememo.http.routes import resolve
from tests.client.transports import Faulty, async_transport_for, transport_for
from tests.contract.support import PROJECT, RECEIVER, WRITER, Api

Connect = Callable[..., tuple[Client, Faulty]]
P = f"/v1/projects/{PROJECT}"


def _route_has(method: str, path: str, param: str | None = None) -> bool:
    """Whether this tree serves the route (and, with `param`, takes that query parameter)."""
    route = resolve(method, path).route
    if route is None:
        return False
    return param is None or any(q.name == param for q in route.query)


SESSION_FACTS = _route_has("GET", f"{P}/sessions/s/facts")
SNAPSHOT_PAGES = _route_has("GET", f"{P}/snapshot", "page_token")


def test_client3_every_sync_method_round_trip(api: Api, connect: Connect) -> None:
    writer, _ = connect(WRITER)
    receiver, _ = connect(RECEIVER)

    assert writer.health().status == "ok"
    me = writer.identity()
    assert (me.project_id, me.actor_id, me.role) == (PROJECT, WRITER, "writer")
    assert {m.actor_id for m in writer.members().members} >= {WRITER, RECEIVER}

    session = writer.create_session("client round trip", source_id="project:client")
    sid = session.id
    assert not session.recovered
    assert session.command_id == ids.create_command_id(PROJECT, "session", sid)
    listed = writer.sessions(source_id="project:client", limit=5)
    assert [s.record.session_id for s in listed.sessions] == [sid]
    assert listed.sessions[0].record.created_by == WRITER

    fact = writer.create_fact(sid, "the client wrote this fact about latency")
    got = writer.get_resource("fact", fact.id)
    assert got.revision == 1 and got.body["content"].startswith("the client wrote")
    found = writer.search("latency", at_least_seq=fact.receipt.project_seq)
    assert [r.fact_id for r in found.results] == [fact.id]
    assert found.index_seq >= fact.receipt.project_seq
    if SESSION_FACTS:
        page = writer.session_facts(sid, limit=10)
        assert [f.record.fact_id for f in page.facts] == [fact.id]

    note = writer.put_resource("custom.note", "note_client", {"z": 2, "a": [1]})
    assert note.receipt.revision == 1
    gone = writer.delete_resource("custom.note", "note_client", expected_revision=1)
    assert gone.receipt.revision == 2
    assert writer.get_resource("custom.note", "note_client").state.state == "deleted"

    hid = "handoff_client"
    context = writer.create_context(hid, sid, RECEIVER, "what to do, in detail")
    sent = writer.send_handoff(sid, RECEIVER, focus="review", context_id=context.id, handoff_id=hid)
    assert sent.command_id == ids.create_command_id(PROJECT, "handoff", hid)
    assert writer.handoff_status(hid).record.status == "pending"
    assert [a.record.handoff_id for a in receiver.inbox().assignments] == [hid]
    assert [a.record.handoff_id for a in writer.outbox().assignments] == [hid]

    accepted = receiver.accept_handoff(hid)
    assert accepted.claim_id == ids.claim_id(PROJECT, RECEIVER, hid, 1)
    assert accepted.command_id == ids.accept_command_id(PROJECT, RECEIVER, hid, accepted.claim_id)
    assert not accepted.recovered
    assert receiver.handoff_status(hid).lease_state == "live"
    beat = receiver.heartbeat_handoff(hid)
    assert beat.claim_id == accepted.claim_id
    assert beat.command_id == ids.heartbeat_command_id(
        PROJECT, RECEIVER, hid, beat.claim_id, accepted.receipt.revision
    )
    result = receiver.create_fact(sid, "the review is done")
    returned = receiver.return_handoff(hid, result.id)
    assert returned.command_id == ids.return_command_id(
        PROJECT, RECEIVER, hid, accepted.claim_id, result.id, "succeeded"
    )
    done = writer.handoff_status(hid)
    assert (done.record.status, done.record.result_fact_id) == ("completed", result.id)
    assert done.lease_state is None
    assert writer.outbox().assignments[0].record.status == "completed"

    head = returned.receipt.project_seq
    batch = writer.changes(0, limit=1000)
    assert batch.next_cursor.after_seq == head and not batch.has_more
    assert [e.seq for e in batch.entries] == list(range(1, head + 1))
    mat = writer.changes_materialized(head - 1)
    assert [e.change.seq for e in mat.entries] == [head]
    assert mat.entries[0].resource.body["status"] == "completed"

    snap = writer.snapshot()
    assert snap.at_seq == head
    coordinates = {(r.resource.kind, r.resource.id) for r in snap.resources}
    assert ("handoff", hid) in coordinates and ("fact", fact.id) in coordinates
    if SNAPSHOT_PAGES:
        pages = list(writer.snapshot_pages(limit=2))
        assert {page.at_seq for page in pages} == {head}
        paged = [(r.resource.kind, r.resource.id) for page in pages for r in page.resources]
        assert sorted(paged) == sorted(coordinates)
    else:
        assert [page.at_seq for page in writer.snapshot_pages()] == [head]


def test_client3_every_async_method_round_trip(api: Api) -> None:
    async def run() -> None:
        def client(actor: str) -> AsyncClient:
            base_url, transport = async_transport_for(api.client)
            return AsyncClient(base_url, api.tokens[actor], PROJECT, transport=transport)

        async with client(WRITER) as writer, client(RECEIVER) as receiver:
            assert (await writer.health()).status == "ok"
            assert (await writer.identity()).actor_id == WRITER
            assert len((await writer.members()).members) >= 2
            sid = (await writer.create_session("async", source_id="project:async")).id
            assert (await writer.sessions()).sessions[0].record.session_id == sid
            fact = await writer.create_fact(sid, "async fact about caching")
            assert (await writer.get_resource("fact", fact.id)).body["session_id"] == sid
            assert [r.fact_id for r in (await writer.search("caching")).results] == [fact.id]
            if SESSION_FACTS:
                assert len((await writer.session_facts(sid)).facts) == 1
            await writer.put_resource("custom.note", "n", {"a": 1})
            await writer.delete_resource("custom.note", "n")
            ctx = await writer.create_context("h_async", sid, RECEIVER, "context")
            sent = await writer.send_handoff(sid, RECEIVER, handoff_id="h_async", context_id=ctx.id)
            assert (await writer.handoff_status(sent.id)).record.context_id == ctx.id
            assert len((await receiver.inbox()).assignments) == 1
            assert len((await writer.outbox()).assignments) == 1
            accepted = await receiver.accept_handoff(sent.id)
            await receiver.heartbeat_handoff(sent.id)
            result = await receiver.create_fact(sid, "async result")
            back = await receiver.return_handoff(sent.id, result.id, "failed")
            assert back.claim_id == accepted.claim_id
            status = await writer.handoff_status(sent.id)
            assert (status.record.status, status.record.outcome) == ("accepted", "failed")
            head = back.receipt.project_seq
            assert (await writer.changes()).entries[0].seq == 1
            assert (await writer.changes_materialized(head - 1)).entries[0].change.seq == head
            assert (await writer.snapshot()).at_seq == head
            pages = [page async for page in writer.snapshot_pages()]
            assert pages[0].at_seq == head

    asyncio.run(run())


def test_client4_refusals_carry_the_servers_code_status_and_message(
    api: Api, connect: Connect
) -> None:
    writer, transport = connect(WRITER)
    with pytest.raises(AidememoClientError) as missing:
        writer.create_fact("no_such_session", "text")
    assert (missing.value.code, missing.value.status) == ("resource_not_found", 404)
    assert missing.value.message and not missing.value.transport
    reader, _ = connect("reader_actor")
    with pytest.raises(AidememoClientError) as refused:
        reader.create_session("a reader may not write")
    assert (refused.value.code, refused.value.status) == ("project_unauthorized", 403)
    sid = writer.create_session("stale").id
    hid = writer.send_handoff(sid, RECEIVER).id
    with pytest.raises(AidememoClientError) as mismatch:
        writer.accept_handoff(hid)  # the sender is not the receiver
    assert (mismatch.value.code, mismatch.value.status) == ("handoff_actor_mismatch", 403)
    before = len(transport.sent)
    with pytest.raises(AidememoClientError) as bad:
        writer.create_fact(sid, "x", fact_id="not an id")
    assert (bad.value.code, bad.value.status) == ("invalid_identifier", None)
    assert len(transport.sent) == before  # refused before anything was sent


def test_client4_wrong_token_is_authentication_failed(api: Api) -> None:
    base_url, transport = transport_for(api.client)
    with Client(base_url, "not-a-member-token", PROJECT, transport=transport) as client:
        with pytest.raises(AidememoClientError) as failed:
            client.identity()
    assert (failed.value.code, failed.value.status) == ("authentication_failed", 401)


def test_client4_models_are_typed(api: Api, connect: Connect) -> None:
    writer, _ = connect(WRITER)
    written = writer.create_session("typed")
    assert isinstance(written, models.Written)
    assert isinstance(written.receipt, models.Receipt)
    assert isinstance(writer.sessions().sessions[0].record, models.SessionRecord)


def test_client3_omitted_ids_are_ulids_and_command_ids_are_derived(
    api: Api, connect: Connect
) -> None:
    writer, transport = connect(WRITER)
    session = writer.create_session("generated ids")
    fact = writer.create_fact(session.id, "an id of its own")
    note = writer.put_resource("custom.note", "note_ids", {"a": 1})
    for written in (session, fact, note):
        assert len(written.id if written is not note else written.command_id) == 26
    assert fact.command_id == ids.create_command_id(PROJECT, "fact", fact.id)
    assert session.command_id == ids.create_command_id(PROJECT, "session", session.id)
    assert writer.get_resource("fact", fact.id).body["fact_id"] == fact.id
    assert [path for _, path, _ in transport.sent].count(f"{P}/facts") == 1


def test_client3_a_keyword_a_method_does_not_take_is_refused_before_sending(
    api: Api, connect: Connect
) -> None:
    writer, transport = connect(WRITER)
    for call in (
        lambda: writer.create_fact("s", "c", source_id="x"),
        lambda: writer.send_handoff("s", "a", fokus="x"),
        lambda: writer.accept_handoff("h", claim="x"),
        lambda: writer.return_handoff("h", "f", result_artifact="x"),
    ):
        with pytest.raises(TypeError, match="unexpected keyword argument"):
            call()
    assert transport.sent == []


def test_client4_a_body_that_is_not_json_is_refused_before_sending(
    api: Api, connect: Connect
) -> None:
    writer, transport = connect(WRITER)
    sid = writer.create_session("not json").id
    before = len(transport.sent)
    for payload in ({"x": float("nan")}, {"x": "\ud800"}, {"x": object()}):
        with pytest.raises(AidememoClientError) as refused:
            writer.put_resource("custom.note", "n", payload)
        assert (refused.value.code, refused.value.status) == ("invalid_command", None)
    with pytest.raises(AidememoClientError):
        writer.create_fact(sid, "lone \udc00 surrogate")
    assert len(transport.sent) == before
