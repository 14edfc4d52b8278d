"""Helpers shared by the `scripts/bench_*.py` benchmarks.

Percentiles, targets in the `{"value", "goal", "met"}` shape, peak memory, a free loopback
port and the final JSON line. Stdlib only, so a benchmark runs from the repository's virtual
environment without installing anything else.
"""

from __future__ import annotations

import json
import math
import resource
import socket
import sys
from collections.abc import Sequence
from typing import Any


def percentile(sorted_values: Sequence[float], pct: float) -> float:
    """The `pct` percentile (0-100) of already sorted values, nearest-rank method."""
    if not sorted_values:
        return math.nan
    rank = max(1, math.ceil(pct / 100 * len(sorted_values)))
    return float(sorted_values[min(rank, len(sorted_values)) - 1])


def latency_summary(samples_ns: Sequence[int], prefix: str) -> dict[str, float]:
    """`{prefix}_p50_ms`, `_p95_ms`, `_p99_ms`, `_max_ms` and `_mean_ms` of durations in ns."""
    ordered = sorted(samples_ns)
    scale = 1e-6
    out = {
        f"{prefix}_p50_ms": percentile(ordered, 50) * scale,
        f"{prefix}_p95_ms": percentile(ordered, 95) * scale,
        f"{prefix}_p99_ms": percentile(ordered, 99) * scale,
        f"{prefix}_max_ms": (ordered[-1] if ordered else math.nan) * scale,
        f"{prefix}_mean_ms": (sum(ordered) / len(ordered) if ordered else math.nan) * scale,
    }
    return {key: round(value, 4) for key, value in out.items()}


def target(value: float, goal: str) -> dict[str, Any]:
    """One target: `goal` is `">= X"` or `"<= X"` exactly as the issue writes it."""
    op, _, threshold_text = goal.partition(" ")
    threshold = float(threshold_text.replace(",", ""))
    if op == ">=":
        met = value >= threshold
    elif op == "<=":
        met = value <= threshold
    else:
        raise ValueError(f"goal must start with >= or <=: {goal!r}")
    if math.isnan(value):
        met = False
    return {"value": round(value, 4), "goal": goal, "met": met}


def peak_rss_mib() -> float:
    """Peak resident set size of this process so far, in MiB (Linux reports KiB)."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the kernel picks it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def emit(
    name: str, figures: dict[str, Any], baseline: dict[str, Any], targets: dict[str, Any]
) -> None:
    """Print the one-line result object `{"name", "figures", "baseline", "targets"}`; it
    must be the last line of stdout."""
    line = {"name": name, "figures": figures, "baseline": baseline, "targets": targets}
    sys.stdout.flush()
    sys.stderr.flush()
    print(json.dumps(line, separators=(", ", ": ")), flush=True)


def note(message: str) -> None:
    """Progress text on stderr, so stdout ends with the JSON line alone."""
    print(message, file=sys.stderr, flush=True)
