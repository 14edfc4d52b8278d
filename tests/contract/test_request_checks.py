"""HTTP-1: the request checks run in a fixed order. The refusals themselves (each step proven by
a request that would also fail a later step, none a 5xx) are rows of tests/hostile_table.py,
run by test_hostile_requests.py; what stays here needs state or shows what is accepted."""

from __future__ import annotations

import json

from aidememo.domain.model import MemberStatus, Role
from tests.contract.support import (
    HERMES,
    OUTSIDER,
    PROJECT,
    READER,
    RECEIVER,
    WRITER,
    Api,
    P,
)

BAD_TOKEN = "f" * 64


def _command(**overrides: object) -> dict[str, object]:
    body: dict[str, object] = {
        "command_id": "cmd_check",
        "project_id": PROJECT,
        "expected_revision": None,
        "operation": "resource.put",
        "resource": {"kind": "custom.note", "id": "note_check"},
        "change": "upsert",
        "payload": {"a": 1},
    }
    body.update(overrides)
    return body


# -- 3. size, 4. content type: what is accepted ------------------------------------------------


def test_http1_body_of_exactly_1_mib_is_read(api: Api) -> None:
    prefix = json.dumps(_command(payload={"pad": ""}))[:-3]
    pad = 1024 * 1024 - len(prefix) - 3
    raw = (prefix + "x" * pad + '"}}').encode()
    assert len(raw) == 1024 * 1024
    json.loads(raw)
    api.call("POST", "/v1/commands", token=api.tokens[WRITER], body=raw).expect(200)


def test_http1_json_with_charset_and_missing_content_type_are_accepted(api: Api) -> None:
    raw = json.dumps(_command()).encode()
    api.call(
        "POST",
        "/v1/commands",
        as_=WRITER,
        body=raw,
        headers={"content-type": "application/json; charset=utf-8"},
    ).expect(200)
    api.call("POST", "/v1/commands", as_=WRITER, body=raw, headers={"content-type": None}).expect(
        200
    )
    api.call(
        "POST",
        "/v1/commands",
        as_=WRITER,
        body=raw,
        headers={"content-type": "Application/JSON"},
    ).expect(200)


# -- 5. authentication ---------------------------------------------------------------------


def test_http1_revoked_token_is_401(api: Api) -> None:
    import hashlib

    api.get(f"{P}/identity", HERMES).expect(200)
    api.identity.revoke_token(hashlib.sha256(api.tokens[HERMES].encode()).digest())
    api.get(f"{P}/identity", HERMES).expect(401, "authentication_failed")


def test_http1_public_routes_need_no_token(api: Api) -> None:
    api.get("/health", None).expect(200)
    api.get("/openapi.json", None).expect(200)


# -- 6. body and parameters: bounds -----------------------------------------------------------


def test_cj3_int64_bounds(api: Api) -> None:
    api.put_note("note_int", {"max": 2**63 - 1, "min": -(2**63)}).expect(200)


def test_feed5_change_limits_1_and_10000_are_accepted(api: Api) -> None:
    for good in (1, 10_000):
        api.get(
            f"{P}/changes", query={"project_epoch": "epoch_http", "after_seq": 0, "limit": good}
        ).expect(200)


# -- 7. authorization ------------------------------------------------------------------------


def test_auth5_suspension_and_role_change_take_effect_on_the_next_request(api: Api) -> None:
    api.get(f"{P}/identity", HERMES).expect(200)
    api.set_status(HERMES, MemberStatus.SUSPENDED)
    api.get(f"{P}/identity", HERMES).expect(403, "project_unauthorized")
    api.session("sess_susp", as_=WRITER)
    body = {"command_id": "c_s", "payload": {"session_id": "s_h", "topic": "t"}}
    api.post(f"{P}/sessions", body, HERMES).expect(403, "project_unauthorized")
    # a suspended member is not a valid receiver either
    api.send("h_to_suspended", "sess_susp", HERMES).expect(400, "invalid_command")
    api.set_status(HERMES, MemberStatus.ACTIVE)
    api.get(f"{P}/identity", HERMES).expect(200)
    api.post(f"{P}/sessions", body, HERMES).expect(200)
    api.set_role(HERMES, Role.READER)
    body2 = {"command_id": "c_s2", "payload": {"session_id": "s_h2", "topic": "t"}}
    api.post(f"{P}/sessions", body2, HERMES).expect(403, "project_unauthorized")
    assert api.get(f"{P}/identity", HERMES).expect(200)["role"] == "reader"


def test_typ4_send_to_self_reader_or_non_member_is_400(api: Api) -> None:
    api.session("sess_self")
    api.send("h_self", "sess_self", WRITER).expect(400, "invalid_command")
    api.send("h_reader", "sess_self", READER).expect(400, "invalid_command")
    api.send("h_nobody", "sess_self", "nobody_at_all").expect(400, "invalid_command")
    api.send("h_outsider", "sess_self", OUTSIDER).expect(400, "invalid_command")
    ctx = {
        "command_id": "c_ctx_self",
        "payload": {
            "context_id": "ctx_self",
            "handoff_id": "h_self",
            "session_id": "sess_self",
            "to_actor": WRITER,
            "content": "c",
        },
    }
    api.post(f"{P}/handoff-contexts", ctx, WRITER).expect(400, "invalid_command")
    api.send("h_ok", "sess_self", RECEIVER).expect(200)


def test_typ4_missing_session_context_or_fact_is_404(api: Api) -> None:
    fact = {"command_id": "c", "payload": {"fact_id": "f", "session_id": "none", "content": "x"}}
    api.post(f"{P}/facts", fact).expect(404, "resource_not_found")
    api.send("h_nosession", "none", RECEIVER).expect(404, "resource_not_found")
    api.session("sess_404")
    api.send("h_noctx", "sess_404", RECEIVER, context_id="ctx_none").expect(
        404, "resource_not_found"
    )
    api.get(f"{P}/resources/custom.note/none").expect(404, "resource_not_found")
    api.get(f"{P}/handoffs/none").expect(404, "resource_not_found")


def test_auth2_the_bearer_scheme_is_case_insensitive(api: Api) -> None:
    lower = {"authorization": "bearer " + api.tokens[WRITER]}
    api.call("GET", f"{P}/identity", headers=lower).expect(200)


def test_id3_text_at_its_utf8_byte_limit_is_accepted(api: Api) -> None:
    api.session("s_limits")
    body = {
        "command_id": "c_f_max",
        "payload": {"fact_id": "f_max", "session_id": "s_limits", "content": "x" * 65_536},
    }
    api.post(f"{P}/facts", body).expect(200)
    focus = {"handoff_id": "h_focus", "session_id": "s_limits", "to_actor": RECEIVER}
    ok = {"command_id": "c_focus", "payload": {**focus, "focus": "x" * 4096, "done_when": ""}}
    api.post(f"{P}/handoffs", ok).expect(200)
    topic_ok = {"command_id": "c_topic2", "payload": {"session_id": "s_t", "topic": "a\tb\nc"}}
    api.post(f"{P}/sessions", topic_ok).expect(200)
