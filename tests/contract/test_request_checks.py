"""HTTP-1: the request checks run in a fixed order, each step proven by a request that would
also fail a later step. No request, however malformed, produces a 5xx."""

from __future__ import annotations

import json

import pytest

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


# -- 1. route, 2. method -------------------------------------------------------------------


def test_http1_unknown_route_is_404_before_authentication(api: Api) -> None:
    api.call("GET", "/v1/nothing").expect(404, "route_not_found")
    api.call(
        "POST",
        f"{P}/nothing",
        body=b"x" * (2 * 1024 * 1024),
        headers={"content-type": "text/plain"},
    ).expect(404, "route_not_found")
    api.call("GET", f"{P}/resources/fact").expect(404, "route_not_found")
    api.call("GET", "/").expect(404, "route_not_found")


def test_http1_wrong_method_is_405_before_authentication(api: Api) -> None:
    reply = api.call("DELETE", f"{P}/sessions")
    reply.expect(405, "method_not_allowed")
    api.call("PUT", "/v1/commands", body=b"x" * 10).expect(405, "method_not_allowed")
    api.call("GET", "/v1/commands").expect(405, "method_not_allowed")
    api.call("POST", "/health").expect(405, "method_not_allowed")


# -- 3. size, 4. content type ----------------------------------------------------------------


def test_http1_body_over_1_mib_is_413_before_media_type_and_auth(api: Api) -> None:
    big = b"{" + b" " * (1024 * 1024) + b"}"
    api.call("POST", "/v1/commands", body=big, headers={"content-type": "text/plain"}).expect(
        413, "payload_too_large"
    )
    api.call("POST", f"{P}/facts", body=big).expect(413, "payload_too_large")


def test_http1_body_of_exactly_1_mib_is_read(api: Api) -> None:
    prefix = json.dumps(_command(payload={"pad": ""}))[:-3]
    pad = 1024 * 1024 - len(prefix) - 3
    raw = (prefix + "x" * pad + '"}}').encode()
    assert len(raw) == 1024 * 1024
    json.loads(raw)
    api.call("POST", "/v1/commands", token=api.tokens[WRITER], body=raw).expect(200)


def test_http1_non_json_content_type_is_415_before_auth(api: Api) -> None:
    api.call("POST", "/v1/commands", body=b"{}", headers={"content-type": "text/plain"}).expect(
        415, "unsupported_media_type"
    )
    api.call(
        "POST",
        f"{P}/sessions",
        as_=WRITER,
        body=b"{}",
        headers={"content-type": "application/x-www-form-urlencoded"},
    ).expect(415, "unsupported_media_type")


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


@pytest.mark.parametrize(
    "authorization",
    [None, "", "Bearer", "Bearer ", "Basic abc", f"Bearer {BAD_TOKEN}", "Bearer a b", "token"],
)
def test_http1_missing_or_unknown_bearer_is_401_before_body_checks(
    api: Api, authorization: str | None
) -> None:
    headers = {"authorization": authorization} if authorization is not None else {}
    api.call("POST", "/v1/commands", body=b"{not json", headers=headers).expect(
        401, "authentication_failed"
    )
    api.call("GET", f"{P}/changes", query="limit=0&bogus=1", headers=headers).expect(
        401, "authentication_failed"
    )
    api.call("GET", f"{P}/resources/%20/%20", headers=headers).expect(401, "authentication_failed")


def test_http1_revoked_token_is_401(api: Api) -> None:
    import hashlib

    api.get(f"{P}/identity", HERMES).expect(200)
    api.identity.revoke_token(hashlib.sha256(api.tokens[HERMES].encode()).digest())
    api.get(f"{P}/identity", HERMES).expect(401, "authentication_failed")


def test_http1_public_routes_need_no_token(api: Api) -> None:
    api.get("/health", None).expect(200)
    api.get("/openapi.json", None).expect(200)


