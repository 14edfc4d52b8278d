"""The MCP endpoint over every backend: raw JSON-RPC to `POST .../mcp` (SPEC.md MCP-*).

Each tool call is compared with its REST twin on the same backend, so the suite proves the
tools answer what the routes answer, with the routes' error codes.
"""

from __future__ import annotations

import json
from typing import Any

from aidememo.domain import command_ids
from aidememo.mcp.tools import TOOLS
from tests.contract.support import (
    MCP_ORIGIN,
    OUTSIDER,
    PROJECT,
    READER,
    RECEIVER,
    WRITER,
    Api,
    P,
    Reply,
)

MCP = f"{P}/mcp"
MODERN = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
}


def rpc(
    api: Api,
    method: str,
    params: Any = None,
    *,
    as_: str | None = WRITER,
    id_: Any = 1,
    headers: dict[str, str | None] | None = None,
) -> Reply:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if id_ is not None:
        message["id"] = id_
    if params is not None:
        message["params"] = params
    return api.call("POST", MCP, as_=as_, json=message, headers=headers)


def raw(api: Api, body: bytes, *, headers: dict[str, str | None] | None = None) -> Reply:
    hdrs: dict[str, str | None] = {"content-type": "application/json", **(headers or {})}
    return api.call("POST", MCP, as_=WRITER, body=body, headers=hdrs)


def result(reply: Reply) -> dict[str, Any]:
    body = reply.expect(200)
    assert "error" not in body, body
    out: dict[str, Any] = body["result"]
    return out


def rpc_error(reply: Reply) -> int:
    body = reply.expect(200)
    code: int = body["error"]["code"]
    return code


def call(api: Api, name: str, arguments: dict[str, Any], *, as_: str = WRITER) -> dict[str, Any]:
    out = result(rpc(api, "tools/call", {"name": name, "arguments": arguments}, as_=as_))
    text = out["content"][0]["text"]
    assert json.loads(text) == out["structuredContent"]  # the text is the same JSON
    return out


def ok(api: Api, name: str, arguments: dict[str, Any], *, as_: str = WRITER) -> dict[str, Any]:
    out = call(api, name, arguments, as_=as_)
    assert out["isError"] is False, out
    content: dict[str, Any] = out["structuredContent"]
    return content


def refused(api: Api, name: str, arguments: dict[str, Any], *, as_: str = WRITER) -> str:
    out = call(api, name, arguments, as_=as_)
    assert out["isError"] is True, out
    code: str = out["structuredContent"]["error"]["code"]
    return code


def modern(api: Api, method: str, params: dict[str, Any], **headers: str | None) -> Reply:
    hdrs: dict[str, str | None] = {"mcp-protocol-version": MODERN, "mcp-method": method}
    if method == "tools/call":
        hdrs["mcp-name"] = params.get("name")
    hdrs.update({k.replace("_", "-"): v for k, v in headers.items()})
    return rpc(api, method, {**params, "_meta": META}, headers=hdrs)


# -- MCP-1: the registry ---------------------------------------------------------------------


def test_mcp1_writer_lists_every_tool_with_closed_schemas(api: Api) -> None:
    tools = result(rpc(api, "tools/list"))["tools"]
    assert [t["name"] for t in tools] == [t.name for t in TOOLS]
    for tool in tools:
        schema = tool["inputSchema"]
        assert schema["type"] == "object" and schema["additionalProperties"] is False
        assert not {"tenant_id", "actor_id"} & set(schema["properties"])
        assert tool["outputSchema"]["type"] == "object"


# Written out by hand, not derived from the registry: a write tool marked read-only there
# would otherwise be listed to readers and this list with it.
READER_TOOLS = [
    "identity",
    "members",
    "search",
    "resource_get",
    "session_list",
    "fact_list",
    "handoff_list",
    "handoff_status",
    "changes",
    "artifact_resolve",
    "artifact_read",
]
WRITE_TOOLS = {
    "session_create",
    "fact_create",
    "handoff_context_create",
    "handoff_send",
    "handoff_accept",
    "handoff_heartbeat",
    "handoff_return",
    "artifact_write",
}


def test_mcp1_reader_lists_only_read_tools(api: Api) -> None:
    tools = result(rpc(api, "tools/list", as_=READER))["tools"]
    assert [t["name"] for t in tools] == READER_TOOLS
    assert all(t["annotations"]["readOnlyHint"] for t in tools)
    writer = {t["name"]: t for t in result(rpc(api, "tools/list"))["tools"]}
    assert set(writer) == set(READER_TOOLS) | WRITE_TOOLS
    assert not any(writer[name]["annotations"]["readOnlyHint"] for name in WRITE_TOOLS)


