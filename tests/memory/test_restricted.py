"""Restricted sessions (MEM-20): a scope allowlist over the memory tools and the Python API."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aidememo.agent_memory import AgentMemory
from aidememo.agent_memory.errors import AgentMemoryError
from aidememo.agent_memory.errors import MemoryErrorCode as C
from aidememo.agent_memory.mcp_tools import MemoryToolProvider
from aidememo.agent_memory.scope_policy import RestrictedSession, session_allowlist

ALLOWED = ["project:nuzo"]


@pytest.fixture
def seeded(store_path: Path) -> Iterator[tuple[AgentMemory, dict[str, str]]]:
    store_path.parent.mkdir(parents=True, exist_ok=True)
    with AgentMemory.open(str(store_path), scope="project:nuzo") as store:
        ids = {
            "a": store.remember("Authorized project memory.", kind="note", tags=["x"]).id,
            "b": store.remember("Second project memory.", kind="note").id,
            "g": store.remember(
                "Global secret-free preference.",
                kind="preference",
                scope="user:default",
                source="global-source-marker",
            ).id,
        }
        ids["rel_ab"] = store.relate(ids["a"], ids["b"], relation="related_to").id
        ids["rel_ag"] = store.relate(ids["a"], ids["g"], relation="conflicts_with").id
        yield store, ids


@pytest.fixture
def tools(seeded: tuple[AgentMemory, dict[str, str]], tmp_path: Path) -> MemoryToolProvider:
    return MemoryToolProvider(seeded[0], project_root=str(tmp_path), allowed_scopes=ALLOWED)


def call(tools: MemoryToolProvider, name: str, **args: Any) -> tuple[bool, Any]:
    result = tools.call_result(name, args)
    return result["isError"], json.loads(result["content"][0]["text"])


def refused(tools: MemoryToolProvider, code: C, name: str, **args: Any) -> dict[str, Any]:
    failed, body = call(tools, name, **args)
    assert failed and body["code"] == code.value, (name, body)
    return dict(body)


def test_mem20_writes_and_reads_outside_the_allowlist_are_forbidden(
    tools: MemoryToolProvider, seeded: tuple[AgentMemory, dict[str, str]]
) -> None:
    _store, ids = seeded
    body = refused(
        tools,
        C.MEMORY_SCOPE_FORBIDDEN,
        "memory.remember",
        content="x",
        kind="note",
        scope="user:default",
    )
    assert body["details"] == {"scope": "user:default"}
    body = refused(
        tools, C.MEMORY_SCOPE_FORBIDDEN, "memory.recall", query="preference", include_global=True
    )
    assert body["details"] == {"scope": "user:default"}
    failed, hook = call(
        tools, "memory.recall_hook", task_context="preference", project_scope="project:nuzo"
    )
    assert not failed and ids["g"] not in json.dumps(hook) and hook["include_global"] is False
    refused(tools, C.MEMORY_SCOPE_FORBIDDEN, "memory.recall_hook", task_context="x")
    refused(tools, C.MEMORY_SCOPE_FORBIDDEN, "memory.list", scope="user:default")
    refused(
        tools,
        C.MEMORY_SCOPE_FORBIDDEN,
        "memory.relate",
        source_memory_id=ids["a"],
        target_memory_id=ids["g"],
        relation="related_to",
    )
    refused(tools, C.MEMORY_SCOPE_FORBIDDEN, "memory.unrelate", id=ids["rel_ag"])
    refused(tools, C.MEMORY_SCOPE_FORBIDDEN, "memory.update", id=ids["a"], scope="user:default")
    refused(tools, C.MEMORY_SCOPE_FORBIDDEN, "memory.export", scope="user:default")
    document = {
        "format": "nuzo-memory-export",
        "version": 1,
        "exported_at": "2026-01-01T00:00:00.000Z",
        "memories": [
            {
                "content": "Imported elsewhere.",
                "kind": "note",
                "scope": "user:default",
                "tags": [],
                "source": "s",
                "confidence": 1,
                "created_at": "2026-01-01T00:00:00.000Z",
                "updated_at": "2026-01-01T00:00:00.000Z",
                "last_used_at": None,
                "archived_at": None,
            }
        ],
        "relations": [],
    }
    refused(tools, C.MEMORY_SCOPE_FORBIDDEN, "memory.import", document=document)
    assert _store.list(all_scopes=True, include_archived=True).__len__() == 3


def test_mem20_destructive_operations_outside_the_allowlist_change_nothing(
    tools: MemoryToolProvider, seeded: tuple[AgentMemory, dict[str, str]]
) -> None:
    store, ids = seeded
    refused(
        tools, C.MEMORY_SCOPE_FORBIDDEN, "memory.forget", id=ids["g"], mode="delete", confirm=True
    )
    refused(
        tools, C.MEMORY_SCOPE_REQUIRED, "memory.forget_many", all=True, dry_run=False, confirm=True
    )
    refused(tools, C.MEMORY_SCOPE_REQUIRED, "memory.forget_many", tags=["x"], dry_run=False)
    refused(tools, C.MEMORY_SCOPE_FORBIDDEN, "memory.forget_many", scope="user:default")
    refused(
        tools,
        C.MEMORY_SCOPE_FORBIDDEN,
        "memory.challenge",
        id=ids["g"],
        outcome="stale",
        reason="old",
    )
    assert store.get(ids["g"]).archived_at is None and store.get(ids["g"]).revision == 1


def test_mem20_unscoped_ranges_need_a_scope(
    tools: MemoryToolProvider, seeded: tuple[AgentMemory, dict[str, str]]
) -> None:
    _store, ids = seeded
    refused(tools, C.MEMORY_SCOPE_REQUIRED, "memory.list")
    refused(tools, C.MEMORY_SCOPE_REQUIRED, "memory.export")
    refused(tools, C.MEMORY_SCOPE_REQUIRED, "memory.audit")
    refused(tools, C.MEMORY_SCOPE_REQUIRED, "memory.history", id="mem_missing")
    failed, audit = call(tools, "memory.audit", memory_id=ids["a"])
    assert not failed and audit["events"]
    failed, listed = call(tools, "memory.list", scope="project:nuzo")
    assert not failed and len(listed["memories"]) == 2


def test_mem20_forbidden_memory_ids_are_redacted_and_cross_scope_relations_hidden(
    tools: MemoryToolProvider, seeded: tuple[AgentMemory, dict[str, str]]
) -> None:
    _store, ids = seeded
    for name, args in (
        ("memory.show", {"id": ids["g"]}),
        ("memory.history", {"id": ids["g"]}),
        ("memory.relations", {"memory_id": ids["g"]}),
        ("memory.forget", {"id": ids["g"]}),
    ):
        result = tools.call_result(name, args)
        text = result["content"][0]["text"]
        assert result["isError"] and json.loads(text) == {
            "code": "MEMORY_SCOPE_FORBIDDEN",
            "message": "Memory scope is not authorized.",
        }
        assert "user:default" not in text and "global-source-marker" not in text
    failed, shown = call(tools, "memory.show", id=ids["a"])
    assert not failed
    assert [r["id"] for r in shown["relations"]] == [ids["rel_ab"]]
    assert [r["id"] for r in shown["memory"]["relations"]] == [ids["rel_ab"]]
    failed, rels = call(tools, "memory.relations", memory_id=ids["a"])
    assert [r["id"] for r in rels["relations"]] == [ids["rel_ab"]]
    assert ids["g"] not in json.dumps(call(tools, "memory.list", scope="project:nuzo")[1])
    failed, doctor = call(tools, "memory.doctor")
    assert doctor["authorization"] == {"mode": "restricted"}
    # Counts cover the allowed scopes only: a, b, the relation between them, their events.
    assert (doctor["counts"]["memories"], doctor["counts"]["relations"]) == (2, 1)
    assert "repair" not in json.dumps([t["name"] for t in tools.tools()])


def test_mem20_the_administrator_session_is_unchanged(
    seeded: tuple[AgentMemory, dict[str, str]], tmp_path: Path
) -> None:
    store, ids = seeded
    admin = MemoryToolProvider(store, project_root=str(tmp_path))
    failed, shown = call(admin, "memory.show", id=ids["g"])
    assert not failed and shown["memory"]["scope"] == "user:default"
    assert len(call(admin, "memory.list")[1]["memories"]) == 3


def test_mem20_core_restricted_session(seeded: tuple[AgentMemory, dict[str, str]]) -> None:
    store, ids = seeded
    session = RestrictedSession(store, ALLOWED)
    for code, op in (
        (
            C.MEMORY_SCOPE_FORBIDDEN,
            lambda: session.remember("x", kind="note", scope="user:default"),
        ),
        (C.MEMORY_SCOPE_REQUIRED, session.list),
        (C.MEMORY_SCOPE_REQUIRED, lambda: session.forget_many(all=True)),
        (C.MEMORY_SCOPE_FORBIDDEN, lambda: session.update(ids["a"], scope="user:default")),
        (C.MEMORY_SCOPE_FORBIDDEN, lambda: session.show(ids["g"])),
        (C.MEMORY_SCOPE_FORBIDDEN, lambda: session.recall("preference", include_global=True)),
        (C.MEMORY_SCOPE_REQUIRED, session.export),
        (
            C.MEMORY_SCOPE_FORBIDDEN,
            lambda: session.challenge(ids["g"], outcome="stale", reason="r"),
        ),
        (C.MEMORY_SCOPE_FORBIDDEN, lambda: session.relations(ids["g"])),
        (C.MEMORY_SCOPE_FORBIDDEN, lambda: session.unrelate(ids["rel_ag"])),
        (C.MEMORY_SCOPE_FORBIDDEN, lambda: session.history(ids["g"])),
        (C.MEMORY_SCOPE_FORBIDDEN, lambda: session.forget(ids["g"])),
        (
            C.MEMORY_SCOPE_FORBIDDEN,
            lambda: session.suggest_capture("x", kind="note", reason="r", scope="user:default"),
        ),
    ):
        with pytest.raises(AgentMemoryError) as info:
            op()
        assert info.value.code is code
    assert session.remember("Allowed.", kind="note").scope == "project:nuzo"
    assert len(session.list(scope="project:nuzo")) == 3
    assert [r.id for r in session.relations(ids["a"])] == [ids["rel_ab"]]


def test_mem20_session_allowlist_from_the_environment(tmp_path: Path) -> None:
    root = str(tmp_path)
    assert session_allowlist({}, root) is None
    restricted = session_allowlist({"NUZO_AUTHORIZATION_MODE": "restricted"}, root)
    assert restricted is not None and restricted[1] == "user:default"
    assert restricted[0].startswith("project:") and restricted[0] != "project:auto"
    env = {"NUZO_AUTHORIZATION_MODE": "restricted", "NUZO_AUTHORIZED_SCOPES": "project:a, team:b"}
    assert session_allowlist(env, root) == ["project:a", "team:b"]
    for bad in (
        {"NUZO_AUTHORIZATION_MODE": "root"},
        {"NUZO_AUTHORIZED_SCOPES": "project:a"},
        {"NUZO_AUTHORIZATION_MODE": "restricted", "NUZO_AUTHORIZED_SCOPES": " , "},
        {"NUZO_AUTHORIZATION_MODE": "restricted", "NUZO_AUTHORIZED_SCOPES": "nope"},
    ):
        with pytest.raises(AgentMemoryError) as info:
            session_allowlist(bad, root)
        assert info.value.code is C.MEMORY_CONFIG_INVALID


def test_mem20_a_configured_team_scope_is_not_recalled_outside_the_allowlist(
    store_path: Path, tmp_path: Path
) -> None:
    store_path.parent.mkdir(parents=True, exist_ok=True)
    with AgentMemory.open(str(store_path), scope="project:nuzo", team_scope="team:core") as store:
        store.remember("Cache rule for the project.", kind="note")
        store.remember("Cache rule for the team.", kind="note", scope="team:core")
        admin = MemoryToolProvider(store, project_root=str(tmp_path))
        assert len(call(admin, "memory.recall", query="cache rule")[1]["results"]) == 2
        tools = MemoryToolProvider(store, project_root=str(tmp_path), allowed_scopes=ALLOWED)
        failed, found = call(tools, "memory.recall", query="cache rule")
        assert not failed and [r["scope"] for r in found["results"]] == ["project:nuzo"]


def test_mem20_a_restricted_session_fits_its_default_scope_to_the_allowlist(
    store_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from aidememo.agent_memory.mcp_tools import open_provider

    monkeypatch.setenv("NUZO_AUTHORIZATION_MODE", "restricted")
    monkeypatch.setenv("NUZO_AUTHORIZED_SCOPES", "project:nuzo")
    provider = open_provider(str(store_path), restricted_by_env=True)
    try:
        assert (provider.store.scope, provider.store.include_global) == ("project:nuzo", False)
        failed, made = call(provider, "memory.remember", content="Default scope.", kind="note")
        assert not failed and provider.store.get(made["id"]).scope == "project:nuzo"
    finally:
        provider.store.close()
    monkeypatch.setenv("NUZO_MEMORY_SCOPE", "user:default")
    with pytest.raises(AgentMemoryError) as info:
        open_provider(str(store_path), restricted_by_env=True)
    assert info.value.code is C.MEMORY_CONFIG_INVALID


def test_mem20_relation_events_naming_other_scopes_are_hidden(
    tools: MemoryToolProvider, seeded: tuple[AgentMemory, dict[str, str]], tmp_path: Path
) -> None:
    store, ids = seeded
    admin = MemoryToolProvider(store, project_root=str(tmp_path))

    def relation_events(provider: MemoryToolProvider) -> list[str]:
        events = call(provider, "memory.history", id=ids["a"])[1]["events"]
        return [e["payload"]["relationId"] for e in events if "relationId" in e["payload"]]

    assert sorted(relation_events(admin)) == sorted([ids["rel_ab"], ids["rel_ag"]])
    assert relation_events(tools) == [ids["rel_ab"]]
    audit = json.dumps(call(tools, "memory.audit", scope="project:nuzo")[1])
    assert ids["g"] not in audit and "user:default" not in audit


def test_mem20_core_session_show_history_audit_hide_other_scopes_relations(
    seeded: tuple[AgentMemory, dict[str, str]],
) -> None:
    """The Python API filters as MCP does: no relation or relation event whose other end lies
    outside the allowlist, in show, history or audit."""
    store, ids = seeded
    session = RestrictedSession(store, ALLOWED)
    shown = session.show(ids["a"])
    assert [r.id for r in shown["relations"]] == [ids["rel_ab"]]
    for events in (shown["events"], session.history(ids["a"]), session.audit(scope="project:nuzo")):
        dumped = json.dumps([e.to_json() for e in events])
        assert ids["g"] not in dumped and "user:default" not in dumped
        assert ids["rel_ab"] in dumped  # the relation inside the allowlist stays
    admin = store.show(ids["a"])
    assert {r.id for r in admin["relations"]} == {ids["rel_ab"], ids["rel_ag"]}


def test_mem20_relation_events_are_filtered_by_the_scopes_they_recorded(
    tools: MemoryToolProvider, seeded: tuple[AgentMemory, dict[str, str]]
) -> None:
    """A relation event names its ends' scopes as they were: once `g` moved into the allowlist,
    the event recording it in `user:default` still stays hidden from a restricted session."""
    store, ids = seeded
    store.update(ids["g"], scope="project:nuzo")
    session = RestrictedSession(store, ALLOWED)
    for events in (
        call(tools, "memory.history", id=ids["a"])[1]["events"],
        [e.to_json() for e in session.history(ids["a"])],
    ):
        dumped = json.dumps(events)
        assert "user:default" not in dumped and ids["rel_ag"] not in dumped
        assert ids["rel_ab"] in dumped