# -- 6. body and parameters: 400 -----------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"{not json",
        b"[]",
        b"null",
        b'"text"',
        b'{"command_id":"a","command_id":"b"}',
        b'{"a":NaN}',
        b'{"a":Infinity}',
        b'{"a":-Infinity}',
        b'{"a":1e999}',
        b"[" * 65 + b"]" * 65,
        b'{"a":9223372036854775808}',
        b'{"a":-9223372036854775809}',
        b"\xff\xfe{}",
        b'{"a":1} trailing',
    ],
    ids=lambda raw: repr(raw[:24]),
)
def test_cj3_malformed_json_is_400_invalid_command(api: Api, raw: bytes) -> None:
    # Sent to a reader on the write route: the 400 must come before authorization (403).
    api.call("POST", "/v1/commands", as_=READER, body=raw).expect(400, "invalid_command")
    api.call("POST", f"{P}/facts", as_=OUTSIDER, body=raw).expect(400, "invalid_command")


def test_cj3_depth_64_is_accepted_and_65_refused(api: Api) -> None:
    def nested(depth: int) -> object:
        value: object = {}
        for _ in range(depth - 2):  # the command object and the payload are two levels
            value = {"x": value}
        return value

    assert api.put_note("note_deep", nested(64)).status == 200
    reply = api.post("/v1/commands", _command(command_id="cmd_deeper", payload=nested(65)))
    reply.expect(400, "invalid_command")


def test_cj3_int64_bounds(api: Api) -> None:
    api.put_note("note_int", {"max": 2**63 - 1, "min": -(2**63)}).expect(200)
    raw = json.dumps(_command(command_id="cmd_big", payload={"a": 2**63})).encode()
    api.call("POST", "/v1/commands", as_=WRITER, body=raw).expect(400, "invalid_command")


@pytest.mark.parametrize("field", ["tenant_id", "actor_id", "extra"])
def test_cmd2_unknown_and_identity_fields_in_body_are_400(api: Api, field: str) -> None:
    api.post("/v1/commands", _command(**{field: "x"}), READER).expect(400, "invalid_command")
    session = {"command_id": "c1", "payload": {"session_id": "s1", "topic": "t"}, field: "x"}
    api.post(f"{P}/sessions", session, READER).expect(400, "invalid_command")
    inner = {"command_id": "c1", "payload": {"session_id": "s1", "topic": "t", field: "x"}}
    api.post(f"{P}/sessions", inner, READER).expect(400, "invalid_command")
    transition = {"command_id": "c2", "expected_revision": 1, "payload": {"claim_id": "c"}}
    api.post(f"{P}/handoffs/h1/accept", {**transition, field: "x"}, READER).expect(
        400, "invalid_command"
    )


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"command_id": "c", "payload": {"session_id": "s", "topic": 5}}, "invalid_command"),
        ({"command_id": "c", "payload": {"session_id": "s"}}, "invalid_command"),
        ({"command_id": "c", "payload": {"session_id": "s", "topic": ""}}, "invalid_command"),
        ({"command_id": "c", "payload": {"session_id": "s", "topic": "  "}}, "invalid_command"),
        (
            {"command_id": "c", "payload": {"session_id": "s", "topic": "a\u0001"}},
            "invalid_command",
        ),
        (
            {"command_id": "c", "payload": {"session_id": "s", "topic": "x" * 513}},
            "invalid_command",
        ),
        ({"command_id": "c", "payload": []}, "invalid_command"),
        ({"command_id": "c"}, "invalid_command"),
        ({"command_id": 7, "payload": {"session_id": "s", "topic": "t"}}, "invalid_identifier"),
        ({"command_id": "c d", "payload": {"session_id": "s", "topic": "t"}}, "invalid_identifier"),
        ({"command_id": "c", "payload": {"session_id": "s/1", "topic": "t"}}, "invalid_identifier"),
        (
            {"command_id": "c", "payload": {"session_id": "s" * 129, "topic": "t"}},
            "invalid_identifier",
        ),
        (
            {"command_id": "c", "payload": {"session_id": "s", "topic": "t", "source_id": "a b"}},
            "invalid_identifier",
        ),
    ],
)
def test_cmd2_session_body_violations_are_400_before_authorization(
    api: Api, body: dict[str, object], code: str
) -> None:
    api.post(f"{P}/sessions", body, READER).expect(400, code)


