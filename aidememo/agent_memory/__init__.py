"""The local, auditable agent memory store (SPEC.md MEM-*): stdlib `sqlite3`, schema version 7,
opening Nuzo 1.2 stores in place.

    from aidememo.agent_memory import AgentMemory
    with AgentMemory.open(path, scope="project:demo", include_global=True) as store:
        store.remember("Deploys go through the staging gate.", kind="project_decision")
        results = store.recall("staging deploys")
"""

from aidememo.agent_memory.errors import AgentMemoryError, MemoryErrorCode
from aidememo.agent_memory.model import Event, Memory, RecallResult, Relation
from aidememo.agent_memory.store import AgentMemory

__all__ = [
    "AgentMemory",
    "AgentMemoryError",
    "Event",
    "Memory",
    "MemoryErrorCode",
    "RecallResult",
    "Relation",
]
