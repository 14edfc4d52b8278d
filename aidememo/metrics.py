"""The core's metrics hook: what the stores report, to whichever sink a front installed.

Stdlib only and off by default: with no sink installed every call is one attribute test. The
origin installs `origin.metrics.PrometheusSink` under `aidememo serve --metrics-bind`
(SPEC.md METRICS-1); the edge installs none. A sink never raises into the caller: a store's
commit must not fail because a metric could not be recorded, so every call swallows the sink's
exceptions.

What is reported:
- `commit(seconds)`: one write transaction's `COMMIT` returned (its durable wait: the fsync on
  SQLite, the round trip on PostgreSQL), or a PostgreSQL one-statement write (its round trip).
- `group_commit(size)`: one SQLite write transaction committed carrying `size` callers' writes
  (1 when it ran alone).
- `live_subscribers(delta)`: live-feed subscribers joined (+1) or left (-1);
  `live_dropped()`: one was closed with `feed_overflow` (LIVE-6).
- `artifact_gc(pending, failed)`: one artifact GC pass of the origin's GC task ended with
  `pending` GC intents left in the catalog (a bounded count; None when counting failed) and
  `failed` failures (body deletes that failed, or 1 for a pass that raised) (METRICS-4).
- `semantic_lag(sequences)`: after a semantic indexer step, how many sequences its projects'
  indexes are behind their heads in total (SEM-7).
"""

from __future__ import annotations

import contextlib
from typing import Protocol


class MetricsSink(Protocol):
    """What a front implements to receive the core's measurements."""

    def commit(self, seconds: float) -> None:
        """A write committed after `seconds` of waiting for its COMMIT."""
        ...

    def group_commit(self, size: int) -> None:
        """A SQLite group commit carried `size` callers' writes."""
        ...

    def live_subscribers(self, delta: int) -> None:
        """Live subscribers joined (delta > 0) or left (delta < 0)."""
        ...

    def live_dropped(self) -> None:
        """A live subscriber was closed with `feed_overflow`."""
        ...

    def artifact_gc(self, pending: int | None, failed: int) -> None:
        """A GC pass ended with `pending` intents queued (None: not counted) and `failed`
        failures."""
        ...

    def semantic_lag(self, sequences: int) -> None:
        """The semantic index is `sequences` behind the heads of its projects."""
        ...


_sink: MetricsSink | None = None


def install(sink: MetricsSink | None) -> MetricsSink | None:
    """Make `sink` receive every measurement from now on (None: none); returns the previous
    one, so a test can restore it."""
    global _sink
    previous, _sink = _sink, sink
    return previous


def installed() -> MetricsSink | None:
    """The sink measurements go to, None when metrics are off."""
    return _sink


def commit(seconds: float) -> None:
    """Report one commit's duration (see the module docstring)."""
    sink = _sink
    if sink is not None:
        with contextlib.suppress(Exception):
            sink.commit(seconds)


def group_commit(size: int) -> None:
    """Report the size of one SQLite group commit."""
    sink = _sink
    if sink is not None:
        with contextlib.suppress(Exception):
            sink.group_commit(size)


def live_subscribers(delta: int) -> None:
    """Report live subscribers joining (+1) or leaving (-1)."""
    sink = _sink
    if sink is not None:
        with contextlib.suppress(Exception):
            sink.live_subscribers(delta)


def live_dropped() -> None:
    """Report a live subscriber closed with `feed_overflow`."""
    sink = _sink
    if sink is not None:
        with contextlib.suppress(Exception):
            sink.live_dropped()


def artifact_gc(pending: int | None, failed: int) -> None:
    """Report the end of one artifact GC pass (see the module docstring)."""
    sink = _sink
    if sink is not None:
        with contextlib.suppress(Exception):
            sink.artifact_gc(pending, failed)


def semantic_lag(sequences: int) -> None:
    """Report the semantic indexer's lag (see the module docstring)."""
    sink = _sink
    if sink is not None:
        with contextlib.suppress(Exception):
            sink.semantic_lag(sequences)