def test_cmd1_cmd4_id2_raw_command_shape_violations_are_400(api: Api) -> None:
    cases = [
        _command(operation="fact.add"),
        _command(resource={"kind": "fact", "id": "f1"}),
        _command(change="delete"),
        _command(payload=None),
        _command(payload=[1]),
        _command(operation="resource.delete", change="delete", payload={"a": 1}),
        _command(expected_revision=0),
        _command(expected_revision=-1),
        _command(expected_revision=True),
        _command(expected_revision="1"),
        _command(resource={"kind": "custom.note"}),
        _command(resource={"kind": "custom.note", "id": "n", "x": 1}),
        _command(resource={"kind": "Custom.Note", "id": "n"}),
    ]
    for body in cases:
        api.post("/v1/commands", body, READER).expect(400, "invalid_command")
    for body in (
        _command(command_id="bad id"),
        _command(project_id="bad/project"),
        _command(resource={"kind": "custom.note", "id": ""}),
    ):
        api.post("/v1/commands", body, READER).expect(400, "invalid_identifier")


def test_id1_malformed_identifier_in_path_is_400_invalid_identifier(api: Api) -> None:
    api.get("/v1/projects/bad%20project/identity").expect(400, "invalid_identifier")
    api.get("/v1/projects/a b/identity").expect(400, "invalid_identifier")
    api.get(f"/v1/projects/{'p' * 129}/snapshot").expect(400, "invalid_identifier")
    api.get(f"{P}/resources/custom.note/bad!id").expect(400, "invalid_identifier")
    api.get(f"{P}/handoffs/bad!id").expect(400, "invalid_identifier")
    transition = {"command_id": "c2", "expected_revision": 1, "payload": {"claim_id": "c"}}
    api.post(f"{P}/handoffs/bad!id/accept", transition, READER).expect(400, "invalid_identifier")
    # a malformed kind is a name, not an identifier
    api.get(f"{P}/resources/Custom.Note/n1").expect(400, "invalid_command")


def test_feed5_change_limit_out_of_range_is_invalid_change_batch(api: Api) -> None:
    for limit in ("0", "10001", "-1", "x", "1.5", ""):
        api.get(
            f"{P}/changes", query={"project_epoch": "epoch_http", "after_seq": 0, "limit": limit}
        ).expect(400, "invalid_change_batch")
        api.get(
            f"{P}/changes/materialized",
            query={"project_epoch": "epoch_http", "after_seq": 0, "limit": limit},
        ).expect(400, "invalid_change_batch")
    for good in (1, 10_000):
        api.get(
            f"{P}/changes", query={"project_epoch": "epoch_http", "after_seq": 0, "limit": good}
        ).expect(200)


def test_http3_unknown_repeated_and_missing_query_parameters_are_400(api: Api) -> None:
    api.get(f"{P}/snapshot", query="x=1").expect(400, "invalid_command")
    api.get(f"{P}/identity", query="verbose=true").expect(400, "invalid_command")
    api.get(f"{P}/changes", query="project_epoch=epoch_http&after_seq=0&extra=1").expect(
        400, "invalid_command"
    )
    api.get(f"{P}/changes", query="project_epoch=epoch_http&after_seq=0&after_seq=0").expect(
        400, "invalid_command"
    )
    api.get(f"{P}/changes", query="project_epoch=epoch_http").expect(400, "invalid_command")
    api.get(f"{P}/changes", query="after_seq=0").expect(400, "invalid_command")
    api.get(f"{P}/handoffs").expect(400, "invalid_command")
    api.get(f"{P}/handoffs", query="box=sideways").expect(400, "invalid_command")
    api.get(f"{P}/search").expect(400, "invalid_command")
    api.get(f"{P}/search", query="q=").expect(400, "invalid_command")
    api.get(f"{P}/search", query={"q": "x" * 4097}).expect(400, "invalid_command")
    api.get(f"{P}/search", query="q=a&mode=semantic").expect(400, "invalid_command")
    api.get(f"{P}/search", query="q=a&mode=hybrid").expect(400, "invalid_command")
    for limit in ("0", "101", "x"):
        api.get(f"{P}/search", query=f"q=a&limit={limit}").expect(400, "invalid_command")
        api.get(f"{P}/handoffs", query=f"box=inbox&limit={limit}").expect(400, "invalid_command")
    api.get(f"{P}/handoffs", query="box=inbox&before_seq=0").expect(400, "invalid_command")
    api.get(f"{P}/search", query="q=a&at_least_seq=-1").expect(400, "invalid_command")
    api.get("/health", None, query="x=1").expect(400, "invalid_command")


