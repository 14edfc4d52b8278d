"""Anchor 3.4 A-C (`http_api.rs`), ported case by case onto every backend."""

from __future__ import annotations

from typing import Any

from tests.contract.support import (
    EPOCH,
    HERMES,
    PROJECT,
    READER,
    RECEIVER,
    TENANT,
    WRITER,
    Api,
    P,
)

SOURCE = "project:aidememo"
SESSION = "session_remote"
RECEIPT_KEYS = {
    "command_id",
    "fingerprint",
    "tenant_id",
    "project_id",
    "actor_id",
    "project_seq",
    "resource",
    "revision",
    "committed_at_ms",
}


def _raw_fact_put(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "command_id": "cmd_raw_fact",
        "project_id": PROJECT,
        "expected_revision": None,
        "operation": "resource.put",
        "resource": {"kind": "fact", "id": "fact_raw"},
        "change": "upsert",
        "payload": {"content": "x"},
    }
    body.update(overrides)
    return body


# -- A ---------------------------------------------------------------------------------------


def test_ready2_http_a_health_reports_mode_and_schema_version(api: Api) -> None:
    body = api.get("/health", None).expect(200)
    assert body["status"] == "ok"
    assert body["mode"] in ("single_node", "postgres", "edge")
    assert isinstance(body["schema_version"], int) and body["schema_version"] >= 1
    assert set(body) == {"status", "mode", "schema_version", "state"}
    assert body["state"] == "ok"


def test_ready1_ready3_ready_answers_200_ok_with_the_mode(api: Api) -> None:
    reply = api.call("GET", "/ready")
    body = reply.expect(200)
    assert body == {
        "ready": True,
        "mode": api.get("/health", None).expect(200)["mode"],
        "state": "ok",
    }
    assert "retry-after" not in reply.headers
    api.get("/ready", None, query="x=1").expect(400, "invalid_command")
    api.call("POST", "/ready").expect(405, "method_not_allowed")


def test_auth3_http_a_identity_comes_from_the_token(api: Api) -> None:
    assert api.get(f"{P}/identity", WRITER).expect(200) == {
        "tenant_id": TENANT,
        "project_id": PROJECT,
        "project_epoch": EPOCH,
        "actor_id": WRITER,
        "role": "writer",
    }
    assert api.get(f"{P}/identity", RECEIVER).expect(200)["actor_id"] == RECEIVER
    assert api.get(f"{P}/identity", READER).expect(200)["role"] == "reader"
    api.get(f"{P}/identity", None).expect(401, "authentication_failed")


def test_auth2_cmd2_cmd4_http_a_authentication_and_identity_override_fail_closed(api: Api) -> None:
    api.post("/v1/commands", _raw_fact_put(), None).expect(401, "authentication_failed")
    api.call("POST", "/v1/commands", token="unknown-token", json=_raw_fact_put()).expect(
        401, "authentication_failed"
    )
    api.post("/v1/commands", _raw_fact_put(operation="fact.add")).expect(400, "invalid_command")
    reply = api.post("/v1/commands", _raw_fact_put())
    reply.expect(400, "invalid_command")
    assert "custom.*" in reply.body["error"]["message"]
    api.post("/v1/commands", _raw_fact_put(tenant_id=TENANT)).expect(400, "invalid_command")
    # nothing was written by any of these
    assert api.head() == 0


# -- B ---------------------------------------------------------------------------------------


def _note_put(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "command_id": "command_note_http",
        "project_id": PROJECT,
        "expected_revision": None,
        "operation": "resource.put",
        "resource": {"kind": "custom.note", "id": "note_http"},
        "change": "upsert",
        "payload": {"z": 2, "a": {"d": 4, "b": 3}},
    }
    body.update(overrides)
    return body


