"""Moving every memory of one project scope to another (SPEC.md MEM-8).

A project moved on disk gets a new `project:<hash>` scope; `rehome_scope` moves its memories
explicitly. The plan (counts, capture-key collisions with the target, a SHA-256 plan hash) is
read-only. Applying needs confirmation and a new backup path: under `BEGIN IMMEDIATE` the plan is
re-read and must hash the same, a WAL-consistent backup is written (0600, never over an existing
file) through a sibling connection, then `memories.scope` and `memories_fts.scope` change and one
`memory.scope.rehomed` event is logged, all in one transaction. Ids, revisions, timestamps,
relations and earlier events are unchanged.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from typing import TYPE_CHECKING, Any

from aidememo.memory import paths
from aidememo.memory.errors import MemoryErrorCode as C
from aidememo.memory.errors import MemoryStoreError
from aidememo.memory.jstext import js_json

if TYPE_CHECKING:
    from aidememo.memory.store import MemoryStore


def _check_scope(scope: str) -> None:
    if not scope.startswith("project:") or scope == "project:auto" or len(scope) <= len("project:"):
        raise MemoryStoreError(
            C.MEMORY_SCOPE_REHOME_SCOPE_INVALID,
            "Scope rehome only moves one project scope to another.",
            {"scope": scope},
        )


def plan(store: MemoryStore, source: str, target: str) -> dict[str, Any]:
    """The read-only plan of moving `source` to `target`."""
    _check_scope(source)
    _check_scope(target)
    if source == target:
        raise MemoryStoreError(
            C.MEMORY_SCOPE_REHOME_SCOPE_CONFLICT, "Source and target scopes must differ."
        )
    conn = store.db.conn
    rows = conn.execute(
        "SELECT id, revision, archived_at FROM memories WHERE scope = ? ORDER BY id", (source,)
    ).fetchall()
    ids = [row[0] for row in rows]
    target_rows = conn.execute(
        "SELECT id, revision FROM memories WHERE scope = ? ORDER BY id", (target,)
    ).fetchall()
    collisions = [
        row[0]
        for row in conn.execute(
            "SELECT s.id FROM memories s JOIN memories t ON t.scope = ? AND t.capture_key ="
            " s.capture_key AND t.archived_at IS NULL WHERE s.scope = ? AND s.archived_at IS NULL"
            " ORDER BY s.id",
            (target, source),
        )
    ]
    relations = conn.execute(
        "SELECT COUNT(*) FROM memory_relations WHERE source_memory_id IN (SELECT id FROM memories"
        " WHERE scope = ?) OR target_memory_id IN (SELECT id FROM memories WHERE scope = ?)",
        (source, source),
    ).fetchone()[0]
    events = conn.execute(
        "SELECT COUNT(*) FROM memory_events WHERE memory_id IN (SELECT id FROM"
        " memories WHERE scope = ?)",
        (source,),
    ).fetchone()[0]
    digest = hashlib.sha256(
        js_json(
            [
                source,
                target,
                [list(r) for r in rows],
                [list(r) for r in target_rows],
                relations,
                events,
                collisions,
            ]
        ).encode("utf-8")
    ).hexdigest()
    active = sum(1 for row in rows if row[2] is None)
    return {
        "sourceScope": source,
        "targetScope": target,
        "memoryCount": len(ids),
        "activeMemoryCount": active,
        "archivedMemoryCount": len(ids) - active,
        "affectedRelationCount": relations,
        "historicalEventCount": events,
        "collisions": collisions,
        "planHash": digest,
        "applied": False,
    }


def _backup(store: MemoryStore, backup_path: str) -> None:
    if os.path.lexists(backup_path) or any(
        os.path.lexists(backup_path + s) for s in ("-wal", "-shm")
    ):
        raise MemoryStoreError(
            C.MEMORY_BACKUP_EXISTS, "Backup path already exists.", {"path": backup_path}
        )
    if os.path.realpath(backup_path) in {
        os.path.realpath(store.db.path + s) for s in ("", "-wal", "-shm")
    }:
        raise MemoryStoreError(
            C.MEMORY_SCOPE_REHOME_BACKUP_CONFLICT,
            "Backup path overlaps the store.",
            {"path": backup_path},
        )
    try:
        fd = os.open(backup_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except OSError:
        raise MemoryStoreError(
            C.MEMORY_SCOPE_REHOME_PATH_UNSAFE,
            "Backup path cannot be created.",
            {"path": backup_path},
        ) from None
    os.close(fd)
    reader = sqlite3.connect(f"file:{store.db.path}?mode=ro", uri=True)
    target = sqlite3.connect(backup_path)
    try:
        reader.backup(target)
        target.execute("PRAGMA journal_mode = DELETE")
    finally:
        target.close()
        reader.close()
    os.chmod(backup_path, paths.FILE_MODE)


def rehome_scope(
    store: MemoryStore,
    source: str,
    target: str,
    *,
    apply: bool = False,
    confirm: bool = False,
    backup_path: str | None = None,
    actor: str = "core",
) -> dict[str, Any]:
    """The plan, or (with `apply`, `confirm` and a new `backup_path`) the applied move."""
    planned = plan(store, source, target)
    if not apply:
        return planned
    if not confirm:
        raise MemoryStoreError(
            C.MEMORY_SCOPE_REHOME_CONFIRMATION_REQUIRED,
            "Scope rehome requires explicit confirmation.",
        )
    if backup_path is None:
        raise MemoryStoreError(
            C.MEMORY_SCOPE_REHOME_BACKUP_REQUIRED, "Scope rehome requires a new backup path."
        )
    if planned["memoryCount"] == 0:
        raise MemoryStoreError(
            C.MEMORY_SCOPE_REHOME_SOURCE_EMPTY,
            "The source scope has no memories.",
            {"scope": source},
        )
    if planned["collisions"]:
        raise MemoryStoreError(
            C.MEMORY_SCOPE_REHOME_COLLISION,
            "Active memories would duplicate memories of the target scope.",
            {"count": len(planned["collisions"])},
        )
    with store.db.write() as conn:
        locked = plan(store, source, target)
        if locked["planHash"] != planned["planHash"]:
            raise MemoryStoreError(
                C.MEMORY_SCOPE_REHOME_PLAN_CHANGED, "The store changed after the plan was made."
            )
        _backup(store, os.path.abspath(backup_path))
        moved = conn.execute("UPDATE memories SET scope = ? WHERE scope = ?", (target, source))
        if moved.rowcount != locked["memoryCount"]:
            raise MemoryStoreError(
                C.MEMORY_SCOPE_REHOME_COUNT_MISMATCH, "Moved rows differ from the plan."
            )
        conn.execute("UPDATE memories_fts SET scope = ? WHERE scope = ?", (target, source))
        payload = {
            k: locked[k]
            for k in (
                "memoryCount",
                "activeMemoryCount",
                "archivedMemoryCount",
                "affectedRelationCount",
                "historicalEventCount",
                "planHash",
            )
        }
        store.db.append(
            store.event(
                None,
                "memory.scope.rehomed",
                actor,
                {
                    "scope": target,
                    "originalScope": source,
                    "sourceScope": source,
                    "targetScope": target,
                    **payload,
                    "historicalEventsRewritten": 0,
                    "revisionsPreserved": True,
                },
            )
        )
    return locked | {"applied": True, "backupPath": os.path.abspath(backup_path)}
