"""The local memory store's operations (SPEC.md MEM-1..MEM-8).

`AgentMemory` is the API the CLI, the MCP tools and embedding programs use:

    store = AgentMemory.open(path)            # or AgentMemory.open(path, scope="project:x")
    memory = store.remember("Use uv for installs.", kind="instruction", tags=["python"])
    for result in store.recall("uv installs"):
        print(result.memory.id, result.memory.scope, result.score)

Every write validates its input first (no transaction is opened for a refused write), then
commits its rows, FTS rows and audit events in one transaction. Stateful writes compare and swap
on `revision`: a row that moved on since it was read fails with `MEMORY_REVISION_CONFLICT`
and changes nothing; conflicts are never retried silently.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aidememo.agent_memory import capture, policy, reads, transfer
from aidememo.agent_memory import relations as rel_ops
from aidememo.agent_memory.core import ACTOR_CORE, AgentMemoryCore
from aidememo.agent_memory.errors import AgentMemoryError, invariant
from aidememo.agent_memory.errors import MemoryErrorCode as C
from aidememo.agent_memory.jstext import js_trim
from aidememo.agent_memory.model import (
    CHALLENGE_OUTCOMES,
    Memory,
    Relation,
    new_id,
)

__all__ = ["ACTOR_CORE", "AgentMemory"]


class AgentMemory(AgentMemoryCore):
    """One memory store with every operation: the core's writes, forgetting, challenges, and
    the reads, relations, capture and transfer of their modules."""

    def forget(
        self,
        memory_id: str,
        *,
        mode: str = "archive",
        confirm: bool = False,
        reason: str | None = None,
        expected_revision: int | None = None,
        actor: str = ACTOR_CORE,
    ) -> None:
        """Archive (default) or, with `confirm`, hard-delete a memory (MEM-8)."""
        policy.check_id(memory_id)
        policy.check_actor(actor)
        policy.check_reason(reason)
        memory = self.get(memory_id)
        self.check_expected(expected_revision, memory)
        now = self.now()
        payload = {"reason": reason, "scope": memory.scope}
        if mode == "delete":
            invariant(
                confirm is True,
                C.MEMORY_DELETE_CONFIRMATION_REQUIRED,
                "Hard delete requires explicit confirmation.",
                {"id": memory_id},
            )
            with self.db.write():
                self.db.unindex(memory_id)
                self.committed(
                    self.db.delete_cas(memory_id, memory.revision), memory_id, memory.revision
                )
                self.db.append(self.event(memory_id, "memory.deleted", actor, payload, now))
            return
        with self.db.write():
            self.committed(
                self.db.archive_cas(memory_id, now, memory.revision), memory_id, memory.revision
            )
            self.db.unindex(memory_id)
            self.db.append(self.event(memory_id, "memory.archived", actor, payload, now))

    def forget_many(
        self,
        *,
        scope: str | None = None,
        tags: Sequence[str] = (),
        all: bool = False,
        mode: str = "archive",
        confirm: bool = False,
        dry_run: bool = True,
        reason: str | None = None,
        actor: str = ACTOR_CORE,
    ) -> dict[str, Any]:
        """Preview (default) or apply a bulk forget; one transaction per memory (MEM-8)."""
        if not all and scope is None and not tags:
            raise AgentMemoryError(
                C.MEMORY_BULK_SELECTOR_REQUIRED,
                "Bulk forget requires a scope, at least one tag, or all.",
            )
        if all and (scope is not None or tags):
            raise AgentMemoryError(
                C.MEMORY_BULK_SELECTOR_CONFLICT,
                "Bulk forget all cannot be combined with scope or tags.",
            )
        policy.check_actor(actor)
        policy.check_reason(reason)
        if scope is not None:
            policy.check_scope(scope)
        policy.check_tags(list(tags), "Memory filter has too many tags.")
        if not dry_run and mode == "delete" and confirm is not True:
            raise AgentMemoryError(
                C.MEMORY_DELETE_CONFIRMATION_REQUIRED, "Hard delete requires explicit confirmation."
            )
        memories = self.db.list_memories(scope=scope, tags=tags)
        if not dry_run:
            for memory in memories:
                self.forget(
                    memory.id,
                    mode=mode,
                    confirm=confirm,
                    reason=reason,
                    expected_revision=memory.revision,
                    actor=actor,
                )
        return {
            "matched": len(memories),
            "affected": 0 if dry_run else len(memories),
            "mode": mode,
            "dryRun": dry_run,
            "ids": [m.id for m in memories],
        }

    def challenge(
        self,
        memory_id: str,
        *,
        outcome: str,
        reason: str,
        superseded_by: str | None = None,
        expected_revision: int | None = None,
        actor: str = ACTOR_CORE,
    ) -> tuple[Memory, Relation | None]:
        """Record a review outcome; `superseded` also relates the superseding memory (MEM-8)."""
        policy.check_id(memory_id)
        policy.check_actor(actor)
        policy.check_required_reason(reason)
        invariant(
            outcome in CHALLENGE_OUTCOMES,
            C.MEMORY_CHALLENGE_OUTCOME_INVALID,
            "Memory challenge outcome is invalid.",
            {"outcome": outcome},
        )
        current = self.get(memory_id)
        self.check_expected(expected_revision, current)
        superseding: Memory | None = None
        if outcome == "superseded":
            invariant(
                superseded_by is not None,
                C.MEMORY_SUPERSEDING_MEMORY_REQUIRED,
                "Superseded challenges require the superseding memory ID.",
                {"id": memory_id},
            )
            assert superseded_by is not None
            policy.check_id(superseded_by)
            invariant(
                superseded_by != memory_id,
                C.MEMORY_RELATION_SELF_INVALID,
                "A memory cannot supersede itself.",
                {"id": memory_id},
            )
            superseding = self.db.find(superseded_by)
            if superseding is None:
                raise AgentMemoryError(
                    C.MEMORY_RELATION_SOURCE_NOT_FOUND,
                    "Superseding memory was not found.",
                    {"id": superseded_by},
                )
            policy.check_relation("supersedes", superseding.id, current.id, reason)
        now = self.now()
        state = {"valid": "user_confirmed", "needs_review": "needs_review"}.get(
            outcome, "deprecated"
        )
        review_after = None if outcome == "valid" else now
        updated = current.evolve(
            revision=current.revision + 1,
            confidence_state=state,
            review_after=review_after,
            updated_at=now,
        )
        policy.check_record(updated)
        created: Relation | None = None
        with self.db.write():
            self.committed(
                self.db.update_cas(updated, current.revision), memory_id, current.revision
            )
            self.db.index(updated)
            changed = dict.fromkeys(("content", "kind", "scope", "tags", "confidence"), False)
            changed |= {
                "confidenceState": True,
                "provenance": False,
                "reviewAfter": True,
                "expiresAt": False,
            }
            self.db.append(
                self.event(
                    updated.id,
                    "memory.updated",
                    actor,
                    {"changed": changed, "scope": updated.scope},
                    now,
                )
            )
            if superseding is not None:
                created = Relation(
                    new_id("rel"), superseding.id, updated.id, "supersedes", js_trim(reason), now
                )
                rel_ops.insert_or_fail(self, created, superseding, updated, actor)
            self.db.append(
                self.event(
                    updated.id,
                    "memory.challenged",
                    actor,
                    {
                        "outcome": outcome,
                        "reason": js_trim(reason),
                        "previousConfidenceState": current.confidence_state,
                        "confidenceState": state,
                        "reviewAfter": review_after,
                        "supersededByMemoryId": superseded_by,
                        "supersededByScope": None if superseding is None else superseding.scope,
                        "relationId": None if created is None else created.id,
                        "scope": updated.scope,
                    },
                    now,
                )
            )
        return updated, created

    # -- delegated -------------------------------------------------------------------------

    recall = reads.recall
    recall_detailed = reads.recall_detailed
    record_usage = reads.record_recall_usage
    history = reads.history
    audit = reads.audit
    show = reads.show

    relate = rel_ops.relate
    relations = rel_ops.list_relations
    unrelate = rel_ops.unrelate
    suggest_capture = capture.suggest_capture
    confirm_capture = capture.confirm_capture
    export = transfer.export_document
    import_document = transfer.import_document
    list = reads.list_memories