def test_cmd3_rev1_writer_round_trip_and_reader_boundary(api: Api) -> None:
    first = api.post("/v1/commands", _note_put()).expect(200)
    assert set(first) == RECEIPT_KEYS
    assert (first["project_seq"], first["revision"]) == (1, 1)
    assert first["resource"] == {"kind": "custom.note", "id": "note_http"}
    assert (first["tenant_id"], first["project_id"], first["actor_id"]) == (
        TENANT,
        PROJECT,
        WRITER,
    )
    assert len(first["fingerprint"]) == 64
    api.clock.advance(5)
    assert api.post("/v1/commands", _note_put()).expect(200) == first
    other = {"kind": "custom.note", "id": "note_other"}
    api.post("/v1/commands", _note_put(resource=other)).expect(409, "command_conflict")
    api.post("/v1/commands", _note_put(payload={"z": 3})).expect(409, "command_conflict")

    resource = api.get(f"{P}/resources/custom.note/note_http", READER).expect(200)
    assert resource["state"]["state"] == "present"
    assert resource["state"]["body"] == {"a": {"b": 3, "d": 4}, "z": 2}
    assert resource["state"]["body"]["a"]["b"] == 3
    assert resource["revision"] == 1
    assert resource["scope"] == {"tenant_id": TENANT, "project_id": PROJECT}
    changes = api.get(
        f"{P}/changes", READER, query={"project_epoch": EPOCH, "after_seq": 0}
    ).expect(200)
    assert len(changes["entries"]) == 1
    assert changes["entries"][0]["actor_id"] == WRITER

    reader_put = _note_put(command_id="command_reader")
    api.post("/v1/commands", reader_put, READER).expect(403, "project_unauthorized")
    assert api.head() == 1


def test_rev2_raw_delete_needs_null_payload_and_leaves_a_tombstone(api: Api) -> None:
    api.post("/v1/commands", _note_put()).expect(200)
    delete = _note_put(
        command_id="command_delete",
        operation="resource.delete",
        change="delete",
        payload=None,
        expected_revision=2,
    )
    api.post("/v1/commands", delete).expect(409, "stale_revision")
    receipt = api.post("/v1/commands", {**delete, "command_id": "cd2", "expected_revision": 1})
    assert receipt.expect(200)["revision"] == 2
    state = api.get(f"{P}/resources/custom.note/note_http").expect(200)
    assert state["state"] == {"state": "deleted"}
    missing = _note_put(
        command_id="cd3", expected_revision=1, resource={"kind": "custom.x", "id": "n"}
    )
    api.post("/v1/commands", missing).expect(404, "resource_not_found")


# -- C ---------------------------------------------------------------------------------------


def _session_body() -> dict[str, Any]:
    return {
        "command_id": "command_session_remote",
        "payload": {"session_id": SESSION, "source_id": SOURCE, "topic": "remote handoffs"},
    }


def _context_body() -> dict[str, Any]:
    return {
        "command_id": "command_context_p2",
        "payload": {
            "context_id": "context_p2",
            "handoff_id": "handoff_p2",
            "session_id": SESSION,
            "to_actor": RECEIVER,
            "content": "context for codex-p2",
        },
    }


def _send_body(handoff_id: str, **payload: Any) -> dict[str, Any]:
    return {
        "command_id": f"command_send_{handoff_id}",
        "payload": {
            "handoff_id": handoff_id,
            "session_id": SESSION,
            "to_actor": RECEIVER,
            **payload,
        },
    }


def _setup_c(api: Api) -> dict[str, Any]:
    """Steps C.1-C.2: a session, a context and two handoffs to codex-p2."""
    session = api.post(f"{P}/sessions", _session_body()).expect(200)
    api.post(f"{P}/handoff-contexts", _context_body()).expect(200)
    first = api.post(
        f"{P}/handoffs", _send_body("handoff_p2", context_id="context_p2", focus="review")
    ).expect(200)
    second = api.post(f"{P}/handoffs", _send_body("handoff_p2_second")).expect(200)
    return {"session": session, "first": first, "second": second}


def _accept(api: Api, handoff_id: str, claim: str, revision: int, as_: str = RECEIVER) -> Any:
    body = {
        "command_id": f"command_accept_{handoff_id}",
        "expected_revision": revision,
        "payload": {"claim_id": claim},
    }
    return api.post(f"{P}/handoffs/{handoff_id}/accept", body, as_)


def _return(
    api: Api, handoff_id: str, claim: str, fact: str, revision: int, tag: str, as_: str = RECEIVER
) -> Any:
    body = {
        "command_id": f"command_return_{handoff_id}_{tag}",
        "expected_revision": revision,
        "payload": {"claim_id": claim, "result_fact_id": fact, "outcome": "succeeded"},
    }
    return api.post(f"{P}/handoffs/{handoff_id}/return", body, as_)


