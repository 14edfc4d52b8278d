"""The origin's background artifact GC (SPEC.md ART-7): one bounded pass every interval, in a
daemon thread, until the server stops. A pass that fails is logged and the next one runs on
schedule; every pass is idempotent, so several origins on one database may run it at once
(intents are leased).

After every pass the task reports to the core's metrics hook (`aidememo.metrics.artifact_gc`,
SPEC.md METRICS-4): the GC intents still queued, a count bounded by `PENDING_COUNT_LIMIT`, and
the pass's failures (failed body deletes, or 1 for a pass that raised)."""

from __future__ import annotations

import logging
import threading

from aidememo import metrics
from aidememo.service.artifact_gc import ArtifactGc

log = logging.getLogger("aidememo.artifacts")

GC_INTERVAL_S = 30.0
PENDING_COUNT_LIMIT = 10_000


class GcTask:
    """Runs `gc.run_once()` every `interval_s` seconds from `start()` until `stop()`."""

    def __init__(self, gc: ArtifactGc, interval_s: float = GC_INTERVAL_S) -> None:
        self.gc = gc
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="aidememo-gc", daemon=True)

    def start(self) -> None:
        """Start the thread (once)."""
        self._thread.start()

    def stop(self) -> None:
        """Ask the thread to stop and wait for a pass in progress to end."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.run_pass()

    def run_pass(self) -> None:
        """One pass, logged and reported to the metrics hook; never raises."""
        failed = 1
        try:
            report = self.gc.run_once()
        except Exception:
            log.exception("artifact GC pass failed")
        else:
            failed = report.failed
            if report.leased or report.expired_reservations:
                log.info("artifact GC: %s", report.to_json())
        pending: int | None = None
        try:
            pending = self.gc.store.read(lambda tx: tx.count_gc_intents(PENDING_COUNT_LIMIT))
        except Exception:
            log.exception("counting the artifact GC intents failed")
        metrics.artifact_gc(pending, failed)
