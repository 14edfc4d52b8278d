"""Opening the local memory store a memory command works on."""

from __future__ import annotations

import os

from aidememo.agent_memory import paths
from aidememo.agent_memory.store import AgentMemory


def open_store(runtime: paths.MemoryRuntime) -> AgentMemory:
    """The store of `runtime`, its directory made private first."""
    paths.ensure_private_dir(os.path.dirname(runtime.store_path))
    return AgentMemory.open(
        runtime.store_path,
        scope=runtime.scope,
        include_global=runtime.include_global,
        recall_limit=runtime.recall_limit,
        team_scope=runtime.team_scope,
    )
