"""A separate process writing a memory store, for the multi-process tests (`python worker.py`).

worker.py increment STORE ID ROUNDS   update ID ROUNDS times by compare-and-swap, retrying
                                      conflicts; prints "<successes> <conflicts>"
worker.py confirm STORE CONTENT       one confirmed capture create; prints its status
worker.py import STORE DOC            import DOC; prints "<imported> <skipped>"
worker.py slow-import STORE DOC MARK  import DOC, writing MARK and stalling mid-transaction
"""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

from aidememo.agent_memory import AgentMemory, AgentMemoryError, MemoryErrorCode


def increment(store: AgentMemory, memory_id: str, rounds: int) -> str:
    successes = conflicts = 0
    while successes < rounds:
        current = store.get(memory_id)
        count = int(re.findall(r"\d+", current.content)[-1]) + 1
        time.sleep(0.001)
        try:
            store.update(memory_id, content=f"counter {count}", expected_revision=current.revision)
        except AgentMemoryError as error:
            if error.code != MemoryErrorCode.MEMORY_REVISION_CONFLICT:
                raise
            conflicts += 1
            continue
        successes += 1
    return f"{successes} {conflicts}"


def slow_import(store: AgentMemory, document: dict[str, object], mark: str) -> None:
    calls = 0

    def stall() -> int:
        nonlocal calls
        calls += 1
        if calls == 3:
            Path(mark).write_text("inside")
            time.sleep(60)
        return 0

    store.db.conn.create_function("stall", 0, stall)
    store.db.conn.execute(
        "CREATE TEMP TRIGGER stall_import AFTER INSERT ON main.memory_events BEGIN"
        " SELECT stall(); END"
    )
    store.import_document(document)


def main(argv: list[str]) -> None:
    action, path = argv[0], argv[1]
    with AgentMemory.open(path, scope="project:demo") as store:
        if action == "increment":
            print(increment(store, argv[2], int(argv[3])))
        elif action == "confirm":
            result = store.confirm_capture(
                argv[2], decision="create", kind="note", reason="worker", confirm=True
            )
            print(result["status"])
        elif action == "import":
            result = store.import_document(json.loads(Path(argv[2]).read_text()))
            print(result["imported"], result["skipped"])
        elif action == "slow-import":
            slow_import(store, json.loads(Path(argv[2]).read_text()), argv[3])


if __name__ == "__main__":
    main(sys.argv[1:])
