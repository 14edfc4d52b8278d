"""The semantic indexer (SPEC.md SEM-6, SEM-7): it follows each project's change feed and
writes the derived index, outside every command's transaction, so a write never waits for
the embedding provider nor fails because of it.

One `step()` takes up to `projects` projects whose index is missing, pinned to another
fingerprint or project epoch (then it is reset: a model change rebuilds, never mixes), or
behind the head; for each it reads up to `batch` changes after the applied sequence in one
read view, embeds the facts among them with no transaction open, then applies the vectors and
the new sequence in one write transaction by compare-and-swap on the applied sequence. Two
indexers on one database therefore never apply a change twice; the loser of a race retries
from the state it reads next. Idempotent: rerunning after a crash redoes at most one batch.

CPU is bounded by a duty cycle: after embedding for `t` seconds the loop sleeps
`t * (1 - duty) / duty`, so the indexer uses at most `duty` of one core (the provider runs
with one thread, the loop's own). The loop steps again at once only while it is behind (a
project's batch came full, or more projects wait than one step takes); a step that caught up
is followed by `idle_s`, so under a steady stream of writes it reads each feed a few times a
second in batches instead of once per write. `run()` also lowers its thread's CPU priority
(nice +10): when the cores are busy, the server's request handling comes first and the index
catches up once they are not. Stdlib only; `aidememo indexer` runs it in its own process, which
`aidememo serve` also starts as its child (`origin/semantic_task.py`).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from aidememo import metrics
from aidememo.domain.canonical import decode_stored
from aidememo.domain.errors import AidememoError
from aidememo.domain.model import ChangeOp, ChangeRecord, Scope
from aidememo.domain.semantic_index import IndexStep, PendingProject, VectorRow
from aidememo.ports import Embedder, ReadTx, Store, WriteTx

BATCH = 64
PROJECTS = 16
DUTY = 0.5
IDLE_S = 0.2
NICE = 10  # the loop's thread yields the CPU to request handling when the cores are busy


@dataclass(frozen=True, slots=True)
class IndexerSettings:
    """How much one step does and how much CPU the loop may take."""

    batch: int = BATCH
    projects: int = PROJECTS
    duty: float = DUTY
    idle_s: float = IDLE_S
    nice: int = NICE


@dataclass
class IndexerStats:
    """What the indexer has done since it started (metrics and `/ready` details)."""

    changes: int = 0
    facts: int = 0
    embed_s: float = 0.0
    lag: int = 0  # sequences behind, summed over the projects of the last step
    errors: int = 0
    last_error: str | None = None


class SemanticIndexer:
    """Follows every project's feed into the semantic index of one embedder."""

    def __init__(
        self,
        store: Store,
        embedder: Embedder,
        settings: IndexerSettings | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.fingerprint = embedder.fingerprint.text()
        self.settings = settings or IndexerSettings()
        self.stats = IndexerStats()
        self._sleep = sleep
        self._stop = threading.Event()
        self._behind = False  # the last step left work it could not take

    def step(self) -> int:
        """One pass over the projects that need work; the changes applied."""
        pending = self.store.read(
            lambda tx: tx.semantic_pending(self.fingerprint, self.settings.projects)
        )
        applied = 0
        lag = 0
        full = len(pending) >= self.settings.projects  # more projects may wait
        for project in pending:
            n = self._advance(project)
            applied += n
            full = full or n >= self.settings.batch
            lag += project.head_seq - (project.state.applied_seq if project.state else 0)
        self.stats.lag = max(0, lag - applied)
        self._behind = full or self.stats.lag > 0
        metrics.semantic_lag(self.stats.lag)
        return applied

    def caught_up(self) -> bool:
        """Whether the last step took every change that was there when it began: then `run`
        waits `idle_s` before the next one rather than stepping again at once."""
        return not self._behind

    def run_until_idle(self) -> int:
        """Steps until nothing is pending; the changes applied."""
        total = 0
        while True:
            n = self.step()
            total += n
            if n == 0:
                return total

    def run(self) -> None:
        """Step until `stop()`, idling `idle_s` after a step that caught up (or found nothing
        to do); a failure (store or provider) is counted and retried after the idle time. The
        provider is made ready first (a lazily loaded model loads now, on this thread, so the
        first facts written after a start do not wait for it)."""
        _lower_priority(self.settings.nice)
        try:
            self.embedder.embed([])
        except AidememoError as exc:
            self.stats.errors += 1
            self.stats.last_error = f"{exc.code}: {exc.message}"
        while not self._stop.is_set():
            try:
                self.step()
            except AidememoError as exc:
                self.stats.errors += 1
                self.stats.last_error = f"{exc.code}: {exc.message}"
                self._behind = False
            if self.caught_up():
                self._stop.wait(self.settings.idle_s)

    def stop(self) -> None:
        """Make `run` return after its current step."""
        self._stop.set()

    def status(self) -> dict[str, object]:
        """What `/ready` reports of the indexer (SEM-7): its model, its lag in sequences at
        the last step, what it embedded and its last failure."""
        return {
            "semantic_model": self.embedder.fingerprint.as_json(),
            "index_lag": self.stats.lag,
            "facts_indexed": self.stats.facts,
            "errors": self.stats.errors,
            "last_error": self.stats.last_error,
        }

    def _advance(self, project: PendingProject) -> int:
        scope, state = project.scope, project.state
        if (
            state is None
            or state.fingerprint != self.fingerprint
            or state.project_epoch != project.project_epoch
        ):
            self.store.transaction(
                lambda tx: tx.semantic_reset(scope, self.fingerprint, project.project_epoch)
            )
            from_seq = 0
        else:
            from_seq = state.applied_seq
        changes = self.store.read(
            lambda tx: changes_of_epoch(
                tx, scope, project.project_epoch, from_seq, self.settings.batch
            )
        )
        if not changes:
            return 0
        upserts, deletes, texts = index_plan(changes)
        vectors = self._embed(texts)
        rows = [
            VectorRow(fid, seq, src, vec, replaces)
            for (fid, seq, src, replaces), vec in zip(upserts, vectors, strict=True)
        ]
        step = IndexStep(self.fingerprint, from_seq, changes[-1].seq, rows, deletes)

        def apply(tx: WriteTx) -> bool:
            return tx.semantic_apply(scope, step)

        if not self.store.transaction(apply):
            return 0
        self.stats.changes += len(changes)
        self.stats.facts += len(rows)
        return len(changes)

    def _embed(self, texts: list[str]) -> list[bytes]:
        if not texts:
            return []
        started = time.perf_counter()
        vectors = self.embedder.embed(texts)
        spent = time.perf_counter() - started
        self.stats.embed_s += spent
        duty = self.settings.duty
        if 0 < duty < 1:
            self._sleep(spent * (1 - duty) / duty)
        return vectors


def _lower_priority(nice: int) -> None:
    """Lower the calling thread's CPU priority by `nice` (Linux: a thread's own; elsewhere
    where the stdlib has no such call, as in Pyodide, nothing)."""
    if nice <= 0:
        return
    try:
        current = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), min(19, current + nice))
    except (AttributeError, OSError):
        pass


