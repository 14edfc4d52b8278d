"""Export and import in the nuzo-memory-export v1 format (MEM-10), rehome (MEM-8)."""

from __future__ import annotations

import copy
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from aidememo.agent_memory import AgentMemory, AgentMemoryError, MemoryErrorCode
from aidememo.agent_memory.integrity import inspect_store
from aidememo.agent_memory.rehome import rehome_scope

STAMP = "2026-08-01T00:00:00.000Z"


def _item(content: str, **extra: Any) -> dict[str, Any]:
    return {
        "scope": "project:demo",
        "kind": "note",
        "content": content,
        "tags": ["a", "b"],
        "source": "nuzo:cli",
        "confidence": 1,
        "created_at": STAMP,
        "updated_at": STAMP,
        "last_used_at": None,
        "archived_at": None,
    } | extra


def _doc(*items: dict[str, Any], relations: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "format": "nuzo-memory-export",
        "version": 1,
        "exported_at": STAMP,
        "memories": list(items),
        "relations": relations or [],
    }


def test_mem10_export_then_import_round_trips_without_ids(
    store: AgentMemory, tmp_path: Path
) -> None:
    a = store.remember("First exported memory.", kind="fact", tags=["x"])
    b = store.remember("Second exported memory.", kind="note")
    store.relate(a.id, b.id, relation="related_to", reason="same topic")
    store.forget(b.id)
    document = store.export(include_archived=True)
    assert document["format"] == "nuzo-memory-export" and document["version"] == 1
    assert all("id" not in m and "revision" not in m for m in document["memories"])
    assert document["relations"] == [
        {
            "source_index": 1,
            "target_index": 0,
            "relation": "related_to",
            "reason": "same topic",
            "created_at": document["relations"][0]["created_at"],
        }
    ]
    assert store.audit(event_types=["memory.exported"])[0].payload == {
        "scope": "project:demo",
        "tags": [],
        "includeArchived": True,
        "count": 2,
    }
    with AgentMemory.open(str(tmp_path / "other.sqlite")) as other:
        assert other.import_document(document) == {"imported": 2, "skipped": 0, "dryRun": False}
        assert other.import_document(document) == {"imported": 0, "skipped": 2, "dryRun": False}
        imported = {m.content: m for m in other.list(all_scopes=True, include_archived=True)}
        assert imported["Second exported memory."].archived_at is not None
        assert imported["First exported memory."].revision == 1
        assert imported["First exported memory."].created_at == a.created_at
        assert len(other.relations(imported["First exported memory."].id)) == 1


def test_mem10_a_secret_in_one_item_refuses_the_whole_import(store: AgentMemory) -> None:
    doc = _doc(_item("Fine."), _item("key AKIAIOSFODNN7EXAMPLE here"))
    with pytest.raises(AgentMemoryError) as caught:
        store.import_document(doc)
    assert caught.value.code == MemoryErrorCode.MEMORY_SECRET_DETECTED
    assert store.list(include_archived=True) == []


def test_mem10_a_late_failure_rolls_back_the_entire_import(store: AgentMemory) -> None:
    store.db.conn.execute(
        "CREATE TEMP TRIGGER fail_second AFTER INSERT ON main.memory_events"
        " WHEN (SELECT COUNT(*) FROM memory_events WHERE event_type = 'memory.imported') = 2"
        " BEGIN SELECT RAISE(ABORT, 'injected'); END"
    )
    with pytest.raises(sqlite3.DatabaseError):
        store.import_document(_doc(_item("One."), _item("Two."), _item("Three.")))
    conn = store.db.conn
    assert [
        conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
        for t in ("memories", "memories_fts", "memory_events")
    ] == [0, 0, 0]


def test_mem10_duplicates_within_a_document_are_skipped_in_dry_and_real_runs(
    store: AgentMemory,
) -> None:
    doc = _doc(
        _item("Same  content."),
        _item("  Same content. ", tags=["b", "a", "a"]),
        _item("same content."),
    )
    assert store.import_document(doc, dry_run=True) == {"imported": 2, "skipped": 1, "dryRun": True}
    assert store.list() == []
    assert store.import_document(doc) == {"imported": 2, "skipped": 1, "dryRun": False}


def test_mem10_malformed_documents_name_the_bad_field(store: AgentMemory) -> None:
    cases: list[tuple[dict[str, Any], MemoryErrorCode, str | None]] = []
    wrong = _doc(_item("x"))
    wrong["version"] = 2
    cases.append((wrong, MemoryErrorCode.MEMORY_EXPORT_UNSUPPORTED, None))
    bad_tags = _doc(_item("x", tags="a"))
    cases.append((bad_tags, MemoryErrorCode.MEMORY_EXPORT_INVALID, "memories[0].tags"))
    no_key = _doc(_item("x"))
    del no_key["memories"][0]["last_used_at"]
    cases.append((no_key, MemoryErrorCode.MEMORY_EXPORT_INVALID, "memories[0].last_used_at"))
    bad_rel = _doc(
        _item("x"),
        relations=[
            {"source_index": 0, "target_index": 3, "relation": "related_to", "created_at": STAMP}
        ],
    )
    cases.append((bad_rel, MemoryErrorCode.MEMORY_EXPORT_INVALID, "relations[0]"))
    big = _doc(*[_item(f"n{i}") for i in range(1001)])
    cases.append((big, MemoryErrorCode.MEMORY_IMPORT_LIMIT_EXCEEDED, None))
    for document, code, path in cases:
        with pytest.raises(AgentMemoryError) as caught:
            store.import_document(copy.deepcopy(document))
        assert caught.value.code == code
        assert path is None or caught.value.details["path"] == path