def _complete_c(api: Api) -> dict[str, Any]:
    """Steps C.5-C.7: accept, evidence facts, the failed returns and the correct one."""
    state = _setup_c(api)
    state["accept"] = _accept(api, "handoff_p2", "claim_p2", 1).expect(200)
    api.fact("fact_p2_result", SESSION, "codex-p2 result", as_=RECEIVER)
    api.fact("fact_hermes_result", SESSION, "hermes result", as_=HERMES)
    state["return"] = _return(api, "handoff_p2", "claim_p2", "fact_p2_result", 2, "ok").expect(200)
    return state


def test_cmd3_typ3_http_c1_session_create_replay_and_foreign_actor_conflict(api: Api) -> None:
    receipt = api.post(f"{P}/sessions", _session_body()).expect(200)
    assert receipt["revision"] == 1
    assert receipt["resource"] == {"kind": "session", "id": SESSION}
    assert api.post(f"{P}/sessions", _session_body()).expect(200) == receipt
    api.post(f"{P}/sessions", _session_body(), RECEIVER).expect(409, "command_conflict")
    body = api.get(f"{P}/resources/session/{SESSION}").expect(200)["state"]["body"]
    assert body == {
        "session_id": SESSION,
        "source_id": SOURCE,
        "topic": "remote handoffs",
        "created_by": WRITER,
    }
    # a fresh command id on the same session is a create of an existing resource
    fresh = {**_session_body(), "command_id": "command_session_again"}
    api.post(f"{P}/sessions", fresh).expect(409, "resource_already_exists")


def test_ho1_context_and_two_sends(api: Api) -> None:
    state = _setup_c(api)
    assert state["first"]["revision"] == 1
    assert state["second"]["revision"] == 1
    status = api.status_of("handoff_p2")
    assert status["revision"] == 1
    assert status["record"] == {
        "handoff_id": "handoff_p2",
        "session_id": SESSION,
        "source_id": SOURCE,
        "from_actor": WRITER,
        "to_actor": RECEIVER,
        "focus": "review",
        "done_when": None,
        "context_id": "context_p2",
        "status": "pending",
        "claim_id": None,
        "claim_heartbeat_at_ms": None,
        "claim_expires_at_ms": None,
        "attempt_count": 0,
        "result_fact_id": None,
        "outcome": None,
    }
    context = api.get(f"{P}/resources/handoff_context/context_p2", RECEIVER).expect(200)
    assert context["state"]["body"] == {
        "context_id": "context_p2",
        "handoff_id": "handoff_p2",
        "session_id": SESSION,
        "source_id": SOURCE,
        "from_actor": WRITER,
        "to_actor": RECEIVER,
        "content": "context for codex-p2",
    }


def test_typ4_http_c2_context_for_another_route_is_handoff_conflict(api: Api) -> None:
    _setup_c(api)
    # context_p2 names handoff_p2 and codex-p2; using it elsewhere is refused
    wrong_handoff = _send_body("handoff_x", context_id="context_p2")
    api.post(f"{P}/handoffs", wrong_handoff).expect(409, "handoff_conflict")
    wrong_receiver = {
        "command_id": "command_send_hermes_ctx",
        "payload": {
            "handoff_id": "handoff_p2",
            "session_id": SESSION,
            "to_actor": HERMES,
            "context_id": "context_p2",
        },
    }
    api.post(f"{P}/handoffs", wrong_receiver).expect(409, "handoff_conflict")


def test_mbx1_mbx2_http_c3_inbox_pages_newest_first_with_exclusive_before_seq(api: Api) -> None:
    _setup_c(api)
    page = api.get(f"{P}/handoffs", RECEIVER, query="box=inbox&limit=1").expect(200)
    assert [a["record"]["handoff_id"] for a in page["assignments"]] == ["handoff_p2_second"]
    assert page["next_before_seq"] == page["assignments"][0]["project_seq"]
    page2 = api.get(
        f"{P}/handoffs", RECEIVER, query=f"box=inbox&limit=1&before_seq={page['next_before_seq']}"
    ).expect(200)
    assert [a["record"]["handoff_id"] for a in page2["assignments"]] == ["handoff_p2"]
    assert page2["next_before_seq"] is None
    assert page2["assignments"][0]["revision"] == 1
    api.get(f"{P}/handoffs", RECEIVER, query="box=inbox&actor_id=hermes").expect(
        400, "invalid_command"
    )
    inbox = api.get(f"{P}/handoffs", WRITER, query="box=inbox").expect(200)
    assert inbox == {"assignments": [], "next_before_seq": None}
    outbox = api.get(f"{P}/handoffs", WRITER, query="box=outbox").expect(200)
    assert len(outbox["assignments"]) == 2
    other = api.get(f"{P}/handoffs", RECEIVER, query="box=inbox&source_id=project:other")
    assert other.expect(200)["assignments"] == []
    same = api.get(f"{P}/handoffs", RECEIVER, query=f"box=inbox&source_id={SOURCE}")
    assert len(same.expect(200)["assignments"]) == 2


