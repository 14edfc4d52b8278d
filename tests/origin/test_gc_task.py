"""The origin's background artifact GC (SPEC.md ART-7): `origin.gc_task.GcTask` runs passes
until stopped, and a pass that raises does not stop the next one."""

from __future__ import annotations

import threading

from aidememo.bodies.memory import MemoryBodies
from aidememo.domain.artifacts import GcIntent
from aidememo.domain.clock import FixedClock
from aidememo.service.artifact_gc import ArtifactGc, GcReport
from aidememo.stores.memory import MemoryStore
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
    store, bodies, clock = MemoryStore(), MemoryBodies(), FixedClock(10_000)
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
