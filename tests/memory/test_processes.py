"""Several processes writing one store: no lost update, conflicts surfaced, confirmed creates
and imports serialized, and a killed import leaves nothing (MEM-5, MEM-7, MEM-10)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aidememo.agent_memory import AgentMemory, AgentMemoryError, MemoryErrorCode

WORKER = str(Path(__file__).with_name("worker.py"))


def _spawn(*args: str) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    return subprocess.Popen(
        [sys.executable, WORKER, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _finish(proc: subprocess.Popen[str]) -> str:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    return out.strip()


def _document(n: int) -> dict[str, object]:
    return {
        "format": "nuzo-memory-export",
        "version": 1,
        "exported_at": "2026-08-01T00:00:00.000Z",
        "memories": [
            {
                "scope": "project:demo",
                "kind": "note",
                "content": f"Imported note {i}.",
                "tags": ["imported"],
                "source": "nuzo:cli",
                "confidence": 1,
                "created_at": "2026-08-01T00:00:00.000Z",
                "updated_at": "2026-08-01T00:00:00.000Z",
                "last_used_at": None,
                "archived_at": None,
            }
            for i in range(n)
        ],
        "relations": [
            {
                "source_index": 0,
                "target_index": 1,
                "relation": "related_to",
                "created_at": "2026-08-01T00:00:00.000Z",
            }
        ]
        if n > 1
        else [],
    }


def test_mem5_two_processes_updating_one_memory_lose_no_update(store: AgentMemory) -> None:
    memory = store.remember("counter 0", kind="note")
    rounds = 25
    workers = [_spawn("increment", store.db.path, memory.id, str(rounds)) for _ in range(2)]
    results = [_finish(w).split() for w in workers]
    successes = sum(int(s) for s, _ in results)
    final = store.get(memory.id)
    assert successes == 2 * rounds
    assert final.content == f"counter {2 * rounds}"
    assert final.revision == 1 + 2 * rounds
    updated = [e for e in store.history(memory.id) if e.event_type == "memory.updated"]
    assert len(updated) == 2 * rounds
    stale = store.get(memory.id)
    assert _finish(_spawn("increment", store.db.path, memory.id, "1")) == "1 0"
    with pytest.raises(AgentMemoryError) as caught:
        store.update(memory.id, content="counter -1", expected_revision=stale.revision)
    assert caught.value.code == MemoryErrorCode.MEMORY_REVISION_CONFLICT
    assert caught.value.details["currentRevision"] == stale.revision + 1


def test_mem7_identical_confirmed_creates_from_two_processes_create_one(store: AgentMemory) -> None:
    workers = [_spawn("confirm", store.db.path, "Pin the Node version in CI.") for _ in range(4)]
    statuses = sorted(_finish(w) for w in workers)
    assert statuses == ["created", "skipped", "skipped", "skipped"]
    assert len(store.list()) == 1


def test_mem10_equivalent_imports_from_two_processes_import_once(
    store: AgentMemory, tmp_path: Path
) -> None:
    doc = tmp_path / "doc.json"
    doc.write_text(json.dumps(_document(3)))
    workers = [_spawn("import", store.db.path, str(doc)) for _ in range(2)]
    results = sorted(_finish(w) for w in workers)
    assert results == ["0 3", "3 0"]
    assert (
        len(store.list()) == 3 and len(store.db.relations_among([m.id for m in store.list()])) == 1
    )


def test_mem10_a_sigkilled_import_leaves_nothing(store: AgentMemory, tmp_path: Path) -> None:
    store.remember("Written before the import.", kind="note")
    doc, mark = tmp_path / "doc.json", tmp_path / "inside"
    doc.write_text(json.dumps(_document(50)))
    proc = _spawn("slow-import", store.db.path, str(doc), str(mark))
    deadline = time.monotonic() + 60
    while not mark.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    with AgentMemory.open(store.db.path, scope="project:demo") as after:
        assert [m.content for m in after.list()] == ["Written before the import."]
        assert after.audit(event_types=["memory.imported"]) == []
        count = after.db.conn.execute("SELECT COUNT(*) FROM memories_fts").fetchone()[0]
        assert count == 1
        after.import_document(_document(2))
        assert len(after.list()) == 3
