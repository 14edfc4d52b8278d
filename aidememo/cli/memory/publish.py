"""`aidememo memory publish ID --profile P --session S` (SPEC.md MEM-15).

Copies one memory into a team project as a fact of session S, explicitly, through the
agent client of profile P (`aidememo.cli.agent.connect`). The fact id is derived from the
memory id and its revision, and the command id from the fact id (ID-4), so a retry after a
lost answer replays the first receipt instead of writing a second fact, and publishing a
later revision writes a new fact. The local store is only read.
"""

from __future__ import annotations

import argparse
import sys

from aidememo.agent_memory.jstext import js_json
from aidememo.agent_memory.store import AgentMemory
from aidememo.cli.errors import CliError
from aidememo.domain.command_ids import stable_id

FACT_PREFIX = "fact_memory"


def published_fact_id(memory_id: str, revision: int) -> str:
    """The fact id a memory's revision is published under: `fact_memory_` and 64 hex digits."""
    return stable_id(FACT_PREFIX, memory_id, str(revision))


def cmd_publish(ns: argparse.Namespace, store: AgentMemory) -> int:
    from aidememo.cli.agent.connect import connected, refusal
    from aidememo.client import AidememoClientError

    memory = store.get(ns.id)
    if memory.archived_at is not None:
        raise CliError(f"memory {memory.id} is archived; only active memories are published")
    fact_id = published_fact_id(memory.id, memory.revision)
    with connected(ns) as (profile, client):
        try:
            written = client.create_fact(ns.session, memory.content, fact_id=fact_id)
        except AidememoClientError as error:
            raise refusal(error) from None
    document = {
        "memory_id": memory.id,
        "revision": memory.revision,
        "scope": memory.scope,
        "project_id": profile.project_id,
        "session_id": ns.session,
        "fact_id": written.id,
        "command_id": written.command_id,
        "project_seq": written.receipt.project_seq,
        "committed_at_ms": written.receipt.committed_at_ms,
        "recovered": written.recovered,
    }
    if ns.json:
        sys.stdout.write(js_json(document) + "\n")
    else:
        sys.stdout.write(
            f"published {memory.id} rev={memory.revision} as fact {written.id} in "
            f"{profile.project_id}/{ns.session} (seq {written.receipt.project_seq})\n"
        )
    return 0
