"""Restricted sessions against the real Nuzo MCP server (MEM-20): with the same allowlist on
the same store, each memory tool call is refused with Nuzo's code, with details exactly where
Nuzo keeps them (a forbidden memory id's are redacted), and the allowed reads answer alike,
cross-scope relations left out as Nuzo leaves them out."""

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
from tests.compat.test_nuzo_mcp import NuzoMcp

SCOPE = "project:alpha"


class RestrictedNuzoMcp(NuzoMcp):
    """Nuzo's MCP server in restricted mode with the allowlist `[SCOPE]`, as recorded."""

    def __init__(self, recording: Recording, store: Path, home: Path) -> None:
        super().__init__(
            recording,
            store,
            home,
            {"NUZO_AUTHORIZATION_MODE": "restricted", "NUZO_AUTHORIZED_SCOPES": SCOPE},
        )


@pytest.fixture
def servers(
    recorded: Recording, sample: tuple[Path, Sample], home: Path
) -> Iterator[tuple[NuzoMcp, MemoryToolProvider]]:
    store, _ = sample
    nuzo = RestrictedNuzoMcp(recorded, store, home)
    ours = AgentMemory.open(str(store), scope=SCOPE)
    try:
        yield nuzo, MemoryToolProvider(ours, project_root=str(home), allowed_scopes=[SCOPE])
    finally:
        ours.close()


def _document(scope: str) -> dict[str, Any]:
    item: dict[str, Any] = {
        "content": "Imported note.",
        "kind": "note",
        "tags": [],
        "source": "s",
        "confidence": 1,
        "created_at": "2026-01-01T00:00:00.000Z",
        "updated_at": "2026-01-01T00:00:00.000Z",
        "last_used_at": None,
        "archived_at": None,
        "scope": scope,
    }
    return {
        "format": "nuzo-memory-export",
        "version": 1,
        "exported_at": "2026-01-01T00:00:00.000Z",
        "memories": [item],
        "relations": [],
    }


def _text(result: dict[str, Any]) -> tuple[bool, Any]:
    return bool(result.get("isError", False)), json.loads(result["content"][0]["text"])


def test_mem20_restricted_calls_answer_as_nuzos_restricted_server(
    servers: tuple[NuzoMcp, MemoryToolProvider], sample: tuple[Path, Sample]
) -> None:
    nuzo, ours = servers
    i = sample[1].ids
    # A relation from an allowed memory to a forbidden one, and a supersession across scopes:
    # their events are in the allowed memory's history, which must not show them.
    ours.store.relate(i["pnpm"], i["beta"], relation="related_to", reason="cross")
    ours.store.challenge(i["deploy"], outcome="superseded", reason="r", superseded_by=i["team"])
    calls: list[tuple[str, dict[str, Any]]] = [
        ("memory.remember", {"content": "x", "kind": "note", "scope": "user:default"}),
        ("memory.recall", {"query": "cache", "include_global": True}),
        ("memory.recall", {"query": "cache", "scope": "project:beta"}),
        ("memory.recall_hook", {"task_context": "cache flush", "project_scope": SCOPE}),
        ("memory.list", {}),
        ("memory.list", {"scope": "user:default"}),
        ("memory.list", {"scope": SCOPE, "limit": 3}),
        ("memory.show", {"id": i["global_pref"]}),
        ("memory.show", {"id": i["sqlite"]}),
        ("memory.relations", {"memory_id": i["sqlite"]}),
        ("memory.relations", {"memory_id": i["beta"]}),
        ("memory.history", {"id": i["beta"]}),
        ("memory.history", {"id": i["gone"]}),
        ("memory.audit", {}),
        ("memory.audit", {"scope": SCOPE, "limit": 50}),
        ("memory.audit", {"memory_id": i["sqlite"]}),
        ("memory.history", {"id": i["sqlite"]}),
        ("memory.show", {"id": i["cjk"]}),
        ("memory.audit", {"scope": "team:core"}),
        ("memory.update", {"id": i["pnpm"], "scope": "user:default"}),
        ("memory.update", {"id": i["team"], "content": "changed"}),
        ("memory.forget", {"id": i["agent"], "mode": "delete", "confirm": True}),
        ("memory.forget_many", {"all": True}),
        ("memory.forget_many", {"tags": ["cache"]}),
        ("memory.forget_many", {"scope": "user:default"}),
        ("memory.export", {}),
        ("memory.export", {"scope": "project:beta"}),
        ("memory.challenge", {"id": i["beta"], "outcome": "stale", "reason": "old"}),
        (
            "memory.relate",
            {
                "source_memory_id": i["pnpm"],
                "target_memory_id": i["beta"],
                "relation": "related_to",
            },
        ),
        ("memory.unrelate", {"id": sample[1].relations["conflict"]}),
        ("memory.history", {"id": i["pnpm"]}),
        ("memory.history", {"id": i["deploy"]}),
        ("memory.show", {"id": i["pnpm"]}),
        ("memory.show", {"id": i["deploy"]}),
        ("memory.audit", {"memory_id": i["pnpm"]}),
        ("memory.audit", {"scope": SCOPE, "limit": 200}),
        (
            "memory.confirm_capture",
            {
                "content": "Beta moved its cache.",
                "kind": "fact",
                "reason": "user said",
                "decision": "update",
                "target_memory_id": i["beta"],
                "expected_revision": 1,
                "confirm": True,
            },
        ),
        (
            "memory.suggest_capture",
            {"content": "x cache", "kind": "note", "reason": "r", "scope": "project:beta"},
        ),
        ("memory.import", {"document": _document("project:beta"), "dry_run": True}),
        ("memory.import", {"document": _document(SCOPE), "scope": "team:core"}),
    ]
    for name, args in calls:
        theirs = _text(nuzo.call(name, args))
        mine = _text(ours.call_result(name, args))
        if theirs[0]:
            assert mine[0] is True, (name, args, mine)
            assert mine[1]["code"] == theirs[1]["code"], (name, args, mine, theirs)
            assert mine[1].get("details") == theirs[1].get("details"), (name, args, mine, theirs)
        else:
            assert mine == theirs, (name, args)