@pytest.mark.parametrize("value", ["yes", "1", "True", "FALSE", ""])
def test_http3_booleans_are_true_or_false_only(api: Api, value: str) -> None:
    api.get(f"{P}/handoffs", query={"box": "inbox", "include_completed": value}).expect(
        400, "invalid_command"
    )


def test_mbx1_actor_id_or_tenant_id_in_query_is_400(api: Api) -> None:
    api.get(f"{P}/handoffs", query="box=inbox&actor_id=hermes").expect(400, "invalid_command")
    api.get(f"{P}/handoffs", query="box=outbox&tenant_id=tenant_http").expect(
        400, "invalid_command"
    )
    api.get(f"{P}/search", query="q=a&actor_id=hermes").expect(400, "invalid_command")


def test_http1_body_400_comes_before_403(api: Api) -> None:
    # The outsider is no member of project_http: a body fault still wins.
    api.post(f"{P}/sessions", {"command_id": "c"}, OUTSIDER).expect(400, "invalid_command")
    api.get(f"{P}/changes", OUTSIDER, query="project_epoch=epoch_http&after_seq=0&limit=0").expect(
        400, "invalid_change_batch"
    )


# -- 7. authorization ------------------------------------------------------------------------


def test_auth3_non_member_is_403_on_every_route(api: Api) -> None:
    session = {"command_id": "c", "payload": {"session_id": "s", "topic": "t"}}
    api.post(f"{P}/sessions", session, OUTSIDER).expect(403, "project_unauthorized")
    api.post("/v1/commands", _command(), OUTSIDER).expect(403, "project_unauthorized")
    for path, query in (
        (f"{P}/identity", None),
        (f"{P}/snapshot", None),
        (f"{P}/resources/custom.note/n1", None),
        (f"{P}/changes", "project_epoch=epoch_http&after_seq=0"),
        (f"{P}/changes/materialized", "project_epoch=epoch_http&after_seq=0"),
        (f"{P}/handoffs", "box=inbox"),
        (f"{P}/handoffs/h1", None),
        (f"{P}/search", "q=a"),
        ("/v1/projects/no_such_project/identity", None),
    ):
        api.get(path, OUTSIDER, query=query).expect(403, "project_unauthorized")
    # a project that does not exist answers like one the caller may not see
    api.get("/v1/projects/no_such_project/identity", WRITER).expect(403, "project_unauthorized")


def test_auth4_reader_writes_are_403_on_every_write_route(api: Api) -> None:
    api.session("sess_r")
    api.post("/v1/commands", _command(), READER).expect(403, "project_unauthorized")
    writes = [
        (f"{P}/sessions", {"command_id": "c", "payload": {"session_id": "s", "topic": "t"}}),
        (
            f"{P}/facts",
            {
                "command_id": "c",
                "payload": {"fact_id": "f", "session_id": "sess_r", "content": "x"},
            },
        ),
        (
            f"{P}/handoff-contexts",
            {
                "command_id": "c",
                "payload": {
                    "context_id": "x",
                    "handoff_id": "h",
                    "session_id": "sess_r",
                    "to_actor": WRITER,
                    "content": "c",
                },
            },
        ),
        (
            f"{P}/handoffs",
            {
                "command_id": "c",
                "payload": {"handoff_id": "h", "session_id": "sess_r", "to_actor": WRITER},
            },
        ),
        (
            f"{P}/handoffs/h/accept",
            {"command_id": "c", "expected_revision": 1, "payload": {"claim_id": "k"}},
        ),
        (
            f"{P}/handoffs/h/heartbeat",
            {"command_id": "c", "expected_revision": 1, "payload": {"claim_id": "k"}},
        ),
        (
            f"{P}/handoffs/h/return",
            {
                "command_id": "c",
                "expected_revision": 1,
                "payload": {"claim_id": "k", "result_fact_id": "f", "outcome": "failed"},
            },
        ),
    ]
    for path, body in writes:
        api.post(path, body, READER).expect(403, "project_unauthorized")
    # reads are fine
    api.get(f"{P}/identity", READER).expect(200)


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


