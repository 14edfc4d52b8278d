"""A bulk forget commits per memory (MEM-5, MEM-8): a failure on one memory leaves the ones
before it archived and itself active and searchable."""

from __future__ import annotations

import sqlite3

import pytest

from aidememo.agent_memory import AgentMemory
from aidememo.agent_memory.integrity import inspect_store


def test_mem5_mem8_bulk_forget_rolls_back_only_the_failing_memory(store: AgentMemory) -> None:
    first = store.remember("Cache note one.", kind="note", tags=["cache"])
    second = store.remember("Cache note two.", kind="note", tags=["cache"])
    order = [m.id for m in store.list(scope="project:demo")]
    failing = order[1]
    # A real SQLite failure on the second archive: a trigger aborts that row's update.
    store.db.conn.execute(
        "CREATE TRIGGER refuse_archive BEFORE UPDATE OF archived_at ON memories"
        f" WHEN NEW.id = '{failing}' BEGIN SELECT RAISE(ABORT, 'refused'); END"
    )
    with pytest.raises(sqlite3.IntegrityError):
        store.forget_many(tags=["cache"], dry_run=False)
    done = order[0]
    assert store.get(done).archived_at is not None
    assert store.get(failing).archived_at is None
    assert [r.memory.id for r in store.recall("cache note")] == [failing]
    store.db.conn.execute("DROP TRIGGER refuse_archive")
    assert {first.id, second.id} == {done, failing}
    assert inspect_store(store.db.path).ok
