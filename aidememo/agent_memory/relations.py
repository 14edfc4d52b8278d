"""Explicit relations between memories: relate, relations, unrelate (SPEC.md MEM-8).

A relation is directional (`A supersedes B`), unique per `(source, target, relation)`, and removed
with either endpoint by the hard-delete cascade. Each relate and unrelate is one transaction with
its `memory.relation.created` / `memory.relation.deleted` event.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aidememo.agent_memory import policy
from aidememo.agent_memory.errors import AgentMemoryError
from aidememo.agent_memory.errors import MemoryErrorCode as C
from aidememo.agent_memory.jstext import js_trim
from aidememo.agent_memory.model import Memory, Relation, new_id

if TYPE_CHECKING:
    from aidememo.agent_memory.core import AgentMemoryCore


def _payload(
    relation: Relation, source: Memory, target: Memory, reason: str | None
) -> dict[str, object]:
    return {
        "relationId": relation.id,
        "sourceMemoryId": relation.source_memory_id,
        "targetMemoryId": relation.target_memory_id,
        "relation": relation.relation,
        "reason": reason,
        "sourceScope": source.scope,
        "targetScope": target.scope,
    }


def insert_or_fail(
    store: AgentMemoryCore, relation: Relation, source: Memory, target: Memory, actor: str
) -> None:
    """Insert `relation` and its event inside the caller's transaction; a duplicate fails it."""
    if not store.db.insert_relation(relation):
        raise AgentMemoryError(
            C.MEMORY_RELATION_DUPLICATE,
            "Memory relation already exists.",
            {
                "sourceMemoryId": relation.source_memory_id,
                "targetMemoryId": relation.target_memory_id,
                "relation": relation.relation,
            },
        )
    store.db.append(
        store.event(
            relation.source_memory_id,
            "memory.relation.created",
            actor,
            _payload(relation, source, target, relation.reason),
            relation.created_at,
        )
    )


def _endpoint(store: AgentMemoryCore, memory_id: str, code: C, what: str) -> Memory:
    memory = store.db.find(memory_id)
    if memory is None:
        raise AgentMemoryError(code, f"{what} memory was not found.", {"id": memory_id})
    return memory


def relate(
    store: AgentMemoryCore,
    source_id: str,
    target_id: str,
    *,
    relation: str,
    reason: str | None = None,
    actor: str = "core",
) -> Relation:
    """Create `source relation target`."""
    policy.check_id(source_id)
    policy.check_id(target_id)
    policy.check_actor(actor)
    policy.check_reason(reason)
    source = _endpoint(store, source_id, C.MEMORY_RELATION_SOURCE_NOT_FOUND, "Source")
    target = _endpoint(store, target_id, C.MEMORY_RELATION_TARGET_NOT_FOUND, "Target")
    policy.check_relation(relation, source_id, target_id, reason)
    created = Relation(
        new_id("rel"),
        source_id,
        target_id,
        relation,
        None if reason is None else js_trim(reason),
        store.now(),
    )
    with store.db.write():
        insert_or_fail(store, created, source, target, actor)
    return created


def list_relations(
    store: AgentMemoryCore, memory_id: str, *, include_reverse: bool = True, limit: int = 50
) -> list[Relation]:
    """A memory's relations, newest first (`include_reverse`: also those pointing at it)."""
    store.get(memory_id)
    policy.check_limit(limit, 200, C.MEMORY_RELATION_LIMIT_INVALID, "Relation limit must be 1-200.")
    return store.db.relations_of(memory_id, include_reverse)[:limit]


def relations_batch(
    store: AgentMemoryCore,
    memory_ids: list[str],
    *,
    limit_per_memory: int = 10,
    include_reverse: bool = True,
) -> dict[str, list[Relation]]:
    """Relations of up to 200 memories in one query, newest first per memory."""
    unique = list(dict.fromkeys(memory_ids))
    if len(unique) > 200:
        raise AgentMemoryError(
            C.MEMORY_RELATION_BATCH_LIMIT_INVALID,
            "Relation batch size must be 0-200 memories.",
            {"count": len(unique), "max": 200},
        )
    out: dict[str, list[Relation]] = {memory_id: [] for memory_id in unique}
    for found in store.db.relations_among(unique, include_reverse):
        if found.source_memory_id in out:
            out[found.source_memory_id].append(found)
        if include_reverse and found.target_memory_id in out:
            out[found.target_memory_id].append(found)
    for memory_id, items in out.items():
        items.sort(key=lambda r: (r.created_at, r.id), reverse=True)
        out[memory_id] = items[:limit_per_memory]
    return out


def unrelate(
    store: AgentMemoryCore, relation_id: str, *, reason: str | None = None, actor: str = "core"
) -> None:
    """Remove a relation (both memories stay)."""
    policy.check_id(relation_id)
    policy.check_actor(actor)
    policy.check_reason(reason)
    found = store.db.find_relation(relation_id)
    missing = AgentMemoryError(
        C.MEMORY_RELATION_NOT_FOUND, "Memory relation was not found.", {"id": relation_id}
    )
    if found is None:
        raise missing
    source = _endpoint(store, found.source_memory_id, C.MEMORY_RELATION_SOURCE_NOT_FOUND, "Source")
    target = _endpoint(store, found.target_memory_id, C.MEMORY_RELATION_TARGET_NOT_FOUND, "Target")
    with store.db.write():
        if not store.db.delete_relation(relation_id):
            raise missing
        store.db.append(
            store.event(
                found.source_memory_id,
                "memory.relation.deleted",
                actor,
                _payload(found, source, target, reason),
            )
        )