def test_http2_no_5xx_for_odd_requests(api: Api) -> None:
    odd = [
        ("GET", "//", None, None),
        ("GET", f"{P}/resources/custom.note/%ff", None, None),
        ("GET", f"{P}/search", "q=%ff%fe", None),
        ("GET", f"{P}/search", {"q": '"unbalanced AND OR NEAR( * ^'}, None),
        ("GET", f"{P}/search", {"q": "\u0000"}, None),
        ("GET", f"{P}/handoffs", "box=inbox&before_seq=99999999999999999999", None),
        ("GET", f"{P}/changes", "project_epoch=epoch_http&after_seq=99999999999999999999", None),
        ("POST", "/v1/commands", None, b"\x00"),
        ("POST", f"{P}/handoffs/h/return", None, b'{"command_id":"c","expected_revision":1}'),
    ]
    for method, path, query, raw in odd:
        reply = api.call(method, path, as_=WRITER, query=query, body=raw)
        assert reply.status < 500, (path, reply.body)
        assert reply.status == 200 or reply.code is not None


def test_auth2_bearer_over_4096_bytes_or_with_control_characters_is_401(api: Api) -> None:
    api.call("GET", f"{P}/identity", token="a" * 4097).expect(401, "authentication_failed")
    api.call("GET", f"{P}/identity", headers={"authorization": "Bearer a\tb"}).expect(
        401, "authentication_failed"
    )
    lower = {"authorization": "bearer " + api.tokens[WRITER]}
    api.call("GET", f"{P}/identity", headers=lower).expect(200)


def test_id3_text_limits_are_counted_in_utf8_bytes(api: Api) -> None:
    api.session("s_limits")

    def fact(fact_id: str, content: str) -> tuple[int, str | None]:
        body = {
            "command_id": f"c_{fact_id}",
            "payload": {"fact_id": fact_id, "session_id": "s_limits", "content": content},
        }
        reply = api.post(f"{P}/facts", body)
        return reply.status, reply.code

    assert fact("f_max", "x" * 65_536) == (200, None)
    assert fact("f_over", "x" * 65_537) == (400, "invalid_command")
    assert fact("f_cjk_over", "服" * 21_846) == (400, "invalid_command")  # 65,538 bytes
    assert fact("f_empty", "") == (400, "invalid_command")
    focus = {"handoff_id": "h_focus", "session_id": "s_limits", "to_actor": RECEIVER}
    over = {"command_id": "c_focus_over", "payload": {**focus, "focus": "가" * 1366}}
    api.post(f"{P}/handoffs", over).expect(400, "invalid_command")
    ok = {"command_id": "c_focus", "payload": {**focus, "focus": "x" * 4096, "done_when": ""}}
    api.post(f"{P}/handoffs", ok).expect(200)
    topic = {"command_id": "c_topic", "payload": {"session_id": "s_t", "topic": "가" * 171}}
    api.post(f"{P}/sessions", topic).expect(400, "invalid_command")  # 513 bytes
    topic_ok = {"command_id": "c_topic2", "payload": {"session_id": "s_t", "topic": "a\tb\nc"}}
    api.post(f"{P}/sessions", topic_ok).expect(200)
