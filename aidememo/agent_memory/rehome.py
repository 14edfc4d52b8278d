"""Moving every memory of one project scope to another (SPEC.md MEM-8).

A project moved on disk gets a new `project:<hash>` scope; `rehome_scope` moves its memories
explicitly. The plan is read-only and is Nuzo 1.2's plan: counts of the source's memories (active
and archived), the target's memories, the relations touching the source, the historical events
(those of the source's memories and those whose payload names the source scope), the active
capture-key collisions with the target, and a SHA-256 plan hash over the JSON of those rows read
whole (`SELECT *`, keys in the table's column order), so both implementations hash one store alike,
and the store's integrity report (`aidememo.agent_memory.integrity`, MEM-16), which must pass.
Applying needs confirmation and a new backup path: under `BEGIN IMMEDIATE` the plan is re-read and
must hash the same, a WAL-consistent backup is written (0600, never over an existing file or
through a symbolic link) through a sibling connection, then `memories_fts.scope` and
`memories.scope` change and one `memory.scope.rehomed` event is logged, all in one transaction.
The backup must pass the integrity check too (an invalid one is removed). A failure after the
backup rolls the move back and answers `MEMORY_SCOPE_REHOME_FAILED` with the retained backup's
path in `details.backupPath`. Ids, revisions, timestamps, relations and earlier events are
unchanged.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from typing import TYPE_CHECKING, Any

from aidememo.agent_memory import paths
from aidememo.agent_memory.errors import AgentMemoryError
from aidememo.agent_memory.errors import MemoryErrorCode as C
from aidememo.agent_memory.integrity import IntegrityReport, inspect_store
from aidememo.agent_memory.jstext import js_json
from aidememo.agent_memory.policy import check_scope
from aidememo.agent_memory.schema import SCHEMA_VERSION

if TYPE_CHECKING:
    from aidememo.agent_memory.store import AgentMemory

_EVENTS = """SELECT e.* FROM memory_events e
WHERE EXISTS (SELECT 1 FROM memories m WHERE m.scope = :s AND m.id = e.memory_id)
  OR json_extract(e.payload, '$.scope') = :s
  OR json_extract(e.payload, '$.originalScope') = :s
  OR json_extract(e.payload, '$.sourceScope') = :s
  OR json_extract(e.payload, '$.targetScope') = :s
  OR json_extract(e.payload, '$.supersededByScope') = :s
ORDER BY e.id ASC"""

_RELATIONS = """SELECT r.* FROM memory_relations r
WHERE EXISTS (SELECT 1 FROM memories m WHERE m.scope = :s
  AND (m.id = r.source_memory_id OR m.id = r.target_memory_id))
ORDER BY r.id ASC"""

_COLLISIONS = """SELECT source.id AS source_id, target.id AS target_id
FROM memories source JOIN memories target
  ON target.scope = :t AND target.archived_at IS NULL AND target.capture_key = source.capture_key