def test_typ4_http_c4_send_to_reader_is_400(api: Api) -> None:
    _setup_c(api)
    body = {
        "command_id": "command_send_reader",
        "payload": {"handoff_id": "handoff_reader", "session_id": SESSION, "to_actor": READER},
    }
    api.post(f"{P}/handoffs", body).expect(400, "invalid_command")


def test_ho2_ho7_http_c5_only_the_receiver_accepts(api: Api) -> None:
    _setup_c(api)
    _accept(api, "handoff_p2", "claim_p2", 1, as_=WRITER).expect(403, "handoff_actor_mismatch")
    _accept(api, "handoff_p2", "claim_p2", 1, as_=HERMES).expect(403, "handoff_actor_mismatch")
    receipt = _accept(api, "handoff_p2", "claim_p2", 1).expect(200)
    assert receipt["revision"] == 2
    assert receipt["actor_id"] == RECEIVER
    record = api.status_of("handoff_p2")["record"]
    assert (record["status"], record["claim_id"], record["attempt_count"]) == (
        "accepted",
        "claim_p2",
        1,
    )


def test_ho4_return_evidence_and_claim_are_checked(api: Api) -> None:
    _setup_c(api)
    _accept(api, "handoff_p2", "claim_p2", 1).expect(200)
    api.fact("fact_p2_result", SESSION, "codex-p2 result", as_=RECEIVER)
    api.fact("fact_hermes_result", SESSION, "hermes result", as_=HERMES)
    _return(api, "handoff_p2", "claim_p2", "fact_hermes_result", 2, "hermes").expect(
        409, "handoff_conflict"
    )
    _return(api, "handoff_p2", "claim_other", "fact_p2_result", 2, "other").expect(
        409, "handoff_conflict"
    )
    _return(api, "handoff_p2", "claim_p2", "fact_missing", 2, "missing").expect(
        404, "resource_not_found"
    )
    # a fact of another session (same actor) is no evidence either
    api.session("session_else", source_id=SOURCE, as_=RECEIVER)
    api.fact("fact_else", "session_else", "elsewhere", as_=RECEIVER)
    _return(api, "handoff_p2", "claim_p2", "fact_else", 2, "else").expect(409, "handoff_conflict")
    receipt = _return(api, "handoff_p2", "claim_p2", "fact_p2_result", 2, "ok").expect(200)
    assert receipt["revision"] == 3


def test_cmd3_http_c8_accept_replayed_after_completion_returns_the_original_receipt(
    api: Api,
) -> None:
    state = _complete_c(api)
    api.clock.advance(1_000_000)
    assert _accept(api, "handoff_p2", "claim_p2", 1).expect(200) == state["accept"]
    again = _return(api, "handoff_p2", "claim_p2", "fact_p2_result", 2, "ok").expect(200)
    assert again == state["return"]


def test_ho4_mbx1_http_c9_status_and_inbox_after_completion(api: Api) -> None:
    _complete_c(api)
    status = api.status_of("handoff_p2", RECEIVER)
    assert status["revision"] == 3
    assert status["record"]["status"] == "completed"
    assert status["record"]["result_fact_id"] == "fact_p2_result"
    assert status["record"]["outcome"] == "succeeded"
    inbox = api.get(f"{P}/handoffs", RECEIVER, query="box=inbox").expect(200)
    assert [a["record"]["handoff_id"] for a in inbox["assignments"]] == ["handoff_p2_second"]
    full = api.get(f"{P}/handoffs", RECEIVER, query="box=inbox&include_completed=true")
    assert [a["record"]["handoff_id"] for a in full.expect(200)["assignments"]] == [
        "handoff_p2",
        "handoff_p2_second",
    ]
    hidden = api.get(f"{P}/handoffs", WRITER, query="box=outbox&include_completed=false")
    assert [a["record"]["handoff_id"] for a in hidden.expect(200)["assignments"]] == [
        "handoff_p2_second"
    ]
    outbox = api.get(f"{P}/handoffs", WRITER, query="box=outbox").expect(200)
    assert len(outbox["assignments"]) == 2
    assert outbox["assignments"][0]["revision"] == 3