def test_mcp1_wrong_project_is_project_unauthorized(api: Api) -> None:
    rpc(api, "tools/list", as_=OUTSIDER).expect(403, "project_unauthorized")
    assert refused(api, "identity", {}, as_=OUTSIDER) == "project_unauthorized"
    # The initialize handshake touches no record: the refusal comes with the first tool use.
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t"}}
    assert result(rpc(api, "initialize", init, as_=OUTSIDER))["protocolVersion"] == "2025-11-25"


# -- MCP-2: the REST twin ---------------------------------------------------------------------


def test_mcp2_scenario_flow_answers_what_rest_answers(api: Api) -> None:
    me = ok(api, "identity", {})
    assert me == api.get(f"{P}/identity").expect(200)
    assert ok(api, "members", {}) == api.get(f"{P}/members").expect(200)
    session = ok(api, "session_create", {"session_id": "s_mcp", "topic": "mcp flow"})
    assert session["resource"] == {"kind": "session", "id": "s_mcp"}
    fact = ok(
        api, "fact_create", {"fact_id": "f_mcp", "session_id": "s_mcp", "content": "blue sky"}
    )
    send = ok(
        api,
        "handoff_send",
        {"handoff_id": "h_mcp", "session_id": "s_mcp", "to_actor": RECEIVER, "focus": "go"},
    )
    inbox = ok(api, "handoff_list", {"box": "inbox"}, as_=RECEIVER)
    assert inbox == api.get(f"{P}/handoffs", RECEIVER, query={"box": "inbox"}).expect(200)
    assert inbox["assignments"][0]["revision"] == send["revision"]
    accept = {"handoff_id": "h_mcp", "expected_revision": send["revision"], "claim_id": "c1"}
    accepted = ok(api, "handoff_accept", accept, as_=RECEIVER)
    beat = {"handoff_id": "h_mcp", "expected_revision": accepted["revision"], "claim_id": "c1"}
    beaten = ok(api, "handoff_heartbeat", beat, as_=RECEIVER)
    ok(
        api,
        "fact_create",
        {"fact_id": "f_res", "session_id": "s_mcp", "content": "done"},
        as_=RECEIVER,
    )
    status = ok(api, "handoff_status", {"handoff_id": "h_mcp"}, as_=RECEIVER)
    returned = ok(
        api,
        "handoff_return",
        {
            "handoff_id": "h_mcp",
            "expected_revision": status["revision"],
            "claim_id": "c1",
            "result_fact_id": "f_res",
            "outcome": "succeeded",
        },
        as_=RECEIVER,
    )
    assert returned["revision"] == beaten["revision"] + 1
    final = ok(api, "handoff_status", {"handoff_id": "h_mcp"})
    assert final == api.status_of("h_mcp")
    assert final["record"]["status"] == "completed"
    found = ok(api, "search", {"q": "sky", "at_least_seq": fact["project_seq"]})
    assert [r["fact_id"] for r in found["results"]] == ["f_mcp"]
    assert ok(api, "session_list", {}) == api.get(f"{P}/sessions").expect(200)
    facts = ok(api, "fact_list", {"session_id": "s_mcp"})
    assert facts == api.get(f"{P}/sessions/s_mcp/facts").expect(200)
    assert [f["record"]["fact_id"] for f in facts["facts"]] == ["f_mcp", "f_res"]
    got = ok(api, "resource_get", {"kind": "fact", "id": "f_mcp"})
    assert got == api.get(f"{P}/resources/fact/f_mcp").expect(200)
    changes = ok(api, "changes", {"project_epoch": me["project_epoch"], "after_seq": 0})
    query = {"project_epoch": me["project_epoch"], "after_seq": 0}
    assert changes == api.get(f"{P}/changes", query=query).expect(200)