WHERE source.scope = :s AND source.archived_at IS NULL AND source.capture_key IS NOT NULL
ORDER BY source.id ASC, target.id ASC"""

_RESULT_KEYS = (
    "memoryCount",
    "activeMemoryCount",
    "archivedMemoryCount",
    "affectedRelationCount",
    "historicalEventCount",
)


def _check_scopes(source: str, target: str) -> None:
    for name, scope in (("source", source), ("target", target)):
        valid = True
        try:
            check_scope(scope)
        except AgentMemoryError:
            valid = False
        if not valid or not scope.startswith("project:") or scope == "project:auto":
            raise AgentMemoryError(
                C.MEMORY_SCOPE_REHOME_SCOPE_INVALID,
                f"Project-scope rehome {name} must be an explicit valid project scope.",
                {name: scope},
            )
    if source == target:
        raise AgentMemoryError(
            C.MEMORY_SCOPE_REHOME_SCOPE_CONFLICT,
            "Project-scope rehome source and target must differ.",
        )


def _rows(conn: sqlite3.Connection, sql: str, args: dict[str, str]) -> list[dict[str, Any]]:
    cursor = conn.execute(sql, args)
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor]


def _build(conn: sqlite3.Connection, path: str, source: str, target: str) -> dict[str, Any]:
    whole = "SELECT * FROM memories WHERE scope = :s ORDER BY id ASC"
    source_rows = _rows(conn, whole, {"s": source})
    target_rows = _rows(conn, whole, {"s": target})
    relations = _rows(conn, _RELATIONS, {"s": source})
    events = _rows(conn, _EVENTS, {"s": source})
    collisions = _rows(conn, _COLLISIONS, {"s": source, "t": target})
    hashed = {
        "version": 1,
        "sourceScope": source,
        "targetScope": target,
        "sourceRows": source_rows,
        "targetRows": target_rows,
        "affectedRelations": relations,
        "historicalEvents": events,
        "collisions": collisions,
    }
    active = sum(1 for row in source_rows if row["archived_at"] is None)
    return {
        "version": 1,
        "dryRun": True,
        "sourcePath": path,
        "sourceScope": source,
        "targetScope": target,
        "planHash": hashlib.sha256(js_json(hashed).encode("utf-8")).hexdigest(),
        "applicable": bool(source_rows) and not collisions,
        "memoryCount": len(source_rows),
        "activeMemoryCount": active,
        "archivedMemoryCount": len(source_rows) - active,
        "targetMemoryCount": len(target_rows),
        "affectedRelationCount": len(relations),
        "historicalEventCount": len(events),
        "historicalEventsRewritten": 0,
        "collisionCount": len(collisions),
    }


def _healthy(store: AgentMemory) -> IntegrityReport:
    """The store's integrity report (MEM-16); a store that fails it, or is not at version 7,
    is `MEMORY_SCOPE_REHOME_STORE_INVALID`, as Nuzo refuses it."""
    report = inspect_store(store.db.path)
    if not report.ok or report.schema_version != SCHEMA_VERSION:
        raise AgentMemoryError(
            C.MEMORY_SCOPE_REHOME_STORE_INVALID,
            "Project-scope rehome requires a healthy store at the current schema version.",
            {"path": store.db.path, "errors": list(report.errors)},
        )
    return report


def plan(store: AgentMemory, source: str, target: str) -> dict[str, Any]:
    """The read-only plan of moving `source` to `target`, with the store's integrity report."""
    _check_scopes(source, target)
    report = _healthy(store)
    return _build(store.db.conn, store.db.path, source, target) | {"integrity": report.to_json()}


def _check_applicable(planned: dict[str, Any]) -> None:
    if planned["memoryCount"] == 0:
        raise AgentMemoryError(
            C.MEMORY_SCOPE_REHOME_SOURCE_EMPTY,
            "Project-scope rehome source contains no memories.",
            {"scope": planned["sourceScope"]},
        )
    if planned["collisionCount"]:
        raise AgentMemoryError(
            C.MEMORY_SCOPE_REHOME_COLLISION,
            "Project-scope rehome found active capture-key collisions in the target scope.",
            {"collisionCount": planned["collisionCount"]},
        )


def _fileset(path: str) -> set[str]:
    real = os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))
    return {real + s for s in ("", "-wal", "-shm")}


def _check_backup_path(store: AgentMemory, backup_path: str) -> None:
    if _fileset(backup_path) & _fileset(store.db.path):
        raise AgentMemoryError(
            C.MEMORY_SCOPE_REHOME_BACKUP_CONFLICT,
            "Project-scope rehome backup files must not overlap the source SQLite fileset.",
        )
    if os.path.islink(backup_path):
        raise AgentMemoryError(
            C.MEMORY_SCOPE_REHOME_PATH_UNSAFE,
            "Project-scope rehome refuses symbolic-link source or backup files.",
            {"path": backup_path},
        )


