"""Stores for the maintenance tests: a small store, each FTS drift class, and dumps of the
canonical rows and FTS rows to compare before and after."""

from __future__ import annotations

import contextlib
import io
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aidememo.agent_memory import AgentMemory, paths


def make_store(path: Path) -> dict[str, str]:
    """A store with four active memories and one archived memory; their ids by role."""
    paths.ensure_private_dir(str(path.parent))
    ids: dict[str, str] = {}
    with AgentMemory.open(str(path), scope="project:demo") as store:
        for role, content, tags in (
            ("a", "Use pnpm for the web repo.", ["tooling", "web"]),
            ("b", "The cache keeps sessions in SQLite.", ["storage"]),
            ("c", "Deploy after the migration check passes.", ["deploy"]),
            ("d", "Reviewer checks cache invalidation first.", []),
            ("gone", "An archived plan that is no longer used.", ["old"]),
        ):
            ids[role] = store.remember(content, kind="note", tags=tags).id
        other = store.remember("A global preference.", kind="preference", scope="user:default")
        ids["global"] = other.id
        store.relate(ids["a"], ids["b"], relation="related_to")
        store.forget(ids["gone"])
    return ids


def raw(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(str(path), isolation_level=None)


def drift_all(path: Path, ids: dict[str, str]) -> None:
    """One FTS row of each drift class: missing (a), duplicate (b), stale (c), orphan (gone)."""
    conn = raw(path)
    try:
        conn.execute("DELETE FROM memories_fts WHERE id = ?", (ids["a"],))
        conn.execute(
            "INSERT INTO memories_fts (id, scope, content, tags) SELECT id, scope, content, tags"
            " FROM memories_fts WHERE id = ?",
            (ids["b"],),
        )
        conn.execute("UPDATE memories_fts SET content = 'stale text' WHERE id = ?", (ids["c"],))
        conn.execute(
            "INSERT INTO memories_fts (id, scope, content, tags) VALUES (?, 'project:demo',"
            " 'An archived plan', 'old')",
            (ids["gone"],),
        )
    finally:
        conn.close()


def canonical(path: Path) -> list[list[Any]]:
    """Every canonical row (memories, events, relations), ordered, with the schema version."""
    conn = raw(path)
    try:
        out: list[list[Any]] = [[conn.execute("PRAGMA user_version").fetchone()[0]]]
        for table in ("memories", "memory_events", "memory_relations"):
            out.append([list(r) for r in conn.execute(f"SELECT * FROM {table} ORDER BY id")])
        return out
    finally:
        conn.close()


def fts_rows(path: Path) -> list[tuple[Any, ...]]:
    conn = raw(path)
    try:
        return sorted(conn.execute("SELECT id, scope, content, tags FROM memories_fts").fetchall())
    finally:
        conn.close()


def rebuilt_fts(path: Path) -> list[tuple[Any, ...]]:
    """The FTS rows a rebuild from the canonical rows gives."""
    conn = raw(path)
    try:
        rows = conn.execute(
            "SELECT m.id, m.scope, m.content, COALESCE((SELECT GROUP_CONCAT(value, ' ') FROM"
            " (SELECT value FROM json_each(m.tags) ORDER BY key)), '') FROM memories m WHERE"
            " m.archived_at IS NULL"
        ).fetchall()
        return sorted(rows)
    finally:
        conn.close()


@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str


def cli(*args: str) -> Ran:
    """`aidememo memory ARGS` in this process, its exit status and output captured."""
    from aidememo.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(["memory", *args])
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 1
    return Ran(int(code), out.getvalue(), err.getvalue())
