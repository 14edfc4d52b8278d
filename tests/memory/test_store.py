"""The store's operations and their transaction guarantees (SPEC.md MEM-4, MEM-5, MEM-7, MEM-8)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from aidememo.agent_memory import AgentMemory, AgentMemoryError, MemoryErrorCode


def _count(path: Path, table: str) -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])


def test_mem5_remember_commits_row_fts_and_event_together(
    store: AgentMemory, store_path: Path
) -> None:
    memory = store.remember("Use uv for Python installs.", kind="instruction", tags=["python"])
    assert memory.revision == 1 and memory.id.startswith("mem_")
    assert (_count(store_path, "memories"), _count(store_path, "memories_fts")) == (1, 1)
    [event] = store.history(memory.id)
    assert event.event_type == "memory.created" and event.payload["tags"] == ["python"]
    assert "Use uv" not in str(event.payload)


def test_mem4_policy_refuses_before_any_write(store: AgentMemory, store_path: Path) -> None:
    secret = "token ghp_123456789012345678901234567890123456"
    cases: list[tuple[str, dict[str, Any], MemoryErrorCode]] = [
        ("   ", {}, MemoryErrorCode.MEMORY_CONTENT_EMPTY),
        ("x" * 8001, {}, MemoryErrorCode.MEMORY_CONTENT_TOO_LONG),
        ("ok", {"kind": "opinion"}, MemoryErrorCode.MEMORY_KIND_UNSUPPORTED),
        ("ok", {"scope": "org:x"}, MemoryErrorCode.MEMORY_SCOPE_INVALID),
        ("ok", {"tags": ["Bad Tag"]}, MemoryErrorCode.MEMORY_TAG_INVALID),
        ("ok", {"tags": [f"t{i}" for i in range(33)]}, MemoryErrorCode.MEMORY_TAG_LIMIT_EXCEEDED),
        ("ok", {"confidence": 1.5}, MemoryErrorCode.MEMORY_CONFIDENCE_INVALID),
        ("ok", {"review_after": "soon"}, MemoryErrorCode.MEMORY_DATE_INVALID),
        (
            "ok",
            {"provenance": {"kind": "file", "path": "../secrets.env"}},
            MemoryErrorCode.MEMORY_PROVENANCE_PATH_UNSAFE,
        ),
        (secret, {}, MemoryErrorCode.MEMORY_SECRET_DETECTED),
        (
            "ok",
            {"provenance": {"kind": "cli", "reason": "AKIAIOSFODNN7EXAMPLE"}},
            MemoryErrorCode.MEMORY_SECRET_DETECTED,
        ),
    ]
    for content, kwargs, code in cases:
        with pytest.raises(AgentMemoryError) as caught:
            store.remember(content, **({"kind": "fact"} | kwargs))
        assert caught.value.code == code, kwargs
    assert _count(store_path, "memories") == 0 and _count(store_path, "memory_events") == 0


def test_mem4_secret_findings_report_kind_and_message_never_the_value(store: AgentMemory) -> None:
    with pytest.raises(AgentMemoryError) as caught:
        store.remember("Authorization: Bearer abcdefghijklmnopqrstuvwxyz123456", kind="fact")
    assert caught.value.details == {
        "findings": [
            {"kind": "bearer_token", "message": "Bearer tokens should not be stored as memory."}
        ]
    }
    assert "abcdefghij" not in str(caught.value.to_dict())


def test_mem4_a_secret_in_a_relations_reason_is_refused_and_nothing_written(
    store: AgentMemory, store_path: Path
) -> None:
    a = store.remember("Deploys go through staging.", kind="fact")
    b = store.remember("Staging runs the smoke suite.", kind="fact")
    events = _count(store_path, "memory_events")
    token = "ghp_123456789012345678901234567890123456"
    with pytest.raises(AgentMemoryError) as caught:
        store.relate(a.id, b.id, relation="related_to", reason=f"see {token}")
    assert caught.value.code == MemoryErrorCode.MEMORY_SECRET_DETECTED
    assert [f["kind"] for f in caught.value.details["findings"]] == ["github_token"]
    assert token not in str(caught.value.to_dict())
    assert _count(store_path, "memory_relations") == 0
    assert _count(store_path, "memory_events") == events
    assert store.relate(a.id, b.id, relation="related_to", reason="see the runbook").id


def test_mem5_stale_expected_revision_conflicts_and_changes_nothing(
    store: AgentMemory, store_path: Path
) -> None:
    memory = store.remember("Deploys go through staging.", kind="fact")
    other = AgentMemory.open(str(store_path), scope="project:demo")
    try:
        other.update(memory.id, content="Deploys go through staging first.", expected_revision=1)
    finally:
        other.close()
    for call in (
        lambda: store.update(memory.id, content="stale", expected_revision=1),
        lambda: store.forget(memory.id, expected_revision=1),
    ):
        with pytest.raises(AgentMemoryError) as caught:
            call()
        assert caught.value.code == MemoryErrorCode.MEMORY_REVISION_CONFLICT
        assert caught.value.details == {
            "id": memory.id,
            "expectedRevision": 1,
            "currentRevision": 2,
        }
    current = store.get(memory.id)
    assert (current.revision, current.content) == (2, "Deploys go through staging first.")
    assert len(store.history(memory.id)) == 2


def test_mem5_fts_failure_rolls_back_row_and_event(store: AgentMemory, store_path: Path) -> None:
    store.db.conn.execute(
        "CREATE TRIGGER fail_fts BEFORE INSERT ON memory_events BEGIN"
        " SELECT RAISE(ABORT, 'injected audit failure'); END"
    )
    with pytest.raises(sqlite3.DatabaseError):
        store.remember("Never half written.", kind="fact")
    assert _count(store_path, "memories") == 0 and _count(store_path, "memories_fts") == 0
    store.db.conn.execute("DROP TRIGGER fail_fts")
    store.remember("Written after the failure.", kind="fact")
    assert _count(store_path, "memories") == 1


def test_mem7_remember_never_deduplicates_but_confirmed_create_does(store: AgentMemory) -> None:
    store.remember("Prefer small PRs.", kind="preference")
    store.remember("Prefer small PRs.", kind="preference")
    assert len(store.list()) == 2
    result = store.confirm_capture(
        "  prefer   SMALL prs. ",
        decision="create",
        kind="preference",
        reason="user said so",
        confirm=True,
    )
    assert result["status"] == "skipped" and result["memory_writes"] is False
    with pytest.raises(AgentMemoryError) as caught:
        store.confirm_capture("New idea.", decision="create", kind="note", reason="r")
    assert caught.value.code == MemoryErrorCode.MEMORY_CAPTURE_CONFIRMATION_REQUIRED


def test_mem8_archive_hides_from_recall_and_delete_cascades_relations(store: AgentMemory) -> None:
    a = store.remember("Old rule about flaky retries.", kind="instruction")
    b = store.remember("New rule about flaky retries.", kind="instruction")
    store.relate(b.id, a.id, relation="supersedes", reason="newer")
    store.forget(a.id)
    archived = store.get(a.id)
    assert archived.archived_at is not None and archived.revision == 2
    assert [r.memory.id for r in store.recall("flaky retries")] == [b.id]
    assert len(store.relations(b.id)) == 1
    with pytest.raises(AgentMemoryError) as caught:
        store.forget(b.id, mode="delete")
    assert caught.value.code == MemoryErrorCode.MEMORY_DELETE_CONFIRMATION_REQUIRED
    store.forget(b.id, mode="delete", confirm=True)
    assert store.db.find(b.id) is None and store.relations(a.id) == []
    assert [e.event_type for e in store.history(b.id)][-1] == "memory.deleted"


def test_mem8_challenge_keeps_content_and_supersedes(store: AgentMemory) -> None:
    old = store.remember("Releases ship on Fridays.", kind="project_decision")
    new = store.remember("Releases ship on Tuesdays.", kind="project_decision")
    memory, relation = store.challenge(
        old.id, outcome="superseded", reason="moved to Tuesdays", superseded_by=new.id
    )
    assert memory.content == old.content and memory.confidence_state == "deprecated"
    assert memory.review_after is not None and memory.revision == 2
    assert relation is not None and (relation.source_memory_id, relation.target_memory_id) == (
        new.id,
        old.id,
    )
    types = {e.event_type for e in store.history(old.id)}
    assert {"memory.updated", "memory.challenged"} <= types
    valid, _ = store.challenge(new.id, outcome="valid", reason="confirmed")
    assert valid.confidence_state == "user_confirmed" and valid.review_after is None


def test_mem8_forget_many_is_a_dry_run_by_default(store: AgentMemory) -> None:
    for n in range(3):
        store.remember(f"Note {n} about caching.", kind="note", tags=["cache"])
    preview = store.forget_many(tags=["cache"])
    assert (preview["matched"], preview["affected"], preview["dryRun"]) == (3, 0, True)
    assert len(store.list()) == 3
    applied = store.forget_many(tags=["cache"], dry_run=False)
    assert applied["affected"] == 3 and store.list() == []
    with pytest.raises(AgentMemoryError) as caught:
        store.forget_many()
    assert caught.value.code == MemoryErrorCode.MEMORY_BULK_SELECTOR_REQUIRED


def test_mem5_fts_rows_placed_elsewhere_are_found_and_moved(store: AgentMemory) -> None:
    a = store.remember("Relocated index row about canaries.", kind="fact")
    b = store.remember("Second row about canaries.", kind="fact")
    conn = store.db.conn
    with store.db.write():  # as another writer leaves them: FTS rowids unrelated to memories'
        rows = conn.execute("SELECT id, scope, content, tags FROM memories_fts").fetchall()
        conn.execute("DELETE FROM memories_fts")
        for offset, row in enumerate(rows):
            conn.execute(
                "INSERT INTO memories_fts (rowid, id, scope, content, tags) VALUES (?, ?, ?, ?, ?)",
                (1000 + offset, *row),
            )
    store.update(a.id, content="Relocated index row about canary deploys.")
    store.forget(b.id)
    fts = conn.execute("SELECT id, content FROM memories_fts").fetchall()
    assert fts == [(a.id, "Relocated index row about canary deploys.")]
    [rowid] = conn.execute("SELECT rowid FROM memories WHERE id = ?", (a.id,)).fetchone()
    assert conn.execute("SELECT id FROM memories_fts WHERE rowid = ?", (rowid,)).fetchone() == (
        a.id,
    )
    assert [r.memory.id for r in store.recall("canary deploys")] == [a.id]


def test_mem6_mem14_a_drifted_index_never_returns_rows_it_disagrees_with(
    store: AgentMemory,
) -> None:
    a = store.remember("Drift check for the gateway.", kind="fact")
    b = store.remember("Another gateway drift note.", kind="fact")
    conn = store.db.conn
    conn.execute("UPDATE memories SET archived_at = updated_at WHERE id = ?", (a.id,))
    conn.execute("UPDATE memories SET scope = 'project:moved' WHERE id = ?", (b.id,))
    assert store.recall("gateway drift") == []
    assert [r.memory.id for r in store.recall("gateway drift", scope="project:moved")] == []


def test_mem4_oversized_inputs_get_their_own_codes(store: AgentMemory) -> None:
    memory = store.remember("Bounded inputs.", kind="note")
    long = "x" * 1001
    cases: list[tuple[Callable[[], object], MemoryErrorCode]] = [
        (lambda: store.get("m" * 257), MemoryErrorCode.MEMORY_ID_INVALID),
        (lambda: store.get("  "), MemoryErrorCode.MEMORY_ID_EMPTY),
        (
            lambda: store.remember("ok", kind="note", actor="a" * 257),
            MemoryErrorCode.MEMORY_ACTOR_INVALID,
        ),
        (
            lambda: store.remember("ok", kind="note", source="s" * 257),
            MemoryErrorCode.MEMORY_SOURCE_TOO_LONG,
        ),
        (lambda: store.forget(memory.id, reason=long), MemoryErrorCode.MEMORY_REASON_TOO_LONG),
        (
            lambda: store.challenge(memory.id, outcome="stale", reason=long),
            MemoryErrorCode.MEMORY_REASON_TOO_LONG,
        ),
        (
            lambda: store.challenge(memory.id, outcome="wrong", reason="r"),
            MemoryErrorCode.MEMORY_CHALLENGE_OUTCOME_INVALID,
        ),
        (lambda: store.update(memory.id), MemoryErrorCode.MEMORY_UPDATE_EMPTY),
        (
            lambda: store.update(memory.id, content="y", expected_revision=0),
            MemoryErrorCode.MEMORY_REVISION_INVALID,
        ),
        (lambda: store.list(tags=["t"] * 33), MemoryErrorCode.MEMORY_TAG_LIMIT_EXCEEDED),
        (
            lambda: store.audit(event_types=["memory.nope"]),
            MemoryErrorCode.MEMORY_AUDIT_EVENT_TYPE_INVALID,
        ),
        (
            lambda: store.audit(since="2026-02-01", until="2026-01-01"),
            MemoryErrorCode.MEMORY_AUDIT_TIME_RANGE_INVALID,
        ),
        (
            lambda: store.relate(memory.id, memory.id, relation="related_to"),
            MemoryErrorCode.MEMORY_RELATION_SELF_INVALID,
        ),
        (
            lambda: store.relate(memory.id, "mem_missing", relation="related_to"),
            MemoryErrorCode.MEMORY_RELATION_TARGET_NOT_FOUND,
        ),
        (lambda: store.unrelate("rel_missing"), MemoryErrorCode.MEMORY_RELATION_NOT_FOUND),
        (lambda: store.history(memory.id, cursor="!!"), MemoryErrorCode.MEMORY_CURSOR_INVALID),
    ]
    for call, code in cases:
        with pytest.raises(AgentMemoryError) as caught:
            call()
        assert caught.value.code == code
    assert store.get(memory.id).revision == 1


def test_mem8_duplicate_relations_fail_and_unrelate_logs_both_scopes(store: AgentMemory) -> None:
    a = store.remember("Relation source.", kind="note")
    b = store.remember("Relation target.", kind="note", scope="user:default")
    relation = store.relate(a.id, b.id, relation="duplicate_of")
    with pytest.raises(AgentMemoryError) as caught:
        store.relate(a.id, b.id, relation="duplicate_of")
    assert caught.value.code == MemoryErrorCode.MEMORY_RELATION_DUPLICATE
    store.unrelate(relation.id, reason="not a duplicate")
    [event] = store.audit(event_types=["memory.relation.deleted"])
    assert event.payload["sourceScope"] == "project:demo"
    assert event.payload["targetScope"] == "user:default"
    assert store.relations(a.id) == []


def test_mem5_a_failed_fts_write_leaves_no_memory_or_event(
    store: AgentMemory, store_path: Path
) -> None:
    store.db.conn.execute("DROP TABLE memories_fts")
    with pytest.raises(sqlite3.OperationalError):
        store.remember("Not indexed, not stored.", kind="note")
    assert _count(store_path, "memories") == 0 and _count(store_path, "memory_events") == 0


def test_mem2_refusals_carry_nuzo_codes_that_are_not_http_error_codes(store: AgentMemory) -> None:
    from aidememo.domain.errors import ErrorCode

    with pytest.raises(AgentMemoryError) as caught:
        store.get("mem_missing")
    assert caught.value.to_dict() == {
        "code": "MEMORY_NOT_FOUND",
        "message": "Memory was not found.",
        "details": {"id": "mem_missing"},
    }
    http_codes = {code.value for code in ErrorCode}
    assert not http_codes & {code.value for code in MemoryErrorCode}
    for name in (
        "MEMORY_REVISION_CONFLICT",
        "MEMORY_SCHEMA_UNSUPPORTED",
        "RECALL_QUERY_EMPTY",
        "MEMORY_SECRET_DETECTED",
        "SEMANTIC_INDEX_MISSING",
        "NUZO_INTERNAL_ERROR",
    ):
        assert MemoryErrorCode(name).value == name
