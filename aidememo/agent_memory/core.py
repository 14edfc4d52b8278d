"""The core of the local memory store (`AgentMemory`): its state (the database, default scope,
recall defaults, clock), the event, read and compare-and-swap helpers every operation uses, and
the two writes the others build on, `remember` and `update` (SPEC.md MEM-5, MEM-7).

The operation modules (`capture`, `reads`, `relations`, `transfer`) take a `AgentMemoryCore`;
`aidememo.agent_memory.store.AgentMemory` adds them as its methods.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import TYPE_CHECKING, Any, Self

from aidememo.agent_memory import paths, policy
from aidememo.agent_memory.closing import ClosedOnExit
from aidememo.agent_memory.db import MemoryDatabase
from aidememo.agent_memory.errors import AgentMemoryError, invariant
from aidememo.agent_memory.errors import MemoryErrorCode as C
from aidememo.agent_memory.jstext import js_trim, normalize_date, now_iso
from aidememo.agent_memory.model import (
    GLOBAL_SCOPE,
    UNSET,
    Event,
    Memory,
    new_id,
)

if TYPE_CHECKING:
    from aidememo.agent_memory.semantic import SemanticRecall

ACTOR_CORE = "core"
_UPDATE_FIELDS = (
    "content",
    "kind",
    "scope",
    "tags",
    "confidence",
    "confidence_state",
    "provenance",
    "review_after",
    "expires_at",
)
_CAMEL = {
    "confidence_state": "confidenceState",
    "review_after": "reviewAfter",
    "expires_at": "expiresAt",
}
_NULLABLE = ("confidence_state", "provenance", "review_after", "expires_at")


def _date(value: str | None) -> str | None:
    return None if value is None else normalize_date(value)


@dataclass(eq=False)
class AgentMemoryCore(ClosedOnExit):
    """One memory store, its default scope and its recall defaults."""

    db: MemoryDatabase
    _: KW_ONLY
    scope: str = GLOBAL_SCOPE
    team_scope: str | None = None
    include_global: bool = False
    recall_limit: int = policy.RECALL_LIMIT_DEFAULT
    now: Callable[[], str] = now_iso
    # Semantic and hybrid recall (MEM-23): set by a caller that has a model runtime.
    semantic: SemanticRecall | None = field(default=None, init=False)

    @classmethod
    def open(cls, path: str, **options: Any) -> Self:
        """Open (creating and migrating as needed) the store file at `path`."""
        return cls(MemoryDatabase(path), **options)

    @classmethod
    def open_runtime(cls, runtime: paths.MemoryRuntime) -> Self:
        """Open the store `runtime` names with its scope and recall defaults (MEM-9), its
        directory made private first."""
        paths.ensure_private_dir(os.path.dirname(runtime.store_path))
        return cls.open(
            runtime.store_path,
            scope=runtime.scope,
            include_global=runtime.include_global,
            recall_limit=runtime.recall_limit,
            team_scope=runtime.team_scope,
        )

    def close(self) -> None:
        self.db.close()

    # -- helpers ---------------------------------------------------------------------------

    def event(
        self,
        memory_id: str | None,
        event_type: str,
        actor: str,
        payload: dict[str, Any],
        at: str | None = None,
    ) -> Event:
        return Event(new_id("evt"), memory_id, event_type, actor, payload, at or self.now())

    def get(self, memory_id: str) -> Memory:
        policy.check_id(memory_id)
        memory = self.db.find(memory_id)
        if memory is None:
            raise AgentMemoryError(C.MEMORY_NOT_FOUND, "Memory was not found.", {"id": memory_id})
        return memory

    @staticmethod
    def check_expected(expected: int | None, memory: Memory) -> None:
        if expected is None:
            return
        invariant(
            isinstance(expected, int) and not isinstance(expected, bool) and expected >= 1,
            C.MEMORY_REVISION_INVALID,
            "Memory revision is invalid.",
            {"expectedRevision": expected},
        )
        if memory.revision != expected:
            raise AgentMemoryError(
                C.MEMORY_REVISION_CONFLICT,
                "Memory changed before this operation could commit.",
                {"id": memory.id, "expectedRevision": expected, "currentRevision": memory.revision},
            )

    @staticmethod
    def committed(ok: bool, memory_id: str, expected: int) -> None:
        if not ok:
            raise AgentMemoryError(
                C.MEMORY_REVISION_CONFLICT,
                "Memory changed before this operation could commit.",
                {"id": memory_id, "expectedRevision": expected},
            )

    def new_memory(
        self,
        *,
        content: str,
        kind: str,
        scope: str,
        tags: Sequence[str],
        source: str,
        confidence: float | None,
        confidence_state: str | None,
        provenance: dict[str, Any] | None,
        review_after: str | None,
        expires_at: str | None,
    ) -> Memory:
        """A new record of a writer's fields, checked first (Nuzo's `assertCanRemember`)."""
        policy.check_memory(
            content=content,
            kind=kind,
            scope=scope,
            tags=list(tags),
            source=source,
            confidence=1.0 if confidence is None else confidence,
            confidence_state=confidence_state,
            provenance=provenance,
            review_after=review_after,
            expires_at=expires_at,
        )
        now = self.now()
        return Memory(
            id=new_id("mem"),
            revision=1,
            scope=scope,
            kind=kind,
            content=js_trim(content),
            tags=list(dict.fromkeys(tags)),
            source=source,
            confidence=1.0 if confidence is None else float(confidence),
            confidence_state=confidence_state,
            provenance=provenance,
            review_after=_date(review_after),
            expires_at=_date(expires_at),
            created_at=now,
            updated_at=now,
        )

    def persist(self, memory: Memory, actor: str) -> None:
        """Insert a new memory, its FTS row and `memory.created` (inside a write transaction)."""
        self.db.insert(memory)
        self.db.index(memory, new=True)
        self.db.append(
            self.event(
                memory.id,
                "memory.created",
                actor,
                {
                    "kind": memory.kind,
                    "scope": memory.scope,
                    "tags": memory.tags,
                    "confidenceState": memory.confidence_state,
                    "provenance": memory.provenance,
                    "reviewAfter": memory.review_after,
                    "expiresAt": memory.expires_at,
                },
                memory.created_at,
            )
        )

    # -- writes ----------------------------------------------------------------------------

    def remember(
        self,
        content: str,
        *,
        kind: str,
        scope: str | None = None,
        tags: Sequence[str] = (),
        source: str = "aidememo:core",
        confidence: float | None = None,
        confidence_state: str | None = "user_confirmed",
        provenance: dict[str, Any] | None = None,
        review_after: str | None = None,
        expires_at: str | None = None,
        actor: str = ACTOR_CORE,
    ) -> Memory:
        """Store a new memory (never deduplicated, MEM-7) and its `memory.created` event."""
        memory = self.new_memory(
            content=content,
            kind=kind,
            scope=scope or self.scope,
            tags=tags,
            source=source,
            confidence=confidence,
            confidence_state=confidence_state,
            provenance=provenance,
            review_after=review_after,
            expires_at=expires_at,
        )
        policy.check_actor(actor)
        with self.db.write():
            self.persist(memory, actor)
        return memory

    def update(
        self,
        memory_id: str,
        *,
        expected_revision: int | None = None,
        actor: str = ACTOR_CORE,
        **fields: Any,
    ) -> Memory:
        """Change the given fields (a nullable field given as None is cleared); MEM-5 CAS."""
        policy.check_id(memory_id)
        policy.check_actor(actor)
        unknown = set(fields) - set(_UPDATE_FIELDS)
        if unknown:
            raise TypeError(f"unknown update fields: {sorted(unknown)}")
        given = {k: v for k, v in fields.items() if v is not UNSET}
        given = {k: v for k, v in given.items() if v is not None or k in _NULLABLE}
        current = self.get(memory_id)
        self.check_expected(expected_revision, current)
        if not given:
            raise AgentMemoryError(
                C.MEMORY_UPDATE_EMPTY,
                "At least one memory field must be updated.",
                {"id": memory_id},
            )
        merged = {name: given.get(name, getattr(current, name)) for name in _UPDATE_FIELDS}
        policy.check_memory(source=current.source, **merged)
        updated = current.evolve(
            revision=current.revision + 1,
            content=js_trim(merged["content"]),
            kind=merged["kind"],
            scope=merged["scope"],
            tags=list(dict.fromkeys(merged["tags"])),
            confidence=float(merged["confidence"]),
            confidence_state=merged["confidence_state"],
            provenance=merged["provenance"],
            review_after=_date(merged["review_after"])
            if "review_after" in given
            else current.review_after,
            expires_at=_date(merged["expires_at"]) if "expires_at" in given else current.expires_at,
            updated_at=self.now(),
        )
        with self.db.write():
            self.committed(
                self.db.update_cas(updated, current.revision), memory_id, current.revision
            )
            self.db.index(updated)
            self.db.append(
                self.event(
                    updated.id,
                    "memory.updated",
                    actor,
                    {
                        "changed": {
                            _CAMEL.get(name, name): name in given for name in _UPDATE_FIELDS
                        },
                        "scope": updated.scope,
                    },
                    updated.updated_at,
                )
            )
        return updated
