"""The memory store's read operations: recall, list, history, audit, show (SPEC.md MEM-6).

Each takes the `AgentMemoryCore` as its first argument and is also one of its methods.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from aidememo.agent_memory import policy
from aidememo.agent_memory import recall as ranking
from aidememo.agent_memory import relations as rel_ops
from aidememo.agent_memory import semantic as sem
from aidememo.agent_memory.errors import AgentMemoryError, invariant
from aidememo.agent_memory.errors import MemoryErrorCode as C
from aidememo.agent_memory.jstext import iso_ms, normalize_date, parse_date
from aidememo.agent_memory.model import Event, Memory, RecallResult
from aidememo.agent_memory.sidecar import MISSING, sidecar_path

if TYPE_CHECKING:
    from aidememo.agent_memory.core import AgentMemoryCore

ACTOR_CORE = "core"


def encode_cursor(fields: dict[str, str]) -> str:
    raw = json.dumps(fields, separators=(",", ":")).encode("utf-8")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode_cursor(cursor: str, names: Sequence[str]) -> tuple[str, ...]:
    bad = AgentMemoryError(C.MEMORY_CURSOR_INVALID, "Memory pagination cursor is invalid.")
    if not cursor.strip() or len(cursor) > policy.ID_MAX * 4:
        raise bad
    try:
        fields = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (ValueError, binascii.Error):
        raise bad from None
    if not isinstance(fields, dict) or not all(isinstance(fields.get(n), str) for n in names):
        raise bad
    for name in names:
        if name != "id" and normalize_date(fields[name]) != fields[name]:
            raise AgentMemoryError(
                C.MEMORY_CURSOR_INVALID, "Memory pagination cursor is invalid.", {"field": name}
            )
    return tuple(fields[n] for n in names)


def recall(store: AgentMemoryCore, query: str, **options: Any) -> list[RecallResult]:
    """Ranked recall (see `recall_detailed`); the results only."""
    return list(recall_detailed(store, query, **options)["results"])


def recall_detailed(
    store: AgentMemoryCore,
    query: str,
    *,
    scope: str | None = None,
    limit: int | None = None,
    include_global: bool | None = None,
    team_scope: str | None = None,
    record_usage: bool = False,
    retrieval_mode: str = "fts",
    semantic_fallback: str | None = None,
) -> dict[str, Any]:
    """`{results, diagnostics}`: recall over the active scope, `user:default` when
    `include_global`, and the team scope when one is configured, ranked together (MEM-6).

    `record_usage` (off by default) bumps each result's revision and `last_used_at` and logs
    `memory.recalled` with a SHA-256 of the query, never the query itself. `semantic` and
    `hybrid` search the semantic sidecar through `store.semantic` (MEM-23); a refusal of it
    answers FTS in hybrid mode (or with `semantic_fallback="fts"`), reported in
    `diagnostics`. A store without `store.semantic` refuses with `SEMANTIC_INDEX_MISSING`
    when it has no sidecar and `SEMANTIC_PROVIDER_MISSING` when it has one."""
    target = scope or store.scope
    count = store.recall_limit if limit is None else limit
    policy.check_recall(query, target, count)
    glob = store.include_global if include_global is None else include_global
    if retrieval_mode not in ("fts", "semantic", "hybrid"):
        raise AgentMemoryError(
            C.MEMORY_RETRIEVAL_MODE_INVALID,
            "Retrieval mode is invalid.",
            {"mode": retrieval_mode},
        )
    if semantic_fallback not in (None, "error", "fts"):
        raise AgentMemoryError(
            C.SEMANTIC_FALLBACK_INVALID,
            "Semantic fallback is invalid.",
            {"fallback": semantic_fallback},
        )
    team = team_scope if team_scope is not None else store.team_scope
    scopes = ranking.recall_scopes(target, glob, team)
    fallback: str | None = None
    effective = retrieval_mode
    if retrieval_mode == "semantic":
        try:
            results = _semantic(store, query, scopes, count)
        except AgentMemoryError as exc:
            if semantic_fallback != "fts":
                raise
            fallback, effective = exc.code.value, "fts"
            results = sem.fallen_back(ranking.search(store.db, query, scopes, count), fallback)
    else:
        results = ranking.search(store.db, query, scopes, count)
        if retrieval_mode == "hybrid":
            try:
                settings = store.semantic.settings if store.semantic else sem.Settings()
                found = _semantic(store, query, scopes, min(count, settings.fusion_limit))
                results = sem.fuse(results, found, count, settings)
            except AgentMemoryError as exc:
                fallback, effective = exc.code.value, "fts"
                results = sem.fallen_back(results, fallback)
    if record_usage and results:
        record_recall_usage(store, query, results)
    return {
        "results": results,
        "diagnostics": {
            "requestedMode": retrieval_mode,
            "effectiveMode": effective,
            "semanticFallbackCode": fallback,
        },
    }


def _semantic(
    store: AgentMemoryCore, query: str, scopes: list[str], limit: int
) -> list[RecallResult]:
    if store.semantic is not None:
        return store.semantic.search(store, query, scopes, limit)
    path = sidecar_path(store.db.path)
    if not os.path.lexists(path):
        raise AgentMemoryError(C.SEMANTIC_INDEX_MISSING, MISSING, {"path": path})
    raise AgentMemoryError(
        C.SEMANTIC_PROVIDER_MISSING, "Semantic retrieval is not configured.", {"path": path}
    )


semantic_index_path = sidecar_path  # where a `SEMANTIC_INDEX_MISSING` refusal points


def record_recall_usage(
    store: AgentMemoryCore, query: str, results: Sequence[RecallResult]
) -> None:
    now = store.now()
    digest = ranking.query_hash(query)
    with store.db.write():
        for result in results:
            current = store.db.find(result.memory.id)
            if current is None or current.archived_at is not None:
                continue
            used = current.evolve(revision=current.revision + 1, last_used_at=now)
            store.committed(
                store.db.update_cas(used, current.revision), current.id, current.revision
            )
            store.db.append(
                store.event(
                    current.id,
                    "memory.recalled",
                    ACTOR_CORE,
                    {
                        "queryHash": digest,
                        "queryHashAlgorithm": "sha256",
                        "score": result.score,
                        "scope": current.scope,
                    },
                    now,
                )
            )


def list_memories(
    store: AgentMemoryCore,
    *,
    scope: str | None = None,
    all_scopes: bool = False,
    tags: Sequence[str] = (),
    include_archived: bool = False,
    needs_review: bool = False,
    limit: int | None = None,
    cursor: str | None = None,
) -> list[Memory]:
    """Memories newest first (`all_scopes` lists every scope)."""
    target = None if all_scopes else (scope or store.scope)
    if target is not None:
        policy.check_scope(target)
    policy.check_tags(list(tags), "Memory filter has too many tags.")
    policy.check_limit(limit, 1000, C.MEMORY_LIST_LIMIT_INVALID, "List limit must be 1-1000.")
    after = None
    if cursor is not None:
        u, c, i = decode_cursor(cursor, ("updated_at", "created_at", "id"))
        after = (u, c, i)
    return store.db.list_memories(
        scope=target,
        tags=tags,
        include_archived=include_archived,
        review_due_at=store.now() if needs_review else None,
        limit=limit,
        after=after,
    )


def history(
    store: AgentMemoryCore, memory_id: str, *, limit: int | None = None, cursor: str | None = None
) -> list[Event]:
    """A memory's events oldest first; a missing (or hard-deleted) id still has its events."""
    policy.check_id(memory_id)
    policy.check_limit(limit, 1000, C.MEMORY_HISTORY_LIMIT_INVALID, "History limit must be 1-1000.")
    after = None
    if cursor is not None:
        created, event_id = decode_cursor(cursor, ("created_at", "id"))
        after = (created, event_id)
    return store.db.history(memory_id, limit, after)


