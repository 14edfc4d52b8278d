"""Read paths: visibility (VIS-1) on every one, change feed cursors (FEED-*), snapshot
(SNAP-*) and mailbox paging (MBX-*)."""

from __future__ import annotations

from typing import Any

from tests.contract.support import EPOCH, HERMES, PROJECT, READER, RECEIVER, TENANT, WRITER, Api, P

SESSION = "session_reads"


def _private_route(api: Api) -> None:
    """seq 1 session, 2 context, 3 handoff (codex-p1 -> codex-p2), 4 a public note."""
    api.session(SESSION, source_id="project:reads")
    ctx = {
        "command_id": "cmd_ctx",
        "payload": {
            "context_id": "ctx_private",
            "handoff_id": "h_private",
            "session_id": SESSION,
            "to_actor": RECEIVER,
            "content": "secret context",
        },
    }
    api.post(f"{P}/handoff-contexts", ctx).expect(200)
    api.send("h_private", SESSION, RECEIVER, context_id="ctx_private").expect(200)
    api.put_note("note_public", {"n": 1}).expect(200)


def _feed(api: Api, route: str, actor: str, after: int, limit: int = 100) -> dict[str, Any]:
    query: dict[str, str | int] = {"project_epoch": EPOCH, "after_seq": after, "limit": limit}
    result: dict[str, Any] = api.get(f"{P}/{route}", actor, query=query).expect(200)
    return result


def _kinds(entries: list[dict[str, Any]]) -> list[str]:
    return [(e.get("change") or e)["resource"]["kind"] for e in entries]


def test_vis1_participant_records_hidden_on_every_read_path(api: Api) -> None:
    _private_route(api)
    for outsider in (HERMES, READER):
        api.get(f"{P}/handoffs/h_private", outsider).expect(403, "handoff_actor_mismatch")
        api.get(f"{P}/resources/handoff/h_private", outsider).expect(404, "resource_not_found")
        api.get(f"{P}/resources/handoff_context/ctx_private", outsider).expect(
            404, "resource_not_found"
        )
        snap = api.get(f"{P}/snapshot", outsider).expect(200)
        assert sorted(r["resource"]["kind"] for r in snap["resources"]) == [
            "custom.note",
            "session",
        ]
        assert snap["at_seq"] == 4
        for route in ("changes", "changes/materialized"):
            assert _kinds(_feed(api, route, outsider, 0)["entries"]) == ["session", "custom.note"]
            page = _feed(api, route, outsider, 1, 2)
            assert page["entries"] == []
            assert page["next_cursor"]["after_seq"] == 3
            assert page["has_more"] is True
            last = _feed(api, route, outsider, 3, 2)
            assert _kinds(last["entries"]) == ["custom.note"]
            assert (last["next_cursor"]["after_seq"], last["has_more"]) == (4, False)
        inbox = api.get(f"{P}/handoffs", outsider, query="box=inbox").expect(200)
        assert inbox["assignments"] == []
    for participant in (WRITER, RECEIVER):
        api.get(f"{P}/handoffs/h_private", participant).expect(200)
        for route in ("changes", "changes/materialized"):
            assert _kinds(_feed(api, route, participant, 0)["entries"]) == [
                "session",
                "handoff_context",
                "handoff",
                "custom.note",
            ]


def test_feed1_entry_shapes(api: Api) -> None:
    _private_route(api)
    change = _feed(api, "changes", RECEIVER, 2, 1)["entries"][0]
    assert change == {
        "tenant_id": TENANT,
        "project_id": PROJECT,
        "project_epoch": EPOCH,
        "seq": 3,
        "resource": {"kind": "handoff", "id": "h_private"},
        "operation": "upsert",
        "revision": 1,
        "actor_id": WRITER,
        "committed_at_ms": api.clock.value,
    }
    entry = _feed(api, "changes/materialized", RECEIVER, 2, 1)["entries"][0]
    assert entry["change"] == change
    resource = entry["resource"]
    assert resource["scope"] == {"tenant_id": TENANT, "project_id": PROJECT}
    assert resource["resource"] == {"kind": "handoff", "id": "h_private"}
    assert resource["revision"] == 1
    assert resource["state"]["state"] == "present"
    assert resource["state"]["body"]["to_actor"] == RECEIVER


def test_feed1_rec3_materialized_keeps_each_revision_and_tombstones(api: Api) -> None:
    api.put_note("n", {"v": 1}).expect(200)
    api.post(
        "/v1/commands",
        {
            "command_id": "cmd_v2",
            "project_id": PROJECT,
            "expected_revision": 1,
            "operation": "resource.put",
            "resource": {"kind": "custom.note", "id": "n"},
            "change": "upsert",
            "payload": {"v": 2},
        },
    ).expect(200)
    api.post(
        "/v1/commands",
        {
            "command_id": "cmd_del",
            "project_id": PROJECT,
            "expected_revision": 2,
            "operation": "resource.delete",
            "resource": {"kind": "custom.note", "id": "n"},
            "change": "delete",
            "payload": None,
        },
    ).expect(200)
    entries = _feed(api, "changes/materialized", READER, 0)["entries"]
    assert [e["resource"]["state"] for e in entries] == [
        {"state": "present", "body": {"v": 1}},
        {"state": "present", "body": {"v": 2}},
        {"state": "deleted"},
    ]
    assert [e["change"]["operation"] for e in entries] == ["upsert", "upsert", "delete"]
    snap = api.get(f"{P}/snapshot", READER).expect(200)
    assert snap["resources"][0]["state"] == {"state": "deleted"}
    assert snap["resources"][0]["revision"] == 3


