"""The 19 memory MCP tools (MEM-13)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aidememo.agent_memory.mcp_tools import MemoryToolProvider, ToolInputError, open_provider

NAMES = [
    "memory.remember",
    "memory.recall",
    "memory.recall_hook",
    "memory.suggest_capture",
    "memory.confirm_capture",
    "memory.list",
    "memory.show",
    "memory.challenge",
    "memory.relate",
    "memory.relations",
    "memory.unrelate",
    "memory.update",
    "memory.history",
    "memory.audit",
    "memory.forget",
    "memory.forget_many",
    "memory.export",
    "memory.import",
    "memory.doctor",
]


@pytest.fixture
def tools(tmp_path: Path) -> MemoryToolProvider:
    return open_provider(str(tmp_path / "mcp.sqlite"), scope="project:demo")


def test_mem13_the_nineteen_tools_with_their_schemas(tools: MemoryToolProvider) -> None:
    listed = tools.tools()
    assert [t["name"] for t in listed] == NAMES
    by_name = {t["name"]: t for t in listed}
    remember = by_name["memory.remember"]["inputSchema"]
    assert remember["required"] == ["content", "kind"]
    assert remember["properties"]["source"]["default"] == "nuzo:mcp"
    assert by_name["memory.forget_many"]["inputSchema"]["properties"]["dry_run"]["default"] is True
    assert by_name["memory.recall"]["annotations"]["readOnlyHint"] is True
    assert by_name["memory.forget"]["annotations"]["destructiveHint"] is True
    json.dumps(listed)


def test_mem13_writes_are_attributed_to_the_server_and_refusals_are_results(
    tools: MemoryToolProvider,
) -> None:
    made = tools.call("memory.remember", {"content": "Use uv.", "kind": "instruction"})
    assert made == {"id": made["id"], "created": True, "warnings": []}
    other = tools.call("memory.remember", {"content": "Use pip.", "kind": "instruction"})
    tools.call(
        "memory.relate",
        {
            "source_memory_id": made["id"],
            "target_memory_id": other["id"],
            "relation": "conflicts_with",
            "actor": "someone:else",
        },
    )
    events = tools.call("memory.audit", {})["events"]
    assert {e["actor"] for e in events} == {"nuzo:mcp"}
    result = tools.call_result("memory.forget", {"id": made["id"], "mode": "delete"})
    assert result["isError"] is True
    body = json.loads(result["content"][0]["text"])
    assert body["code"] == "MEMORY_DELETE_CONFIRMATION_REQUIRED"
    recalled = tools.call("memory.recall", {"query": "uv"})["results"]
    assert [r["id"] for r in recalled] == [made["id"]] and recalled[0]["scope"] == "project:demo"
    assert recalled[0]["relations"][0]["direction"] == "outgoing"
    for bad in (
        {"content": "", "kind": "fact"},
        {"content": "x", "kind": "opinion"},
        {"content": "x", "kind": "fact", "provenance": {"kind": "cli", "extra": 1}},
    ):
        with pytest.raises(ToolInputError):
            tools.call("memory.remember", bad)


def test_mem13_pages_and_documents(tools: MemoryToolProvider) -> None:
    for i in range(3):
        tools.call("memory.remember", {"content": f"Paged note {i}.", "kind": "note"})
    first = tools.call("memory.list", {"limit": 2})
    assert len(first["memories"]) == 2 and first["truncated"] is True
    rest = tools.call("memory.list", {"limit": 2, "cursor": first["next_cursor"]})
    assert len(rest["memories"]) == 1 and rest["next_cursor"] is None
    exported = tools.call("memory.export", {})
    assert len(exported["document"]["memories"]) == 3
    dry = tools.call("memory.import", {"document": exported["document"], "dry_run": True})
    assert dry == {"imported": 0, "skipped": 3, "dry_run": True}
    hook = tools.call(
        "memory.recall_hook", {"task_context": "  paged\n note  ", "project_scope": "project:demo"}
    )
    assert hook["query"] == "paged note" and hook["memory_writes"] is False
    doctor = tools.call("memory.doctor", {})
    assert doctor["schema"]["status"] == "current" and doctor["counts"]["memories"] == 3
    assert len(doctor["tools"]) == 19
