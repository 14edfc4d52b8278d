"""Prometheus metrics for `aidememo serve --metrics-bind HOST:PORT` (SPEC.md METRICS-1..3).

Off by default. When on, `start` registers the metrics below, installs a `PrometheusSink` as the
core's hook (`aidememo.metrics`: commits, group commits, live subscribers), wraps the HTTP app
in `MeteredApp` (requests, by route name) and serves the text format on a listener of its own,
a `prometheus_client` thread on HOST:PORT, never on the API port: the API's bearer-token
checks do not guard it, so it belongs on an address only the scraper reaches.

Under `--workers N` (`origin.workers`) every worker is a process of its own: `start` then runs
`prometheus_client` in multiprocess mode. The parent makes a fresh directory for the workers'
sample files (`PROMETHEUS_MULTIPROC_DIR`, set before `prometheus_client` is imported), serves
the listener and sums what every worker wrote (`MultiProcessCollector`). Gauges are summed
over the workers (`livesum`); a worker that exits stops the service (`origin.workers`), so no
dead worker's gauge lingers.

The metrics (the names are part of METRICS-2):
- `aidememo_http_requests_total{route,method,status}`: answered requests; `route` is the route's
  name (`aidememo.http.routes`), `unmatched` when none matched; `method` one of the HTTP methods
  or `other`.
- `aidememo_http_request_duration_seconds{route}`: time in the core's dispatch.
- `aidememo_commit_duration_seconds`: a write's COMMIT (see `aidememo.metrics`).
- `aidememo_group_commit_batch_size`: callers' writes per SQLite commit.
- `aidememo_live_subscribers`: open live-feed WebSockets; `aidememo_live_dropped_total`: live
  subscribers closed with `feed_overflow` (LIVE-6).
- `aidememo_artifact_gc_pending`: GC intents queued in the catalog, as the GC task
  (`origin.gc_task`) counted them (bounded) after its last pass; a gauge every worker sets from
  the same catalog, so the workers' values are combined by maximum, not summed.
  `aidememo_artifact_gc_failures_total`: failures of this process's GC passes (failed body
  deletes, a pass that raised), counted in-process (METRICS-4).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from time import perf_counter
from typing import TYPE_CHECKING, Any

from aidememo import metrics as core_metrics
from aidememo.http.pipeline import Admission
from aidememo.http.routes import resolve

if TYPE_CHECKING:
    from aidememo.http.types import Request, Response
    from origin.lanes import Dispatcher

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
UNMATCHED = "unmatched"
DURATION_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64)
NAMES = (
    "aidememo_http_requests_total",
    "aidememo_http_request_duration_seconds",
    "aidememo_commit_duration_seconds",
    "aidememo_group_commit_batch_size",
    "aidememo_live_subscribers",
    "aidememo_live_dropped_total",
    "aidememo_artifact_gc_pending",
    "aidememo_artifact_gc_failures_total",
)
"""Every metric family this module registers (SPEC.md METRICS-2)."""


def parse_bind(text: str) -> tuple[str, int]:
    """`HOST:PORT` (IPv6 in brackets) as (host, port); ValueError when it is not one."""
    host, sep, port = text.strip().rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"expected HOST:PORT, got {text!r}")
    return host, int(port)


class PrometheusSink:
    """The metric objects, fed by the core hook and by `MeteredApp`."""

    def __init__(self, registry: Any) -> None:
        from prometheus_client import Counter, Gauge, Histogram

        self.requests = Counter(
            "aidememo_http_requests",
            "HTTP requests answered, by route name, method and status",
            ("route", "method", "status"),
            registry=registry,
        )
        self.duration = Histogram(
            "aidememo_http_request_duration_seconds",
            "Time the core took to answer a request, by route name",
            ("route",),
            buckets=DURATION_BUCKETS,
            registry=registry,
        )
        self.commits = Histogram(
            "aidememo_commit_duration_seconds",
            "Time a write waited for its COMMIT",
            buckets=DURATION_BUCKETS,
            registry=registry,
        )
        self.batches = Histogram(
            "aidememo_group_commit_batch_size",
            "Callers' writes carried by one SQLite commit",
            buckets=BATCH_BUCKETS,
            registry=registry,
        )
        self.subscribers = Gauge(
            "aidememo_live_subscribers",
            "Open live-feed WebSockets",
            registry=registry,
            multiprocess_mode="livesum",
        )
        self.dropped = Counter(
            "aidememo_live_dropped",
            "Live subscribers closed with feed_overflow",
            registry=registry,
        )
        self.gc_pending = Gauge(
            "aidememo_artifact_gc_pending",
            "Artifact GC intents queued in the catalog at the last GC pass",
            registry=registry,
            multiprocess_mode="livemax",
        )
        self.semantic_lag_gauge = Gauge(
            "aidememo_semantic_index_lag",
            "Sequences the semantic index is behind the project heads (SEM-7)",
            registry=registry,
            multiprocess_mode="livemax",
        )
        self.gc_failures = Counter(
            "aidememo_artifact_gc_failures",
            "Artifact garbage-collection deletions that failed",
            registry=registry,
        )

    # -- aidememo.metrics.MetricsSink -------------------------------------------------------

    def commit(self, seconds: float) -> None:
        self.commits.observe(seconds)

    def group_commit(self, size: int) -> None:
        self.batches.observe(size)

    def live_subscribers(self, delta: int) -> None:
        self.subscribers.inc(delta)

    def live_dropped(self) -> None:
        self.dropped.inc()

    def artifact_gc(self, pending: int | None, failed: int) -> None:
        if pending is not None:
            self.gc_pending.set(pending)
        if failed:
            self.gc_failures.inc(failed)

    def semantic_lag(self, sequences: int) -> None:
        self.semantic_lag_gauge.set(sequences)

    # -- requests ---------------------------------------------------------------------------

    def request(self, route: str, method: str, status: int, seconds: float) -> None:
        self.requests.labels(route, method, str(status)).inc()
        self.duration.labels(route).observe(seconds)


class MeteredApp:
    """An HTTP app whose every answer is counted and timed by route name; it declares the
    store traits of the app it wraps (`origin.lanes.traits_of`), so it is scheduled alike."""

    def __init__(self, app: Dispatcher, sink: PrometheusSink) -> None:
        self.app = app
        self.sink = sink
        self.batches = getattr(app, "batches", False)
        self.connections = getattr(app, "connections", None)

    def dispatch(self, request: Request) -> Response:
        started = perf_counter()
        response = self.app.dispatch(request)
        self._count(request, response, perf_counter() - started)
        return response

    def admitted(self, request: Request) -> Admission | Response:
        """The wrapped app's `admitted`; a refusal is counted here."""
        started = perf_counter()
        admission: Admission | Response = self.app.admitted(request)  # type: ignore[attr-defined]
        if not isinstance(admission, Admission):
            self._count(request, admission, perf_counter() - started)
        return admission

    def run_admitted(self, admitted: Sequence[tuple[Request, Admission]]) -> list[Response]:
        """The wrapped app's `run_admitted`; each answer is timed as the whole batch."""
        started = perf_counter()
        responses: list[Response] = self.app.run_admitted(admitted)  # type: ignore[attr-defined]
        elapsed = perf_counter() - started
        for (request, _), response in zip(admitted, responses, strict=True):
            self._count(request, response, elapsed)
        return responses

    def _count(self, request: Request, response: Response, seconds: float) -> None:
        method = request.method if request.method in _METHODS else "other"
        match = request.match
        route = (match if match is not None else resolve(request.method, request.path)).route
        self.sink.request(route.name if route else UNMATCHED, method, response.status, seconds)


