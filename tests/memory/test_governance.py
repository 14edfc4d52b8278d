"""Relation-governance review (MEM-21) and the semantic commands without a model (MEM-22)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from aidememo.agent_memory import AgentMemory
from aidememo.agent_memory.errors import AgentMemoryError
from aidememo.agent_memory.errors import MemoryErrorCode as C
from aidememo.agent_memory.governance import lifecycle, review_relations
from aidememo.agent_memory.relations import relate
from aidememo.agent_memory.scope_policy import RestrictedSession
from aidememo.cli.main import main

DUP = "Use pnpm for the web repo, not npm."


def _snapshot(path: Path) -> list[object]:
    with sqlite3.connect(path) as conn:
        return [
            conn.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall()
            for table in ("memories", "memory_events", "memory_relations")
        ]


def _fill(store: AgentMemory) -> dict[str, str]:
    ids = {
        "a": store.remember(DUP, kind="preference", tags=["tooling"]).id,
        "b": store.remember(DUP, kind="preference", tags=["tooling"]).id,
        "c": store.remember(
            "The session store uses SQLite storage with WAL mode.", kind="fact", tags=["storage"]
        ).id,
        "d": store.remember(
            "The session store uses PostgreSQL storage with WAL mode.",
            kind="fact",
            tags=["storage"],
            review_after="2020-01-01T00:00:00.000Z",
        ).id,
        "other": store.remember(DUP, kind="preference", scope="project:other").id,
    }
    relate(store, ids["b"], ids["a"], relation="duplicate_of")
    return ids


def test_mem21_review_reports_duplicates_revisions_and_existing_relations(
    store: AgentMemory, store_path: Path
) -> None:
    ids = _fill(store)
    before = _snapshot(store_path)
    report = review_relations(store)
    assert _snapshot(store_path) == before
    assert (report["mode"], report["memory_writes"], report["audit_writes"]) == (
        "read_only",
        False,
        False,
    )
    assert (report["scope"], report["reviewed_memories"], report["scanned_memories"]) == (
        "project:demo",
        4,
        4,
    )
    pairs = {
        frozenset((c["primary_memory_id"], c["candidate_memory_id"])): c
        for c in report["candidates"]
    }
    dup = pairs[frozenset((ids["a"], ids["b"]))]
    assert dup["relationship"] == "exact_duplicate"
    assert dup["reason_codes"][0] == "exact_normalized_content"
    assert dup["state"] == "already_related"
    assert [r["relation"] for r in dup["existing_relations"]] == ["duplicate_of"]
    revision = pairs[frozenset((ids["c"], ids["d"]))]
    assert (revision["relationship"], revision["state"]) == ("update_candidate", "unreviewed")
    assert ids["other"] not in json.dumps(report)
    assert "pnpm" not in json.dumps(report) and "SQLite" not in json.dumps(report)
    # unreviewed pairs come before already-related ones
    assert report["candidates"][-1]["state"] == "already_related"


def test_mem21_review_limit_truncates_and_bad_limits_are_refused(store: AgentMemory) -> None:
    _fill(store)
    one = review_relations(store, limit=1)
    assert len(one["candidates"]) == 1 and one["candidate_results_truncated"] is True
    assert review_relations(store)["candidate_limit"] == 50
    for bad in (0, 201, -1, True):
        with pytest.raises(AgentMemoryError) as refused:
            review_relations(store, limit=bad)
        assert refused.value.code == C.MEMORY_RELATION_REVIEW_LIMIT_INVALID
    with pytest.raises(AgentMemoryError) as refused:
        review_relations(store, scope="bogus scope")
    assert refused.value.code == C.MEMORY_SCOPE_INVALID


def test_mem21_review_lifecycles_archived_and_due_filters(store: AgentMemory) -> None:
    ids = _fill(store)
    store.forget(ids["b"], reason="dup")
    now = store.now()
    assert lifecycle(store.get(ids["b"]), now) == "archived"
    assert lifecycle(store.get(ids["d"]), now) == "review_due"
    assert lifecycle(store.get(ids["c"]), now) == "active"
    expired = store.remember("x", kind="note", expires_at="2020-01-01T00:00:00.000Z")
    assert lifecycle(expired, now) == "expired"
    plain = review_relations(store)
    assert ids["b"] not in json.dumps(plain)
    archived = review_relations(store, include_archived=True)
    assert any(c["primary_lifecycle"] == "archived" for c in archived["candidates"])
    due = review_relations(store, needs_review=True)
    assert {c["primary_memory_id"] for c in due["candidates"]} <= {ids["d"], expired.id}
    assert due["needs_review"] is True and due["reviewed_memories"] == 2


def test_mem21_restricted_session_reviews_only_allowed_scopes(store: AgentMemory) -> None:
    _fill(store)
    session = RestrictedSession(store, ["project:demo"])
    assert session.review_relations()["scope"] == "project:demo"
    with pytest.raises(AgentMemoryError) as refused:
        session.review_relations(scope="project:other")
    assert refused.value.code == C.MEMORY_SCOPE_FORBIDDEN
    with pytest.raises(AgentMemoryError) as refused:
        session.review_relations(scope="project:other", limit=0)
    assert refused.value.code == C.MEMORY_RELATION_REVIEW_LIMIT_INVALID


def test_mem21_cli_review_relations_text_and_json(
    store: AgentMemory, store_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _fill(store)
    base = ["memory", "--store", str(store_path), "--scope", "project:demo", "review-relations"]
    assert main([*base, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["candidates"]
    assert main(base) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "Relation governance review (read-only)"
    assert lines[1].startswith("scope=project:demo\treviewed=4\tscanned=4/200\tcandidates=")
    assert any(":duplicate_of:rel_" in line for line in lines[2:-2])
    assert lines[-2].startswith("No changes were made.")
    assert main([*base, "--limit", "201"]) == 1
    assert capsys.readouterr().err.startswith("MEMORY_RELATION_REVIEW_LIMIT_INVALID: ")


def test_mem22_cli_semantic_status_counts_active_memories_of_every_scope(
    store: AgentMemory, store_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store.remember("a", kind="note")
    store.remember("b", kind="note", scope="project:x")
    store.forget(store.remember("c", kind="note").id)
    base = ["memory", "--store", str(store_path), "semantic"]
    assert main([*base, "status", "--json"]) == 0
    index = json.loads(capsys.readouterr().out)["index"]
    assert (index["activeMemories"], index["missingMemories"]) == (2, 2)
    assert main([*base, "status"]) == 0
    assert capsys.readouterr().out.splitlines()[2] == "Indexed: 0/2"
    assert main([*base, "rebuild"]) == 1
    assert capsys.readouterr().err.startswith("SEMANTIC_MODEL_MISSING: ")
    assert main([*base, "clear", "--yes"]) == 0
    assert capsys.readouterr().out == "Semantic index already absent\n"