def changes_of_epoch(
    tx: ReadTx, scope: Scope, epoch: str, after_seq: int, limit: int
) -> list[ChangeRecord]:
    """At most `limit` changes of `scope` after `after_seq`, none once the project is gone or
    has another epoch (the index follows one epoch of a project)."""
    project = tx.get_project(scope)
    if project is None or project.project_epoch != epoch:
        return []
    return tx.list_changes(scope, after_seq, limit)


def index_plan(
    changes: list[ChangeRecord],
) -> tuple[list[tuple[str, int, str | None, bool]], list[str], list[str]]:
    """The facts to embed `(fact_id, seq, source_id, replaces)` with their texts, and the
    facts whose vectors go; the last change of a fact in the batch wins."""
    last: dict[str, ChangeRecord] = {}
    for change in changes:
        if change.ref.kind == "fact":
            last.pop(change.ref.id, None)
            last[change.ref.id] = change
    upserts: list[tuple[str, int, str | None, bool]] = []
    texts: list[str] = []
    deletes: list[str] = []
    for fact_id, change in last.items():
        if change.op == ChangeOp.DELETE or change.body is None:
            deletes.append(fact_id)
            continue
        record = decode_stored(change.body)
        content = record.get("content")
        if not isinstance(content, str):
            continue
        source = record.get("source_id")
        upserts.append(
            (fact_id, change.seq, source if isinstance(source, str) else None, change.revision > 1)
        )
        texts.append(content)
    return upserts, deletes, texts
