"""The official MCP SDK client (`mcp.Client`, modes `auto` and `legacy`) over streamable HTTP
against real servers: `aidememo serve` on SQLite and PostgreSQL, and the edge double behind a
loopback server in both storage modes (SPEC.md MCP-1..6).

`auto` probes `server/discover` and speaks 2026-07-28 (the per-request `_meta` and headers);
`legacy` runs the `initialize` handshake at 2025-11-25. Both run the same Scenario-style flow.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from aidememo.mcp.tools import READ_TOOLS, TOOLS
from tests.agents.targets import OTHER, PROJECT, READER, RECEIVER, WRITER, Target, target

__all__ = ["target"]

MODES = {"auto": "2026-07-28", "legacy": "2025-11-25"}


@asynccontextmanager
async def connect(
    served: Target, actor: str, mode: str, project: str = PROJECT
) -> AsyncIterator[Client]:
    headers = {"authorization": f"Bearer {served.tokens[actor]}"}
    async with httpx2.AsyncClient(headers=headers, timeout=20) as http:
        transport = streamable_http_client(served.endpoint(project), http_client=http)
        async with Client(transport, mode=mode) as client:  # type: ignore[arg-type]
            yield client


async def ok(client: Client, name: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(name, arguments)
    assert result.is_error is False, result
    content: dict[str, Any] = result.structured_content or {}
    return content


async def refused(client: Client, name: str, **arguments: Any) -> str:
    result = await client.call_tool(name, arguments)
    assert result.is_error is True, result
    code: str = (result.structured_content or {})["error"]["code"]
    return code


async def _flow(served: Target, mode: str) -> None:
    async with (
        connect(served, WRITER, mode) as writer,
        connect(served, RECEIVER, mode) as receiver,
        connect(served, READER, mode) as reader,
    ):
        assert writer.protocol_version == MODES[mode]
        listed = await writer.list_tools()
        assert [t.name for t in listed.tools] == [t.name for t in TOOLS]
        # `execution` is 2025-11-25's (MCP-6); 2026-07-28's Tool has none (MCP-5).
        tasks = {t.execution.task_support if t.execution else None for t in listed.tools}
        assert tasks == ({"forbidden"} if mode == "legacy" else {None})
        assert [t.name for t in (await reader.list_tools()).tools] == [t.name for t in READ_TOOLS]
        me = await ok(writer, "identity")
        assert (me["actor_id"], me["role"]) == (WRITER, "writer")
        await ok(writer, "session_create", session_id="s1", topic="the MCP flow")
        fact = await ok(
            writer, "fact_create", fact_id="f1", session_id="s1", content="redis timeout at 3am"
        )
        sent = await ok(
            writer,
            "handoff_send",
            handoff_id="h1",
            session_id="s1",
            to_actor=RECEIVER,
            focus="find the cause",
        )
        inbox = await ok(receiver, "handoff_list", box="inbox")
        assert [a["record"]["handoff_id"] for a in inbox["assignments"]] == ["h1"]
        claim = {"handoff_id": "h1", "claim_id": "claim_1"}
        accepted = await ok(receiver, "handoff_accept", expected_revision=sent["revision"], **claim)
        beat = await ok(
            receiver, "handoff_heartbeat", expected_revision=accepted["revision"], **claim
        )
        await ok(receiver, "fact_create", fact_id="f2", session_id="s1", content="a bad config")
        returned = await ok(
            receiver,
            "handoff_return",
            expected_revision=beat["revision"],
            result_fact_id="f2",
            outcome="succeeded",
            **claim,
        )
        status = await ok(writer, "handoff_status", handoff_id="h1")
        assert status["revision"] == returned["revision"]
        assert status["record"]["status"] == "completed"
        found = await ok(reader, "search", q="redis", at_least_seq=fact["project_seq"])
        assert found["results"][0]["fact_id"] == "f1"
        # Errors: a reader writing, a widened identity, a wrong type, an unknown tool.
        fact_args = {"fact_id": "f3", "session_id": "s1", "content": "x"}
        assert await refused(reader, "fact_create", **fact_args) == "project_unauthorized"
        widened = {**fact_args, "actor_id": RECEIVER}
        assert await refused(writer, "fact_create", **widened) == "invalid_command"
        assert await refused(writer, "search", q="x", limit="many") == "invalid_command"
        assert await refused(writer, "handoff_status", handoff_id="nope") == "resource_not_found"
        with pytest.raises(MCPError) as unknown:
            await writer.call_tool("no_such_tool", {})
        assert unknown.value.error.code == -32602
        # A replayed operation id answers the first receipt; other content conflicts.
        again = {**fact_args, "operation_id": "op_1"}
        first = await ok(writer, "fact_create", **again)
        assert await ok(writer, "fact_create", **again) == first
        assert await refused(writer, "fact_create", **{**again, "content": "y"}) == (
            "command_conflict"
        )
        # Without an operation id the repeated create replays too (ID-4).
        twice = {"fact_id": "f4", "session_id": "s1", "content": "once"}
        assert await ok(writer, "fact_create", **twice) == await ok(writer, "fact_create", **twice)


async def _wrong_project(served: Target, mode: str) -> None:
    async with connect(served, WRITER, mode, project=OTHER) as stranger:
        with pytest.raises(MCPError):
            await stranger.list_tools()
        assert await refused(stranger, "identity") == "project_unauthorized"


async def _both(served: Target, mode: str) -> None:
    await _flow(served, mode)
    await _wrong_project(served, mode)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("mode", sorted(MODES))
def test_mcp1_mcp2_mcp3_mcp5_mcp6_sdk_client_scenario(target: Target, mode: str) -> None:
    anyio.run(_both, target, mode)