def _backup(store: AgentMemory, backup_path: str) -> None:
    if any(os.path.lexists(backup_path + s) for s in ("", "-wal", "-shm")):
        raise AgentMemoryError(
            C.MEMORY_BACKUP_EXISTS,
            "Backup path already exists. Choose a different --backup-path.",
            {"path": backup_path},
        )
    try:
        os.makedirs(os.path.dirname(backup_path), mode=paths.DIR_MODE, exist_ok=True)
        fd = os.open(backup_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except OSError:
        raise AgentMemoryError(
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


def _remove_fileset(path: str) -> None:
    for suffix in ("", "-wal", "-shm"):
        try:
            os.unlink(path + suffix)
        except FileNotFoundError:
            pass


def _move(
    conn: sqlite3.Connection,
    store: AgentMemory,
    locked: dict[str, Any],
    source: str,
    target: str,
    actor: str,
) -> str:
    """The move itself, inside the caller's transaction; returns the logged event's id."""
    conn.execute(
        "UPDATE memories_fts SET scope = ? WHERE id IN (SELECT id FROM memories WHERE scope = ?)",
        (target, source),
    )
    moved = conn.execute("UPDATE memories SET scope = ? WHERE scope = ?", (target, source))
    if moved.rowcount != locked["memoryCount"]:
        raise AgentMemoryError(
            C.MEMORY_SCOPE_REHOME_COUNT_MISMATCH,
            "Project-scope rehome changed an unexpected number of memories.",
            {"expected": locked["memoryCount"], "actual": moved.rowcount},
        )
    event = store.event(
        None,
        "memory.scope.rehomed",
        actor,
        {
            "scope": target,
            "originalScope": source,
            "sourceScope": source,
            "targetScope": target,
            **{k: locked[k] for k in _RESULT_KEYS},
            "historicalEventsRewritten": 0,
            "revisionsPreserved": True,
            "planHash": locked["planHash"],
        },
    )
    store.db.append(event)
    check = conn.execute("PRAGMA integrity_check").fetchone()[0]
    if check != "ok":
        raise AgentMemoryError(
            C.MEMORY_SCOPE_REHOME_INTEGRITY_FAILED,
            "Project-scope rehome failed SQLite integrity validation.",
            {"integrityCheck": check},
        )
    return event.id


def rehome_scope(
    store: AgentMemory,
    source: str,
    target: str,
    *,
    apply: bool = False,
    confirm: bool = False,
    backup_path: str | None = None,
    actor: str = "core",
) -> dict[str, Any]:
    """The plan, or (with `apply`, `confirm` and a new `backup_path`) the applied move.

    The checks run in Nuzo's order: confirmation, scopes, the backup path's overlap with the
    store and symbolic links, the plan (an empty source, collisions), an existing backup.
    """
    if not apply:
        return plan(store, source, target)
    if not confirm:
        raise AgentMemoryError(
            C.MEMORY_SCOPE_REHOME_CONFIRMATION_REQUIRED,
            "Project-scope rehome requires --apply and explicit --yes confirmation.",
        )
    if backup_path is None:
        raise AgentMemoryError(
            C.MEMORY_SCOPE_REHOME_BACKUP_REQUIRED, "Scope rehome requires a new backup path."
        )
    _check_scopes(source, target)
    backup = os.path.abspath(backup_path)
    _check_backup_path(store, backup)
    planned = plan(store, source, target)
    _check_applicable(planned)
    with store.db.write() as conn:
        locked = _build(conn, store.db.path, source, target)
        if locked["planHash"] != planned["planHash"]:
            raise AgentMemoryError(
                C.MEMORY_SCOPE_REHOME_PLAN_CHANGED,
                "The rehome plan changed before the writer lock was acquired. Review a new"
                " dry-run.",
            )
        _check_applicable(locked)
        _backup(store, backup)
        backup_report = inspect_store(backup)
        if not backup_report.ok:
            _remove_fileset(backup)
            raise AgentMemoryError(
                C.MEMORY_SCOPE_REHOME_BACKUP_INVALID,
                "Published project-scope rehome backup failed validation.",
                {"path": backup, "errors": list(backup_report.errors)},
            )
        try:
            event_id = _move(conn, store, locked, source, target, actor)
        except AgentMemoryError as error:
            raise AgentMemoryError(
                C.MEMORY_SCOPE_REHOME_FAILED,
                "Project-scope rehome failed and the source transaction was rolled back; the"
                " validated backup was retained.",
                {"backupPath": backup, "causeCode": str(error.code)},
            ) from None
        except sqlite3.Error as error:
            raise AgentMemoryError(
                C.MEMORY_SCOPE_REHOME_FAILED,
                "Project-scope rehome failed.",
                {"cause": str(error), "backupPath": backup},
            ) from None
    after = inspect_store(store.db.path)
    if not after.ok:
        raise AgentMemoryError(
            C.MEMORY_SCOPE_REHOME_FAILED,
            "Project-scope rehome committed but post-apply validation failed; restore the"
            " retained backup.",
            {"backupPath": backup, "errors": list(after.errors)},
        )
    counts = {k: locked[k] for k in _RESULT_KEYS}
    return {
        "version": 1,
        "applied": True,
        "sourcePath": store.db.path,
        "backupPath": backup,
        "sourceScope": source,
        "targetScope": target,
        "planHash": locked["planHash"],
        **counts,
        "historicalEventsRewritten": 0,
        "revisionsPreserved": True,
        "eventId": event_id,
        "backupIntegrity": backup_report.to_json(),
        "afterIntegrity": after.to_json(),
    }


def plan_output(result: dict[str, Any]) -> dict[str, Any]:
    """A plan or result as Nuzo's `rehome-scope --json` prints it (snake_case keys)."""
    return {_snake(k): v for k, v in result.items()}


def _snake(key: str) -> str:
    return "".join(f"_{ch.lower()}" if ch.isupper() else ch for ch in key)


def plan_text(result: dict[str, Any]) -> str:
    """A plan or result as Nuzo's `rehome-scope` prints it as text."""
    from aidememo.agent_memory.render import escape_controls, inline

    if result.get("applied"):
        after = result["afterIntegrity"]
        return "\n".join(
            [
                f"Rehomed {result['memoryCount']} memories from {inline(result['sourceScope'])}"
                f" to {inline(result['targetScope'])}",
                f"Validated backup: {escape_controls(result['backupPath'])}",
                f"Relations preserved: {result['affectedRelationCount']}",
                f"Historical audit events preserved: {result['historicalEventCount']}"
                " (rewritten: 0)",
                "IDs, revisions, timestamps, lifecycle metadata, and relation records were"
                " preserved.",
                f"Audit event: {inline(result['eventId'])}",
                f"Integrity: {'ok' if after['ok'] and after['fts_ok'] else 'failed'}",
            ]
        )
    return "\n".join(
        [
            "Project scope rehome plan (read-only)",
            f"Store: {escape_controls(result['sourcePath'])}",
            f"From: {inline(result['sourceScope'])}",
            f"To: {inline(result['targetScope'])}",
            f"Plan hash: {result['planHash']}",
            f"Applicable: {'yes' if result['applicable'] else 'no'}",
            f"Memories: {result['memoryCount']} ({result['activeMemoryCount']} active,"
            f" {result['archivedMemoryCount']} archived)",
            f"Existing target memories: {result['targetMemoryCount']}",
            f"Affected relations: {result['affectedRelationCount']}",
            f"Historical audit events: {result['historicalEventCount']} (rewritten: 0)",
            f"Target collisions: {result['collisionCount']}",
            "No changes were made. Apply requires --apply --yes and a new --backup-path.",
        ]
    )
