"""The local, auditable agent memory store (SPEC.md MEM-*): stdlib `sqlite3`, schema version 7,
opening Nuzo 1.2 stores in place.

    from aidememo.memory import MemoryStore
    with MemoryStore.open(path, scope="project:demo", include_global=True) as store:
        store.remember("Deploys go through the staging gate.", kind="project_decision")
        results = store.recall("staging deploys")
"""

from aidememo.memory.errors import MemoryErrorCode, MemoryStoreError
from aidememo.memory.model import Event, Memory, RecallResult, Relation
from aidememo.memory.store import MemoryStore

__all__ = [
    "Event",
    "Memory",
    "MemoryErrorCode",
    "MemoryStore",
    "MemoryStoreError",
    "RecallResult",
    "Relation",
]