def test_ho8_vis1_reader_cannot_see_handoffs_or_contexts(api: Api) -> None:
    _complete_c(api)
    api.get(f"{P}/handoffs/handoff_p2", READER).expect(403, "handoff_actor_mismatch")
    api.get(f"{P}/handoffs/handoff_p2", HERMES).expect(403, "handoff_actor_mismatch")
    api.get(f"{P}/resources/handoff/handoff_p2", READER).expect(404, "resource_not_found")
    api.get(f"{P}/resources/handoff/handoff_p2", HERMES).expect(404, "resource_not_found")
    api.get(f"{P}/resources/handoff_context/context_p2", READER).expect(404, "resource_not_found")
    api.get(f"{P}/resources/handoff_context/context_p2", RECEIVER).expect(200)
    api.get(f"{P}/resources/handoff_context/context_p2", WRITER).expect(200)
    api.get(f"{P}/resources/handoff/handoff_p2", RECEIVER).expect(200)
    snapshot = api.get(f"{P}/snapshot", READER).expect(200)
    kinds = {r["resource"]["kind"] for r in snapshot["resources"]}
    assert kinds == {"session", "fact"}
    sender_kinds = {
        r["resource"]["kind"] for r in api.get(f"{P}/snapshot").expect(200)["resources"]
    }
    assert sender_kinds == {"session", "fact", "handoff", "handoff_context"}


def test_feed4_vis1_hidden_changes_still_advance_the_cursor(api: Api) -> None:
    _complete_c(api)
    at_seq = api.get(f"{P}/snapshot", READER).expect(200)["at_seq"]
    for route in ("changes", "changes/materialized"):
        page = api.get(
            f"{P}/{route}", READER, query={"project_epoch": EPOCH, "after_seq": 1, "limit": 1}
        ).expect(200)
        assert page["entries"] == []
        assert page["next_cursor"] == {"project_epoch": EPOCH, "after_seq": 2}
        assert page["cursor"] == {"project_epoch": EPOCH, "after_seq": 1}
        assert page["has_more"] is True
        assert page["scope"] == {"tenant_id": TENANT, "project_id": PROJECT}
        full = api.get(
            f"{P}/{route}", READER, query={"project_epoch": EPOCH, "after_seq": 0, "limit": 100}
        ).expect(200)
        assert full["next_cursor"]["after_seq"] == at_seq
        assert full["has_more"] is False
        for entry in full["entries"]:
            change = entry["change"] if route != "changes" else entry
            assert change["resource"]["kind"] not in ("handoff", "handoff_context")
        # the receiver sees them
        mine = api.get(
            f"{P}/{route}", RECEIVER, query={"project_epoch": EPOCH, "after_seq": 0, "limit": 100}
        ).expect(200)
        assert len(mine["entries"]) == at_seq


def test_ho4_http_c12_second_route_to_hermes(api: Api) -> None:
    _complete_c(api)
    send = {
        "command_id": "command_send_hermes",
        "payload": {"handoff_id": "handoff_hermes", "session_id": SESSION, "to_actor": HERMES},
    }
    assert api.post(f"{P}/handoffs", send, RECEIVER).expect(200)["revision"] == 1
    accepted = _accept(api, "handoff_hermes", "claim_hermes", 1, as_=HERMES).expect(200)
    assert accepted["revision"] == 2
    done = _return(
        api, "handoff_hermes", "claim_hermes", "fact_hermes_result", 2, "ok", as_=HERMES
    ).expect(200)
    assert done["revision"] == 3
    record = api.status_of("handoff_hermes", HERMES)["record"]
    assert (record["from_actor"], record["status"], record["result_fact_id"]) == (
        RECEIVER,
        "completed",
        "fact_hermes_result",
    )


def test_typ2_identity_and_source_are_server_derived(api: Api) -> None:
    api.session("session_default", source_id=None, as_=HERMES)
    body = api.get(f"{P}/resources/session/session_default").expect(200)["state"]["body"]
    assert (body["source_id"], body["created_by"]) == ("default", HERMES)
    api.fact("fact_default", "session_default", "inherits the source", as_=RECEIVER)
    fact = api.get(f"{P}/resources/fact/fact_default").expect(200)["state"]["body"]
    assert fact == {
        "fact_id": "fact_default",
        "session_id": "session_default",
        "source_id": "default",
        "actor_id": RECEIVER,
        "content": "inherits the source",
    }
