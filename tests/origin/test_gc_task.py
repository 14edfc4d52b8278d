"""The origin's background artifact GC (SPEC.md ART-7): `origin.gc_task.GcTask` runs passes
until stopped, a pass that raises does not stop the next one, and every pass reports the
queued intents and its failures to the metrics hook (METRICS-4)."""

from __future__ import annotations

import contextlib
import threading
from pathlib import Path

import pytest

from aidememo import metrics
from aidememo.bodies.memory import MemoryBodies
from aidememo.domain.artifacts import GcIntent
from aidememo.domain.clock import FixedClock
from aidememo.ports import Store, WriteTx
from aidememo.service.artifact_gc import ArtifactGc, GcReport
from aidememo.stores.in_memory import InMemoryStore
from aidememo.stores.sqlite import SqliteStore
from origin.gc_task import GcTask


class _Flaky(ArtifactGc):
    def __init__(self, *args: object, **kw: object) -> None:
        super().__init__(*args, **kw)  # type: ignore[arg-type]
        self.passes = 0
        self.done = threading.Event()

    def run_once(self, limit: int = 100) -> GcReport:
        self.passes += 1
        if self.passes == 1:
            raise RuntimeError("the first pass fails")
        report = super().run_once(limit)
        if report.deleted:
            self.done.set()
        return report


def test_art7_background_task_deletes_due_bodies_after_a_failed_pass() -> None:
    store, bodies, clock = InMemoryStore(), MemoryBodies(), FixedClock(10_000)
    bodies.objects["gen_x1"] = b"orphan"
    intent = GcIntent("gen_x1", "t", "p", "art_x", "aborted", not_before_ms=5_000)
    store.transaction(lambda tx: tx.put_gc_intent(intent))
    gc = _Flaky(store, bodies, clock)
    task = GcTask(gc, interval_s=0.01)
    task.start()
    try:
        assert gc.done.wait(30)
    finally:
        task.stop()
    assert "gen_x1" not in bodies.objects and gc.passes >= 2
    assert store.read(lambda tx: tx.get_gc_intent("gen_x1")) is None


class _Recorder:
    def __init__(self) -> None:
        self.passes: list[tuple[int | None, int]] = []

    def commit(self, seconds: float) -> None: ...

    def group_commit(self, size: int) -> None: ...

    def live_subscribers(self, delta: int) -> None: ...

    def live_dropped(self) -> None: ...

    def semantic_lag(self, sequences: int) -> None:
        pass

    def artifact_gc(self, pending: int | None, failed: int) -> None:
        self.passes.append((pending, failed))


class _BrokenBodies(MemoryBodies):
    def delete(self, key: str) -> None:
        raise OSError("the store is down")


def _queue(store: Store, n: int) -> None:
    for i in range(n):
        intent = GcIntent(f"gen_q{i:03d}", "t", "p", f"art_q{i}", "aborted", not_before_ms=5_000)

        def put(tx: WriteTx, intent: GcIntent = intent) -> None:
            tx.put_gc_intent(intent)

        store.transaction(put)


@pytest.mark.parametrize("backend", ["memory", "sqlite", "postgres"])
def test_metrics4_gc_pass_reports_pending_intents_and_failures(
    backend: str, tmp_path: Path
) -> None:
    with contextlib.ExitStack() as stack:
        store = _store(backend, tmp_path, stack)
        _check_pass_reports(store)


def _store(backend: str, tmp_path: Path, stack: contextlib.ExitStack) -> Store:
    if backend == "memory":
        return InMemoryStore()
    if backend == "sqlite":
        return SqliteStore.open_file(tmp_path / "gc.sqlite")
    from tests.pg import fresh_database

    return stack.enter_context(fresh_database()).open("psycopg")


def _check_pass_reports(store: Store) -> None:
    try:
        _queue(store, 3)
        assert store.read(lambda tx: tx.count_gc_intents(2)) == 2  # bounded
        recorder = _Recorder()
        previous = metrics.install(recorder)
        try:
            task = GcTask(ArtifactGc(store, _BrokenBodies(), FixedClock(10_000)))
            task.run_pass()  # every delete fails: three failures, three intents still queued
            flaky = _Flaky(store, MemoryBodies(), FixedClock(10_000))
            GcTask(flaky).run_pass()  # a pass that raises counts as one failure
        finally:
            metrics.install(previous)
        assert recorder.passes == [(3, 3), (3, 1)]
    finally:
        store.close()


def test_metrics4_prometheus_sink_sets_pending_and_counts_failures() -> None:
    from prometheus_client import CollectorRegistry

    from origin.metrics import PrometheusSink

    registry = CollectorRegistry()
    sink = PrometheusSink(registry)
    sink.artifact_gc(7, 2)
    sink.artifact_gc(None, 1)  # not counted: the gauge keeps its value
    sink.artifact_gc(4, 0)
    assert registry.get_sample_value("aidememo_artifact_gc_pending") == 4
    assert registry.get_sample_value("aidememo_artifact_gc_failures_total") == 3