def test_mcp2_refusals_are_tool_results_with_the_rest_codes(api: Api) -> None:
    api.session("s_ref")
    fact = {"fact_id": "f_r", "session_id": "s_ref", "content": "x"}
    assert refused(api, "fact_create", fact, as_=READER) == "project_unauthorized"
    assert refused(api, "fact_create", {**fact, "actor_id": RECEIVER}) == "invalid_command"
    assert refused(api, "fact_create", {**fact, "tenant_id": "other"}) == "invalid_command"
    assert refused(api, "fact_create", {"fact_id": "f_r"}) == "invalid_command"
    assert refused(api, "search", {"q": "x", "limit": "5"}) == "invalid_command"
    assert refused(api, "search", {"q": "x", "limit": True}) == "invalid_command"
    assert refused(api, "search", {"q": "x", "at_least_seq": 10**6}) == "cursor_out_of_range"
    assert refused(api, "handoff_status", {"handoff_id": "nope"}) == "resource_not_found"
    assert refused(api, "resource_get", {"kind": "fact", "id": "a/b"}) == "invalid_identifier"
    bad_limit = {"project_epoch": "epoch_http", "after_seq": 0, "limit": 0}
    assert refused(api, "changes", bad_limit) == "invalid_change_batch"
    secret = {**fact, "content": "key AKIAIOSFODNN7EXAMPLE"}
    code = api.post(
        f"{P}/facts", {"command_id": "c_sec", "payload": {**secret, "fact_id": "f_s"}}
    ).code
    assert refused(api, "fact_create", secret) == code


# -- MCP-3: idempotency -----------------------------------------------------------------------


def test_mcp3_cmd3_replayed_operation_id_returns_the_first_receipt(api: Api) -> None:
    api.session("s_op")
    args = {"fact_id": "f_op", "session_id": "s_op", "content": "once", "operation_id": "op_1"}
    first = ok(api, "fact_create", args)
    assert first["command_id"] == "op_1"
    assert ok(api, "fact_create", args) == first
    changed = {**args, "content": "twice"}
    assert refused(api, "fact_create", changed) == "command_conflict"


def test_mcp3_id4_derived_command_id_replays_a_rest_create(api: Api) -> None:
    command_id = command_ids.create_command_id(PROJECT, "session", "s_derived")
    body = {"command_id": command_id, "payload": {"session_id": "s_derived", "topic": "t"}}
    rest = api.post(f"{P}/sessions", body).expect(200)
    assert ok(api, "session_create", {"session_id": "s_derived", "topic": "t"}) == rest


# -- MCP-4: the transport ---------------------------------------------------------------------