def audit(
    store: AgentMemoryCore,
    *,
    memory_id: str | None = None,
    event_types: Sequence[str] = (),
    actor: str | None = None,
    scope: str | None = None,
    since: str | None = None,
    until: str | None = None,
    limit: int = 50,
) -> list[Event]:
    """Store-wide events newest first, filtered."""
    if memory_id is not None:
        policy.check_id(memory_id)
    if scope is not None:
        policy.check_scope(scope)
    if actor is not None:
        policy.check_actor(actor)
    policy.check_event_types(list(event_types))
    policy.check_limit(limit, 200, C.MEMORY_AUDIT_LIMIT_INVALID, "Audit limit must be 1-200.")
    policy.check_date(since, "since")
    policy.check_date(until, "until")
    low, high = parse_date(since) if since else None, parse_date(until) if until else None
    invariant(
        low is None or high is None or low <= high,
        C.MEMORY_AUDIT_TIME_RANGE_INVALID,
        "Audit since must be earlier than or equal to until.",
    )
    return store.db.audit(
        memory_id=memory_id,
        event_types=event_types,
        actor=actor,
        scope=scope,
        since=None if low is None else iso_ms(low),
        until=None if high is None else iso_ms(high),
        limit=limit,
    )


def show(store: AgentMemoryCore, memory_id: str, *, history_limit: int = 50) -> dict[str, Any]:
    """`{memory, relations (up to 50), events (up to history_limit)}`."""
    policy.check_id(memory_id)
    policy.check_limit(
        history_limit, 1000, C.MEMORY_HISTORY_LIMIT_INVALID, "History limit must be 1-1000."
    )
    memory = store.get(memory_id)
    return {
        "memory": memory,
        "relations": rel_ops.list_relations(store, memory_id, limit=50),
        "events": store.db.history(memory_id, history_limit),
    }