@dataclass
class Metrics:
    """A running metrics listener: `wrap` meters an app; `stop` closes everything `start`
    made (the listener, the hook, a multiprocess directory)."""

    sink: PrometheusSink
    stop: Callable[[], None]
    after_fork: Callable[[], None]
    """Run in a forked worker: closes the parent's listener socket there."""

    def wrap(self, app: Dispatcher) -> MeteredApp:
        return MeteredApp(app, self.sink)


def start(bind: str, *, multiprocess: bool) -> Metrics:
    """Register the metrics, install the core hook and serve them on `bind` (HOST:PORT).
    Raises ValueError for a bad `bind`, OSError when it cannot listen."""
    host, port = parse_bind(bind)
    directory = None
    if multiprocess:
        directory = tempfile.mkdtemp(prefix="aidememo-metrics-")
        os.environ[MULTIPROC_ENV] = directory
    import prometheus_client
    from prometheus_client import CollectorRegistry
    from prometheus_client import multiprocess as mp

    prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]  # no `_created`
    if multiprocess:
        sink = PrometheusSink(None)  # multiprocess samples go to files, not a registry
        served = CollectorRegistry()
        mp.MultiProcessCollector(served)  # type: ignore[no-untyped-call]
    else:
        served = CollectorRegistry()
        sink = PrometheusSink(served)
    try:
        server, thread = prometheus_client.start_http_server(port, addr=host, registry=served)
    except BaseException:
        if directory is not None:
            shutil.rmtree(directory, ignore_errors=True)
        raise
    previous = core_metrics.install(sink)

    def stop() -> None:
        core_metrics.install(previous)
        server.shutdown()
        server.server_close()
        thread.join(5)
        if directory is not None:
            shutil.rmtree(directory, ignore_errors=True)
            os.environ.pop(MULTIPROC_ENV, None)

    def after_fork() -> None:
        server.socket.close()

    return Metrics(sink, stop, after_fork)
