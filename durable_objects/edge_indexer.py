"""The project object's semantic indexer (SPEC.md SEM-11): it follows the project's change feed
into Vectorize, outside every command's transaction, from the object's alarm.

One `step` does one of three things:
- a batch is waiting (`Ledger.batch`): ask Vectorize for its vectors (`getByIds`) and, once
  every upsert shows its own change's sequence and every deleted vector is gone, advance the
  canonical `semantic_state` to the batch's `to_seq` (compare-and-swap, as the origin's
  indexer does) and settle the ledger: `WAITING` until then. The applied sequence therefore
  never runs ahead of what a Vectorize query can see;
- the index is missing, pinned to another fingerprint or project epoch (a tenant deletion
  or an import made the project anew): delete every vector the ledger holds from Vectorize,
  forget them, and reset the index to sequence 0 (SEM-2: a rebuild never mixes);
- otherwise read up to `batch` changes after the applied sequence, embed the facts among
  them with Workers AI (`AI_BATCH` per call), upsert them (and delete the vectors of
  deleted facts) in the project's namespace, and record the batch as waiting. A batch with
  no fact in it advances the state at once.
The caller (`ProjectCoordinator`) runs store work through `store_run`, which holds the
object's lock; Workers AI and Vectorize are awaited without it, so requests keep flowing.
Failures (`semantic_unavailable`) propagate: the object retries from its alarm with backoff.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from aidememo.domain.model import Scope
from aidememo.domain.semantic_index import IndexStep
from aidememo.ports import ReadTx, WriteTx
from aidememo.service.semantic_indexer import changes_of_epoch, index_plan
from durable_objects.vectors import (
    FINGERPRINT,
    IDS_BATCH,
    PENDING_UPSERT,
    UPSERT_BATCH,
    Batch,
    Ledger,
    call,
    embed,
    namespace,
    unit,
    vector_id,
)

IDLE, PROGRESS, WAITING = "idle", "progress", "waiting"
BATCH = 64
StoreRun = Callable[[Callable[[Any], Any]], Awaitable[Any]]


class EdgeIndexer:
    """Feeds one project's changes into Vectorize (see the module docstring)."""

    def __init__(self, ledger: Ledger, ai: Any, index: Any, batch: int = BATCH) -> None:
        self.ledger = ledger
        self.ai = ai
        self.index = index
        self.batch = batch
        self.fingerprint = FINGERPRINT.text()

    async def step(self, scope: Scope, store_run: StoreRun) -> str:
        """One step for `scope`: `IDLE`, `PROGRESS` or `WAITING` (for Vectorize)."""
        waiting = self.ledger.batch()
        if waiting is not None:
            return await self._settle(scope, waiting, store_run)
        found = await store_run(lambda store: store.read(lambda tx: _head(tx, scope)))
        if found is None:  # the tenant was deleted: its vectors go too (ARC-4)
            if self.ledger.all_ids():
                await self.clear()
            return IDLE
        epoch, head, state = found
        if state is None or state.fingerprint != self.fingerprint or state.project_epoch != epoch:
            await self.clear()
            await store_run(
                lambda store: store.transaction(
                    lambda tx: tx.semantic_reset(scope, self.fingerprint, epoch)
                )
            )
            from_seq = 0
        else:
            from_seq = state.applied_seq
        if from_seq >= head:
            return IDLE
        changes = await store_run(
            lambda store: store.read(
                lambda tx: changes_of_epoch(tx, scope, epoch, from_seq, self.batch)
            )
        )
        if not changes:
            return IDLE
        batch = Batch(from_seq, changes[-1].seq, epoch)
        upserts, deletes, texts = index_plan(changes)
        vectors = await embed(self.ai, texts) if texts else []
        space = namespace(scope)
        rows = [
            {
                "id": vector_id(scope, fid),
                "values": unit(values),
                "namespace": space,
                "metadata": {"seq": seq} if src is None else {"seq": seq, "source_id": src},
            }
            for (fid, seq, src, _), values in zip(upserts, vectors, strict=True)
        ]
        gone = [vector_id(scope, fid) for fid in deletes]
        for start in range(0, len(rows), UPSERT_BATCH):
            await call("upsert", self.index.upsert, rows[start : start + UPSERT_BATCH])
        for start in range(0, len(gone), IDS_BATCH):
            await call("deleteByIds", self.index.deleteByIds, gone[start : start + IDS_BATCH])
        written = [(vector_id(scope, fid), fid, seq) for fid, seq, _, _ in upserts]
        self.ledger.begin(batch, written, gone)
        if not written and not gone:
            return await self._settle(scope, batch, store_run)
        return PROGRESS

    async def _settle(self, scope: Scope, batch: Batch, store_run: StoreRun) -> str:
        if not await self._visible():
            return WAITING

        step = IndexStep(self.fingerprint, batch.from_seq, batch.to_seq)

        def apply(tx: WriteTx) -> bool:
            return tx.semantic_apply(scope, step)

        await store_run(lambda store: store.transaction(apply))
        # Moved or not (a reset in between loses the race), the batch is done with.
        self.ledger.settle()
        return PROGRESS

    async def _visible(self) -> bool:
        """Whether Vectorize shows every pending write: upserts with their own sequence,
        deletions gone."""
        pending = self.ledger.pending()
        for start in range(0, len(pending), IDS_BATCH):
            chunk = pending[start : start + IDS_BATCH]
            found = await call("getByIds", self.index.getByIds, [v for v, _, _ in chunk])
            seen = {
                str(v.get("id")): (v.get("metadata") or {}).get("seq")
                for v in (found or [])
                if isinstance(v, dict)
            }
            for vid, seq, kind in chunk:
                if kind == PENDING_UPSERT and seen.get(vid) != seq:
                    return False
                if kind != PENDING_UPSERT and vid in seen:
                    return False
        return True

    async def clear(self) -> None:
        """Delete every vector the ledger holds from Vectorize, then forget them."""
        ids = self.ledger.all_ids()
        for start in range(0, len(ids), IDS_BATCH):
            await call("deleteByIds", self.index.deleteByIds, ids[start : start + IDS_BATCH])
        self.ledger.clear()


def _head(tx: ReadTx, scope: Scope) -> tuple[str, int, Any] | None:
    """The project's epoch, head and index state; None when there is no such project."""
    project = tx.get_project(scope)
    if project is None:
        return None
    return project.project_epoch, project.head_seq, tx.semantic_state(scope)