def test_feed2_feed3_cursor_failures_fail_closed(api: Api) -> None:
    api.put_note("n", {"v": 1}).expect(200)
    for route in ("changes", "changes/materialized"):
        api.get(f"{P}/{route}", query={"project_epoch": "epoch_other", "after_seq": 0}).expect(
            409, "cursor_epoch_mismatch"
        )
        api.get(f"{P}/{route}", query={"project_epoch": EPOCH, "after_seq": 2}).expect(
            409, "cursor_out_of_range"
        )
        api.get(f"{P}/{route}", query={"project_epoch": "bad epoch", "after_seq": 0}).expect(
            400, "invalid_identifier"
        )
        api.get(f"{P}/{route}", query={"project_epoch": EPOCH, "after_seq": -1}).expect(
            400, "invalid_command"
        )
        head = _feed(api, route, WRITER, 1)
        assert (head["entries"], head["has_more"], head["next_cursor"]["after_seq"]) == (
            [],
            False,
            1,
        )


def test_snap1_snapshot_shape(api: Api) -> None:
    empty = api.get(f"{P}/snapshot", READER).expect(200)
    assert empty == {
        "scope": {"tenant_id": TENANT, "project_id": PROJECT},
        "project_epoch": EPOCH,
        "at_seq": 0,
        "resources": [],
        "next_page_token": None,
    }
    api.put_note("n", {"v": 1}).expect(200)
    snap = api.get(f"{P}/snapshot", READER).expect(200)
    assert snap["resources"] == [
        {
            "scope": {"tenant_id": TENANT, "project_id": PROJECT},
            "resource": {"kind": "custom.note", "id": "n"},
            "revision": 1,
            "state": {"state": "present", "body": {"v": 1}},
        }
    ]


def test_mbx2_paging_newest_first_with_exclusive_before_seq(api: Api) -> None:
    api.session(SESSION, source_id="project:reads")
    sent = [f"h{i:02d}" for i in range(25)]
    for handoff_id in sent:
        api.send(handoff_id, SESSION, RECEIVER).expect(200)
    default = api.get(f"{P}/handoffs", RECEIVER, query="box=inbox").expect(200)
    assert len(default["assignments"]) == 20  # default limit
    seen: list[str] = []
    before: int | None = None
    while True:
        query = "box=inbox&limit=7" + ("" if before is None else f"&before_seq={before}")
        page = api.get(f"{P}/handoffs", RECEIVER, query=query).expect(200)
        seqs = [a["project_seq"] for a in page["assignments"]]
        assert seqs == sorted(seqs, reverse=True)
        if before is not None:
            assert all(s < before for s in seqs)
        seen += [a["record"]["handoff_id"] for a in page["assignments"]]
        before = page["next_before_seq"]
        if before is None:
            break
        assert before == seqs[-1]
    assert seen == list(reversed(sent))
    # a transition moves the handoff to the top of both boxes
    api.transition("h00", "accept", {"claim_id": "k"}, 1).expect(200)
    top = api.get(f"{P}/handoffs", RECEIVER, query="box=inbox&limit=1").expect(200)
    assert top["assignments"][0]["record"]["handoff_id"] == "h00"
    assert top["assignments"][0]["revision"] == 2
    out = api.get(f"{P}/handoffs", WRITER, query="box=outbox&limit=100").expect(200)
    assert out["assignments"][0]["record"]["handoff_id"] == "h00"
    assert len(out["assignments"]) == 25
    assert out["next_before_seq"] is None
    api.get(f"{P}/handoffs", RECEIVER, query="box=inbox&limit=100").expect(200)


def test_mbx1_inbox_hides_completed_by_default_outbox_shows_it(api: Api) -> None:
    api.session(SESSION, source_id="project:reads")
    api.send("h_done", SESSION, RECEIVER).expect(200)
    api.send("h_open", SESSION, RECEIVER).expect(200)
    api.transition("h_done", "accept", {"claim_id": "k"}, 1).expect(200)
    api.fact("f_done", SESSION, "done", as_=RECEIVER)
    api.transition(
        "h_done", "return", {"claim_id": "k", "result_fact_id": "f_done", "outcome": "succeeded"}, 2
    ).expect(200)

    def ids(actor: str, query: str) -> list[str]:
        page = api.get(f"{P}/handoffs", actor, query=query).expect(200)
        return [a["record"]["handoff_id"] for a in page["assignments"]]

    assert ids(RECEIVER, "box=inbox") == ["h_open"]
    assert ids(RECEIVER, "box=inbox&include_completed=false") == ["h_open"]
    assert ids(RECEIVER, "box=inbox&include_completed=true") == ["h_done", "h_open"]
    assert ids(WRITER, "box=outbox") == ["h_done", "h_open"]
    assert ids(WRITER, "box=outbox&include_completed=false") == ["h_open"]
    assert ids(RECEIVER, "box=outbox") == []
    assert ids(WRITER, "box=inbox&include_completed=true") == []
