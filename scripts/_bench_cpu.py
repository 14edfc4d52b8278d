"""Where a benchmark's CPU went: the origin's processes, PostgreSQL and the load generator.

All from `/proc` and `getrusage`, so nothing is installed:

- `tree_cpu_s(pid)`: user plus system time of a process and every live descendant (an
  `aidememo serve --workers N` parent and its workers; a postmaster and its backends).
- `postmaster_pid(data_dir)`: the first line of the cluster's `postmaster.pid`.
- `CpuSplit`: a snapshot of the three before a run and the per-request split after it. The
  load generator is this script's children that ended in between (`RUSAGE_CHILDREN`: wrk,
  or the client processes), so only what the run itself started is counted.
"""

from __future__ import annotations

import os
import resource
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, user + system seconds) of a live process, None when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / _TICK


def tree_cpu_s(root: int) -> tuple[float, int]:
    """CPU seconds of `root` and its live descendants, and how many processes that is."""
    parents: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            found = _stat(int(entry))
            if found is not None:
                parents[int(entry)], cpu[int(entry)] = found
    members = {root} if root in cpu else set()
    grew = True
    while grew:
        grew = False
        for pid, parent in parents.items():
            if parent in members and pid not in members:
                members.add(pid)
                grew = True
    return sum(cpu[pid] for pid in members), len(members)


def postmaster_pid(data_dir: str) -> int | None:
    """The postmaster's pid of a running cluster, None without one."""
    try:
        return int(Path(data_dir, "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _children_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class CpuSplit:
    """CPU of the origin tree, the PostgreSQL cluster and the finished children over a run."""

    def __init__(self, origin_pid: int, postgres_pid: int | None = None) -> None:
        self.origin_pid = origin_pid
        self.postgres_pid = postgres_pid
        self._start = self._now()

    def _now(self) -> tuple[float, float, float, int]:
        origin, processes = tree_cpu_s(self.origin_pid)
        postgres = tree_cpu_s(self.postgres_pid)[0] if self.postgres_pid is not None else 0.0
        return origin, postgres, _children_s(), processes

    def totals(self) -> dict[str, float | int]:
        """CPU seconds of each part since construction (`postgres_cpu_s` 0 without a cluster)."""
        end = self._now()
        return {
            "origin_cpu_s": end[0] - self._start[0],
            "postgres_cpu_s": end[1] - self._start[1],
            "loadgen_cpu_s": end[2] - self._start[2],
            "origin_processes": end[3],
        }

    def per_request(self, requests: int) -> dict[str, float | int]:
        """Microseconds of CPU per request in each part since construction."""
        end = self._now()
        n = max(1, requests)
        split: dict[str, float | int] = {
            "origin_cpu_us_per_req": round((end[0] - self._start[0]) / n * 1e6, 1),
            "loadgen_cpu_us_per_req": round((end[2] - self._start[2]) / n * 1e6, 1),
            "origin_processes": end[3],
        }
        if self.postgres_pid is not None:
            split["postgres_cpu_us_per_req"] = round((end[1] - self._start[1]) / n * 1e6, 1)
        return split