def test_mcp4_http1_transport_answers(api: Api) -> None:
    missing = api.call("POST", MCP, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    missing.expect(401, "authentication_failed")
    assert missing.headers["www-authenticate"] == "Bearer"
    unknown = rpc(api, "ping", as_=None, headers={"authorization": "Bearer nobody"})
    unknown.expect(401, "authentication_failed")
    assert unknown.headers["www-authenticate"] == "Bearer"
    api.call("GET", MCP, as_=WRITER).expect(405, "method_not_allowed")
    notice = rpc(api, "notifications/initialized", id_=None)
    assert (notice.status, notice.body) == (202, None)
    text = api.call("POST", MCP, as_=WRITER, body=b"{}", headers={"content-type": "text/plain"})
    text.expect(415, "unsupported_media_type")
    query = api.call("POST", MCP, as_=WRITER, json={"jsonrpc": "2.0"}, query={"actor_id": "x"})
    query.expect(400, "invalid_command")


# -- MCP-5: protocol 2026-07-28 -----------------------------------------------------------------


def test_mcp5_discover_and_calls_without_handshake(api: Api) -> None:
    found = result(modern(api, "server/discover", {}))
    assert MODERN in found["supportedVersions"] and "tools" in found["capabilities"]
    listed = result(modern(api, "tools/list", {}))
    assert (listed["ttlMs"], listed["cacheScope"], listed["resultType"]) == (
        60_000,
        "private",
        "complete",
    )
    called = result(modern(api, "tools/call", {"name": "identity", "arguments": {}}))
    assert called["resultType"] == "complete" and called["isError"] is False


def test_mcp5_header_checks(api: Api) -> None:
    params = {"name": "identity", "arguments": {}}
    assert rpc_error(modern(api, "tools/call", params, mcp_name="members")) == -32020
    assert rpc_error(modern(api, "tools/call", params, mcp_name=None)) == -32020
    assert rpc_error(modern(api, "tools/list", {}, mcp_method="tools/call")) == -32020
    assert rpc_error(modern(api, "tools/list", {}, mcp_method=None)) == -32020
    assert rpc_error(modern(api, "tools/list", {}, mcp_protocol_version=None)) == -32020
    future = {"_meta": {**META, "io.modelcontextprotocol/protocolVersion": "2099-01-01"}}
    reply = rpc(api, "server/discover", future, headers={"mcp-protocol-version": "2099-01-01"})
    body = reply.expect(200)
    assert body["error"]["code"] == -32022
    assert MODERN in body["error"]["data"]["supported"]


# -- MCP-6: the handshake era and JSON-RPC errors --------------------------------------------


def test_mcp6_initialize_negotiates_a_handshake_version(api: Api) -> None:
    for asked, answered in (
        ("2025-11-25", "2025-11-25"),
        ("2024-11-05", "2024-11-05"),
        ("1999-01-01", "2025-11-25"),
    ):
        init = {"protocolVersion": asked, "capabilities": {}, "clientInfo": {"name": "t"}}
        got = result(rpc(api, "initialize", init))
        assert got["protocolVersion"] == answered
        assert got["capabilities"]["tools"] == {"listChanged": False}
    assert result(rpc(api, "ping")) == {}


def test_mcp6_protocol_errors(api: Api) -> None:
    assert rpc_error(raw(api, b'{"jsonrpc": "2.0", ')) == -32700
    assert rpc_error(raw(api, b'{"jsonrpc": "2.0", "id": 1, "id": 2, "method": "ping"}')) == -32700
    assert rpc_error(raw(api, b'{"id": 1, "method": "ping"}')) == -32600
    assert rpc_error(raw(api, b'{"jsonrpc": "2.0", "id": true, "method": "ping"}')) == -32600
    assert rpc_error(raw(api, b'"ping"')) == -32600
    assert rpc_error(rpc(api, "resources/list")) == -32601
    assert rpc_error(rpc(api, "tools/call", {"name": "nope", "arguments": {}})) == -32602
    assert rpc_error(rpc(api, "tools/call", {"name": "identity", "arguments": [1]})) == -32602
    assert rpc_error(rpc(api, "tools/call", {"arguments": {}})) == -32602
    assert rpc_error(rpc(api, "tools/list", [1])) == -32602
    batch = b'[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]'
    assert rpc_error(raw(api, batch, headers={"mcp-protocol-version": "2025-11-25"})) == -32600


def test_mcp6_batches_under_the_versions_that_had_them(api: Api) -> None:
    batch = [
        {"jsonrpc": "2.0", "id": 1, "method": "ping"},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": "b", "method": "tools/call", "params": {"name": "identity"}},
    ]
    reply = raw(api, json.dumps(batch).encode(), headers={"mcp-protocol-version": "2025-03-26"})
    answers = reply.expect(200)
    assert [a["id"] for a in answers] == [1, "b"]
    assert answers[1]["result"]["structuredContent"]["actor_id"] == WRITER


def test_mcp9_a_batch_is_bounded_in_messages_and_tool_calls(api: Api) -> None:
    """At most 8 messages and 4 tool calls: a larger batch is refused whole, nothing run."""
    old = {"mcp-protocol-version": "2025-03-26"}
    api.session("s1")
    head = api.head()

    def write(n: int) -> dict[str, Any]:
        arguments = {"session_id": "s1", "fact_id": f"f_b{n}", "content": f"fact {n}"}
        params = {"name": "fact_create", "arguments": arguments}
        return {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": params}

    ping = [{"jsonrpc": "2.0", "id": f"p{n}", "method": "ping"} for n in range(9)]
    for batch in ([write(n) for n in range(5)], ping, [write(0), *ping[:8]]):
        reply = raw(api, json.dumps(batch).encode(), headers=old)
        assert rpc_error(reply) == -32600
        assert "at most 8 messages and 4 tools/call" in reply.body["error"]["message"]
        assert api.head() == head
    answers = raw(api, json.dumps([write(n) for n in range(4)] + ping[:4]).encode(), headers=old)
    assert len(answers.expect(200)) == 8 and api.head() == head + 4


# -- MCP-7: Origin ------------------------------------------------------------------------------


def test_mcp7_origin_outside_the_allowlist_is_403(api: Api) -> None:
    evil = rpc(api, "ping", headers={"origin": "http://evil.example"})
    evil.expect(403, "origin_not_allowed")
    assert result(rpc(api, "ping")) == {}  # no Origin: a non-browser client


def test_mcp7_allowlisted_origin_passes(api: Api) -> None:
    assert result(rpc(api, "ping", headers={"origin": MCP_ORIGIN})) == {}