def test_mem10_import_scope_override_keeps_the_original_scope_in_the_event(
    store: AgentMemory,
) -> None:
    store.import_document(_doc(_item("Moved.")), scope="project:elsewhere")
    [memory] = store.list(scope="project:elsewhere")
    [event] = store.history(memory.id)
    assert event.payload == {
        "originalScope": "project:demo",
        "scope": "project:elsewhere",
        "archived": False,
    }


def test_mem8_rehome_moves_a_project_scope_after_a_backup(
    store: AgentMemory, tmp_path: Path
) -> None:
    a = store.remember("Rehomed memory.", kind="fact")
    store.remember("Rehomed memory two.", kind="fact")
    plan = rehome_scope(store, "project:demo", "project:new")
    assert plan["memoryCount"] == 2 and plan["collisionCount"] == 0 and plan["applicable"]
    assert plan["dryRun"] and "applied" not in plan
    with pytest.raises(AgentMemoryError) as caught:
        rehome_scope(
            store, "project:demo", "project:new", apply=True, backup_path=str(tmp_path / "b")
        )
    assert caught.value.code == MemoryErrorCode.MEMORY_SCOPE_REHOME_CONFIRMATION_REQUIRED
    backup = tmp_path / "backup.sqlite"
    done = rehome_scope(
        store, "project:demo", "project:new", apply=True, confirm=True, backup_path=str(backup)
    )
    assert done["applied"] and backup.stat().st_mode & 0o777 == 0o600
    moved = store.get(a.id)
    assert (moved.scope, moved.revision) == ("project:new", 1)
    assert [r.memory.id for r in store.recall("rehomed", scope="project:new", limit=1)]
    with AgentMemory.open(str(backup)) as old:
        assert {m.scope for m in old.list(all_scopes=True)} == {"project:demo"}
    store.remember("Rehomed memory.", kind="fact")
    with pytest.raises(AgentMemoryError) as caught:
        rehome_scope(
            store,
            "project:demo",
            "project:new",
            apply=True,
            confirm=True,
            backup_path=str(tmp_path / "c.sqlite"),
        )
    assert caught.value.code == MemoryErrorCode.MEMORY_SCOPE_REHOME_COLLISION
    assert not (tmp_path / "c.sqlite").exists()  # a collision blocks before the backup


def _canonical(path: str) -> list[list[Any]]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return [
            conn.execute(f"SELECT * FROM {table} ORDER BY id").fetchall()
            for table in ("memories", "memory_relations", "memory_events")
        ]
    finally:
        conn.close()


def test_mem8_rehome_failure_rolls_back_and_keeps_the_validated_backup(
    store: AgentMemory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sqlite3

    from aidememo.agent_memory import rehome

    first = store.remember("First rollback fixture.", kind="note")
    second = store.remember("Second rollback fixture.", kind="note")
    before = _canonical(store.db.path)
    moved = rehome._move

    def failing_move(*args: object, **kwargs: object) -> object:
        moved(*args, **kwargs)  # every row moved, then the failure: all of it rolls back
        raise sqlite3.OperationalError("simulated scope rehome failure")

    # (a trigger planted in the store would make every write refuse it: MEM-1)
    monkeypatch.setattr(rehome, "_move", failing_move)
    backup = tmp_path / "rollback-backup.sqlite"
    with pytest.raises(AgentMemoryError) as caught:
        rehome_scope(
            store, "project:demo", "project:new", apply=True, confirm=True, backup_path=str(backup)
        )
    assert caught.value.code == MemoryErrorCode.MEMORY_SCOPE_REHOME_FAILED
    assert caught.value.details["backupPath"] == str(backup)
    assert backup.exists() and backup.stat().st_mode & 0o777 == 0o600
    assert _canonical(store.db.path) == before
    assert store.get(first.id).scope == "project:demo"
    assert inspect_store(store.db.path).ok
    with AgentMemory.open(str(backup)) as old:
        assert {m.id for m in old.list(all_scopes=True)} == {first.id, second.id}


def test_mem8_rehome_never_writes_over_or_through_an_existing_path(
    store: AgentMemory, tmp_path: Path
) -> None:
    store.remember("Stays where it is.", kind="fact")
    target = tmp_path / "precious.txt"
    target.write_text("keep")
    link = tmp_path / "link.sqlite"
    link.symlink_to(target)
    for path, code in (
        (target, MemoryErrorCode.MEMORY_BACKUP_EXISTS),
        (link, MemoryErrorCode.MEMORY_SCOPE_REHOME_PATH_UNSAFE),
        (Path(store.db.path + "-wal"), MemoryErrorCode.MEMORY_SCOPE_REHOME_BACKUP_CONFLICT),
    ):
        with pytest.raises(AgentMemoryError) as caught:
            rehome_scope(
                store,
                "project:demo",
                "project:new",
                apply=True,
                confirm=True,
                backup_path=str(path),
            )
        assert caught.value.code == code
    assert target.read_text() == "keep"
    assert {m.scope for m in store.list(all_scopes=True)} == {"project:demo"}
    for source in ("user:default", "project:auto"):
        with pytest.raises(AgentMemoryError) as caught:
            rehome_scope(store, source, "project:new")
        assert caught.value.code == MemoryErrorCode.MEMORY_SCOPE_REHOME_SCOPE_INVALID
