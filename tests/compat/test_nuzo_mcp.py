"""aidememo's memory tools against the real Nuzo MCP server on the same store (MEM-13, MEM-97):
the same 19 tool definitions, and the same results for the read tools.

Nuzo's server (`packages/mcp-server/dist/index.js`) runs over stdio with newline-delimited
JSON-RPC, as an administrator (`NUZO_AUTHORIZATION_MODE`) with the store and default scope
from its environment; aidememo's `MemoryToolProvider` opens the same file with the same default
scope.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aidememo.agent_memory import AgentMemory
from aidememo.agent_memory.mcp_tools import MemoryToolProvider
from tests.compat.nuzo_oracle import Sample
from tests.compat.nuzo_replay import Recording

SCOPE = "project:alpha"


class NuzoMcp:
    """Nuzo's MCP server on one store, as recorded: started with the store and default scope in
    its environment, then one JSON-RPC message at a time (newline-delimited over stdio when it
    ran)."""

    def __init__(
        self, recording: Recording, store: Path, home: Path, extra_env: dict[str, str] | None = None
    ) -> None:
        env = {
            "HOME": str(home),
            "NUZO_MEMORY_STORE": str(store),
            "NUZO_MEMORY_SCOPE": SCOPE,
            "NUZO_AUTHORIZATION_MODE": "administrator",
            **(extra_env or {}),
        }
        recording.mcp_server(env, home)
        self._recording = recording
        self._next = 0
        self.request(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "aidememo-compat", "version": "1"},
            },
        )
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def _send(self, message: dict[str, Any]) -> dict[str, Any] | None:
        return self._recording.mcp(message)

    def request(self, method: str, params: dict[str, Any]) -> Any:
        self._next += 1
        reply = self._send({"jsonrpc": "2.0", "id": self._next, "method": method, "params": params})
        assert reply is not None and reply.get("id") == self._next, reply
        assert "error" not in reply, reply
        return reply["result"]

    def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = self.request("tools/call", {"name": name, "arguments": arguments})
        return result


@pytest.fixture
def servers(
    recorded: Recording, sample: tuple[Path, Sample], home: Path
) -> Iterator[tuple[NuzoMcp, MemoryToolProvider]]:
    store, _ = sample
    nuzo = NuzoMcp(recorded, store, home)
    ours = AgentMemory.open(str(store), scope=SCOPE)
    try:
        yield nuzo, MemoryToolProvider(ours, project_root=str(home))
    finally:
        ours.close()


def test_mem13_mem97_tool_definitions_are_nuzos(
    servers: tuple[NuzoMcp, MemoryToolProvider],
) -> None:
    nuzo, ours = servers
    theirs = nuzo.request("tools/list", {})["tools"]
    assert [t["name"] for t in ours.tools()] == [t["name"] for t in theirs]
    for mine, their in zip(ours.tools(), theirs, strict=True):
        # Descriptions are prose (aidememo's do not name Nuzo); the schemas are Nuzo's.
        assert _bare(mine["inputSchema"]) == _bare(their["inputSchema"]), mine["name"]
        assert mine.get("annotations") == their.get("annotations"), mine["name"]
        assert mine["execution"] == their["execution"] == {"taskSupport": "forbidden"}


def _bare(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: _bare(v) for k, v in schema.items() if k != "description"}
    if isinstance(schema, list):
        return [_bare(v) for v in schema]
    return schema


def _text(result: dict[str, Any]) -> Any:
    return result.get("isError", False), json.loads(result["content"][0]["text"])


def test_mem97_read_tools_answer_as_nuzos_server(
    servers: tuple[NuzoMcp, MemoryToolProvider], sample: tuple[Path, Sample]
) -> None:
    nuzo, ours = servers
    _, ids = sample
    i = ids.ids
    calls: list[tuple[str, dict[str, Any]]] = [
        ("memory.recall", {"query": "cache"}),
        ("memory.recall", {"query": "cache migration", "include_global": True, "limit": 3}),
        ("memory.recall", {"query": "数据库迁移每周五执行"}),
        ("memory.recall_hook", {"task_context": "Fix the  cache\nflush script", "limit": 3}),
        ("memory.list", {}),
        ("memory.list", {"scope": "user:default", "limit": 1}),
        ("memory.list", {"tags": ["cache"], "include_archived": True}),
        ("memory.show", {"id": i["old_port"]}),
        ("memory.relations", {"memory_id": i["sqlite"]}),
        ("memory.history", {"id": i["gone"]}),
        ("memory.audit", {"limit": 5}),
        ("memory.audit", {"memory_id": i["old_port"]}),
        ("memory.forget_many", {"tags": ["cache"]}),
        (
            "memory.suggest_capture",
            {
                "content": "use pnpm for the web repo and the docs site, not npm.",
                "kind": "preference",
                "reason": "user said",
            },
        ),
        ("memory.show", {"id": "mem_missing"}),
        ("memory.recall", {"query": "cache", "retrieval_mode": "semantic"}),
    ]
    for name, args in calls:
        theirs = _text(nuzo.call(name, args))
        mine = _text(ours.call_result(name, args))
        # Refusals too: the same code, message and details (SEMANTIC_INDEX_MISSING names the
        # sidecar path a semantic index would have).
        assert mine == theirs, (name, args)
