"""Durable artifact GC (SPEC.md ART-7): one bounded pass over the catalog's GC intents.

A pass settles expired reservations (each with its intent, in one transaction), prunes
replay receipts older than the retention, then leases due intents, rechecks that nothing
names each generation (a live reservation, or the current publication of its artifact),
deletes the unnamed bodies, and records failures with an exponential backoff (30 s doubling
to 1 h) and the last error. It runs from the origin's background task, from
`aidememo admin gc`, and from a project object's alarm at the edge.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import asdict, dataclass, replace
from typing import Any

from aidememo.domain.artifacts import (
    ARTIFACT_KIND,
    GC_BATCH_DEFAULT,
    GC_LEASE_MS,
    RECEIPT_RETENTION_MS,
    SETTLEMENT_GRACE_MS,
    GcIntent,
    Publication,
    State,
    backoff_ms,
    intent_for,
)
from aidememo.domain.model import ResourceRef, Scope
from aidememo.ports import BodyStore, Clock, ReadTx, Store, WriteTx
from aidememo.service.artifact_rules import crash_point


@dataclass(frozen=True, slots=True)
class GcReport:
    """What one pass did."""

    expired_reservations: int
    pruned_receipts: int
    leased: int
    deleted: int
    kept: int
    failed: int

    def to_json(self) -> dict[str, int]:
        """The wire shape of `aidememo admin gc`: the fields in order."""
        return asdict(self)


def named(tx: ReadTx, intent: GcIntent) -> bool:
    """True when a live reservation or the current publication names the intent's key."""
    r = tx.artifact_reservation_by_generation(intent.body_key)
    if r is not None and r.live:
        return True
    scope = Scope(intent.tenant_id, intent.project_id)
    res = tx.get_resource(scope, ResourceRef(ARTIFACT_KIND, intent.artifact_id))
    if res is None or res.body is None:
        return False
    return Publication.of(res.body).generation == intent.body_key


def tenant_intents(tx: WriteTx, tenant_id: str, now_ms: int, grant_window_ms: int = 0) -> int:
    """Queue every generation of a tenant before its rows are deleted (ARC-4, ART-7); with a
    grant-issuing body store each waits the longest grant's lifetime too (`grant_window_ms`),
    as a replaced generation does, so no download grant issued before is outrun (GRANT-7)."""
    n = 0
    for project_id, artifact_id, generation in tx.list_artifact_generations(tenant_id):
        tx.put_gc_intent(
            GcIntent(
                body_key=generation,
                tenant_id=tenant_id,
                project_id=project_id,
                artifact_id=artifact_id,
                reason="tenant_deleted",
                not_before_ms=now_ms + SETTLEMENT_GRACE_MS + grant_window_ms,
                created_at_ms=now_ms,
            )
        )
        n += 1
    return n


class ArtifactGc:
    """The GC worker over one store; `bodies` deletes synchronously (the origin), while
    `run_once_async` takes an awaited delete (the edge's R2 binding)."""

    def __init__(self, store: Store, bodies: BodyStore | None, clock: Clock) -> None:
        self.store = store
        self.bodies = bodies
        self.clock = clock

    def run_once(self, limit: int = GC_BATCH_DEFAULT) -> GcReport:
        """One bounded pass (at most `limit` rows per step) deleting through `bodies`: the
        pass of `run_once_async` with a delete that completes at once, run to its end."""
        bodies = self.bodies
        assert bodies is not None, "a synchronous pass needs a body store"

        async def delete(body_key: str) -> None:
            bodies.delete(body_key)

        return _run_to_end(self.run_once_async(delete, limit))

    async def run_once_async(
        self, delete: Callable[[str], Awaitable[None]], limit: int = GC_BATCH_DEFAULT
    ) -> GcReport:
        """One bounded pass (at most `limit` rows per step) with an awaited delete."""
        now, expired, pruned, leased = self._prepare(limit)
        outcomes: list[str] = []
        for intent in leased:
            if self._named(intent):
                outcomes.append(self._settle(intent, now, None, kept=True))
                continue
            try:
                await delete(intent.body_key)
            except Exception as exc:  # recorded, retried later with backoff
                outcomes.append(self._settle(intent, now, exc))
                continue
            outcomes.append(self._settle(intent, now, None))
        return _report(expired, pruned, leased, outcomes)

    def _prepare(self, limit: int) -> tuple[int, int, int, list[GcIntent]]:
        now = self.clock.now_ms()

        def settle(tx: WriteTx) -> tuple[int, int]:
            expired = tx.expired_artifact_reservations(now, limit)
            for r in expired:
                tx.put_artifact_reservation(r.settled(State.EXPIRED, r.expires_at_ms))
                tx.put_gc_intent(
                    intent_for(r, "expired", r.expires_at_ms + SETTLEMENT_GRACE_MS, now)
                )
            pruned = tx.prune_artifact_reservations(now - RECEIPT_RETENTION_MS, limit)
            return len(expired), pruned

        expired, pruned = self.store.transaction(settle)
        leased = self.store.transaction(
            lambda tx: tx.lease_gc_intents(now, now + GC_LEASE_MS, limit)
        )
        return now, expired, pruned, leased

    def _settle(
        self, intent: GcIntent, now: int, error: Exception | None, *, kept: bool = False
    ) -> str:
        """Drop the intent (deleted or kept), or record the failure with its backoff."""
        if error is None:
            if not kept:
                crash_point("after_object_delete")
            self.store.transaction(lambda tx: tx.delete_gc_intent(intent.body_key))
            return "kept" if kept else "deleted"
        attempts = intent.attempts + 1
        again = replace(
            intent,
            attempts=attempts,
            last_error=f"{type(error).__name__}: {error}"[:500],
            not_before_ms=now + backoff_ms(attempts),
            leased_until_ms=0,
        )
        self.store.transaction(lambda tx: tx.update_gc_intent(again))
        return "failed"

    def _named(self, intent: GcIntent) -> bool:
        found: bool = self.store.read(lambda tx: named(tx, intent))
        return found


def _report(expired: int, pruned: int, leased: list[GcIntent], outcomes: list[str]) -> GcReport:
    return GcReport(
        expired,
        pruned,
        len(leased),
        outcomes.count("deleted"),
        outcomes.count("kept"),
        outcomes.count("failed"),
    )


def _run_to_end(gc_pass: Coroutine[Any, Any, GcReport]) -> GcReport:
    """The report of a pass whose every await completes at once (it never suspends)."""
    try:
        gc_pass.send(None)
    except StopIteration as done:
        report: GcReport = done.value
        return report
    gc_pass.close()
    raise RuntimeError("a synchronous GC pass suspended")
