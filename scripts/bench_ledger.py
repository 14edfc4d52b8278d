#!/usr/bin/env python3
"""Benchmark of the SQLite command ledger.

What is measured, in one process, on a fresh SQLite file in a temporary directory opened with
`SqliteStore.open_file(path, synchronous="FULL")` (WAL, `busy_timeout` 5 s):

- Commits: `--commands` (default 20,000) `POST /v1/commands`-equivalent commands, each run
  through `Ledger.execute_raw` in its own transaction with a unique command id and a payload of
  about 200 canonical bytes. Even commands create a new `custom.note` resource, odd ones update
  the resource created just before them with its expected revision, so 20,000 commands leave
  10,000 resources. The commands are built (and parsed with `parse_raw_command`, as the HTTP
  handler does) before the clock starts; each `execute_raw` call is timed on its own.
  Reported: p50/p95/p99/max/mean commit latency and commands/s over the whole loop.
- Concurrent commits: `--concurrent-commands` (default 4,000) more commands of the same shape
  on another project, split over `--threads` (16) threads released together, as an HTTP server's
  worker threads submit them; the executor may commit several in one transaction (group
  commit). Reported: commands/s over the whole run and p50/p99 latency of each call.
- Snapshot: `LedgerReads.snapshot` of the project (10,000 resources at the default size, read as
  one page of the largest `limit`), and
  rendering it to JSON bytes exactly as `aidememo.http.member_handlers.snapshot` does; the median of
  `--snapshot-runs` runs of each, and of their sum, which is what the target is checked on.
- Materialized change feed: the whole log read in pages of 1,000 through `LedgerReads.changes`,
  each page rendered with `materialized_entries` and `batch_json` as the HTTP handler does;
  entries/s for the best of `--feed-runs` full passes (query only and query plus render).
- Baseline, in the same run: a raw `sqlite3` loop on another file in the same directory with
  the same pragmas (WAL, `synchronous=FULL`, `busy_timeout` 5000), each transaction
  `BEGIN IMMEDIATE; INSERT one 200-byte row; COMMIT`, 10,000 rows by default
  (`--baseline-rows`). Half of its rows run before the ledger and half after, so machine drift
  during the run hits both sides alike.
- Peak memory: the process's maximum resident set size (`getrusage`).

The Python overhead per command (`python_overhead_us_per_command`) comes from a probe of
`--probe-commands` (5,000) ledger commands and as many raw rows, both with `synchronous=OFF`:
the ledger's process CPU time per command minus the raw loop's per row (`time.process_time`).
That is what a command costs beyond the one commit it needs (its Python and its ten extra
statements), and unlike wall time it is not inflated by fsync stalls or by other processes on
the shared cores. The same CPU difference in the FULL runs (which also carries the kernel's
work of syncing the ledger's larger commits) and the difference of mean wall times are reported
as well.

The last line of output is the JSON result object (`_bench_common.emit`); progress goes to
stderr.
Run from the repository root: `.venv/bin/python scripts/bench_ledger.py [--commands 2000]`.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _bench_common import emit, latency_summary, note, peak_rss_mib, target

from aidememo.domain.canonical import canonical_bytes
from aidememo.domain.clock import RandomIds, SystemClock
from aidememo.domain.envelope import Command, parse_raw_command
from aidememo.domain.limits import SNAPSHOT_LIMIT_MAX
from aidememo.http.render import batch_json, materialized_entries, snapshot_json
from aidememo.service.access import Caller
from aidememo.service.identity import IdentityService, token_digest
from aidememo.service.ledger import Ledger
from aidememo.service.ledger_reads import LedgerReads
from aidememo.stores.sqlite import SqliteStore

TENANT = "bench-tenant"
PROJECT = "bench-project"
WARMUP_PROJECT = "bench-warmup"
CONCURRENT_PROJECT = "bench-concurrent"
ACTOR = "bench-agent"
KIND = "custom.note"
PAYLOAD_BYTES = 200
FEED_PAGE = 1_000
BUSY_TIMEOUT_MS = 5_000


def payload_for(i: int) -> dict[str, Any]:
    """A JSON object whose canonical encoding is exactly `PAYLOAD_BYTES` bytes."""
    base: dict[str, Any] = {"n": i, "tags": ["bench", "ledger"], "title": f"note {i}", "text": ""}
    pad = PAYLOAD_BYTES - len(canonical_bytes(base))
    base["text"] = "x" * max(0, pad)
    return base


def build_commands(project_id: str, count: int, prefix: str) -> list[Command]:
    """`count` commands: even ones create a resource, odd ones update the previous one."""
    commands: list[Command] = []
    for i in range(count):
        new = i % 2 == 0
        rid = f"{prefix}-{i if new else i - 1}"
        body = {
            "command_id": f"{prefix}-cmd-{i}",
            "project_id": project_id,
            "expected_revision": None if new else 1,
            "operation": "resource.put",
            "resource": {"kind": KIND, "id": rid},
            "change": "upsert",
            "payload": payload_for(i),
        }
        commands.append(parse_raw_command(body))
    return commands


def run_ledger(
    ledger: Ledger, caller: Caller, commands: list[Command]
) -> tuple[list[int], float, float]:
    """Execute every command, one transaction each; per-command ns, wall and CPU seconds."""
    samples: list[int] = []
    clock = time.perf_counter_ns
    execute = ledger.execute_raw
    cpu = time.process_time()
    start = clock()
    for command in commands:
        t0 = clock()
        execute(caller, command)
        samples.append(clock() - t0)
    return samples, (clock() - start) / 1e9, time.process_time() - cpu


def run_concurrent(
    ledger: Ledger, caller: Caller, commands: list[Command], threads: int
) -> tuple[list[int], float]:
    """`commands` split over `threads` threads started together; per-call ns and wall seconds."""
    shares: list[list[Command]] = [[] for _ in range(threads)]
    for i in range(0, len(commands), 2):  # a create and the update after it stay in order
        shares[(i // 2) % threads].extend(commands[i : i + 2])
    samples: list[list[int]] = [[] for _ in range(threads)]
    barrier = threading.Barrier(threads + 1)
    failures: list[BaseException] = []

    def work(index: int) -> None:
        clock = time.perf_counter_ns
        out = samples[index]
        execute = ledger.execute_raw
        barrier.wait()
        try:
            for command in shares[index]:
                t0 = clock()
                execute(caller, command)
                out.append(clock() - t0)
        except BaseException as exc:
            failures.append(exc)

    workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    barrier.wait()
    start = time.perf_counter_ns()
    for worker in workers:
        worker.join()
    elapsed = (time.perf_counter_ns() - start) / 1e9
    if failures:
        raise failures[0]
    return [ns for share in samples for ns in share], elapsed


def run_baseline(
    path: str, start: int, rows: int, synchronous: str = "FULL"
) -> tuple[list[int], float, float]:
    """The raw `sqlite3` loop: one 200-byte row per `BEGIN IMMEDIATE` ... `COMMIT`."""
    conn = sqlite3.connect(path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(f"PRAGMA synchronous = {synchronous}")
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, body BLOB NOT NULL)")
        blob = b"x" * PAYLOAD_BYTES
        samples: list[int] = []
        clock = time.perf_counter_ns
        execute = conn.execute
        cpu = time.process_time()
        began = clock()
        for i in range(start, start + rows):
            t0 = clock()
            execute("BEGIN IMMEDIATE")
            execute("INSERT INTO t (id, body) VALUES (?, ?)", (i, blob))
            execute("COMMIT")
            samples.append(clock() - t0)
        return samples, (clock() - began) / 1e9, time.process_time() - cpu
    finally:
        conn.close()


def render_snapshot(queries: LedgerReads, caller: Caller) -> tuple[int, int, int]:
    """One snapshot: (query ns, render ns, resource count), rendered like the HTTP handler."""
    t0 = time.perf_counter_ns()
    snap = queries.snapshot(caller, PROJECT, SNAPSHOT_LIMIT_MAX)
    t1 = time.perf_counter_ns()
    body = snapshot_json(
        snap.scope, snap.project_epoch, snap.at_seq, snap.resources, snap.next_page_token
    )
    t2 = time.perf_counter_ns()
    if not body.endswith(b',"next_page_token":null}'):
        raise RuntimeError("snapshot rendering failed")
    return t1 - t0, t2 - t1, len(snap.resources)


def read_feed(queries: LedgerReads, caller: Caller, epoch: str, render: bool) -> tuple[int, float]:
    """Read the whole log in pages of 1,000; (entries, seconds)."""
    after = 0
    entries = 0
    start = time.perf_counter_ns()
    while True:
        page = queries.changes(caller, PROJECT, epoch, after, FEED_PAGE)
        if render:
            scope = page.scope
            rendered = materialized_entries(scope, page.records)
            batch_json(
                scope,
                page.project_epoch,
                page.after_seq,
                rendered,
                page.next_after_seq,
                page.has_more,
            )
        entries += len(page.records)
        after = page.next_after_seq
        if not page.has_more:
            break
    return entries, (time.perf_counter_ns() - start) / 1e9


def overhead_probe(directory: str, count: int) -> tuple[float, float]:
    """CPU µs per command of the ledger and per row of the raw loop, both `synchronous=OFF`.

    Without fsync, the difference is what the ledger's Python and its extra statements cost;
    with FULL it would also carry the kernel's work of syncing the ledger's larger commits.
    """
    store = SqliteStore.open_file(os.path.join(directory, "probe.sqlite"), synchronous="OFF")
    try:
        identity = IdentityService(store, SystemClock(), RandomIds())
        digest = token_digest("probe-token")
        identity.bootstrap(
            tenant_id=TENANT, project_id=PROJECT, actor_id=ACTOR, token_sha256=digest
        )
        caller = identity.authenticate(digest)
        commands = build_commands(PROJECT, count, "p")
        _, _, ledger_cpu = run_ledger(Ledger(store, SystemClock()), caller, commands)
    finally:
        store.close()
    raw_path = os.path.join(directory, "probe-raw.sqlite")
    _, _, raw_cpu = run_baseline(raw_path, 0, count, synchronous="OFF")
    return ledger_cpu / count * 1e6, raw_cpu / count * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commands", type=int, default=20_000, help="ledger commands to commit")
    parser.add_argument(
        "--baseline-rows",
        type=int,
        default=0,
        help="raw sqlite3 rows (default: min(commands, 10000))",
    )
    parser.add_argument("--warmup", type=int, default=200, help="untimed commands first")
    parser.add_argument(
        "--probe-commands", type=int, default=5_000, help="synchronous=OFF overhead probe size"
    )
    parser.add_argument(
        "--concurrent-commands", type=int, default=4_000, help="commands for the threaded run"
    )
    parser.add_argument("--threads", type=int, default=16, help="threads of the threaded run")
    parser.add_argument("--snapshot-runs", type=int, default=5)
    parser.add_argument("--feed-runs", type=int, default=3)
    parser.add_argument("--dir", default=None, help="directory for the database files")
    args = parser.parse_args()
    n = args.commands
    baseline_rows = args.baseline_rows or min(n, 10_000)

    with tempfile.TemporaryDirectory(prefix="bench_ledger_", dir=args.dir) as tmp:
        ledger_path = os.path.join(tmp, "ledger.sqlite")
        raw_path = os.path.join(tmp, "raw.sqlite")

        store = SqliteStore.open_file(ledger_path, synchronous="FULL")
        try:
            clock, ids = SystemClock(), RandomIds()
            identity = IdentityService(store, clock, ids)
            digest = token_digest("bench-token")
            boot = identity.bootstrap(
                tenant_id=TENANT, project_id=PROJECT, actor_id=ACTOR, token_sha256=digest
            )
            identity.bootstrap(tenant_id=TENANT, project_id=WARMUP_PROJECT, actor_id=ACTOR)
            identity.bootstrap(tenant_id=TENANT, project_id=CONCURRENT_PROJECT, actor_id=ACTOR)
            caller = identity.authenticate(digest)
            epoch = boot.project.project_epoch
            ledger = Ledger(store, clock)
            queries = LedgerReads(store)

            note(f"building {n} commands")
            commands = build_commands(PROJECT, n, "r")
            warm = build_commands(WARMUP_PROJECT, args.warmup, "w")
            threaded = build_commands(CONCURRENT_PROJECT, args.concurrent_commands, "c")

            half = baseline_rows // 2
            note(f"baseline: {half} raw sqlite3 commits (first half)")
            base_a, base_a_s, base_a_cpu = run_baseline(raw_path, 0, half)

            run_ledger(ledger, caller, warm)
            note(f"ledger: {n} commands through Ledger.execute_raw")
            samples, ledger_s, ledger_cpu = run_ledger(ledger, caller, commands)

            note(f"baseline: {baseline_rows - half} raw sqlite3 commits (second half)")
            base_b, base_b_s, base_b_cpu = run_baseline(raw_path, half, baseline_rows - half)
            base_samples, base_s = base_a + base_b, base_a_s + base_b_s

            note(f"concurrent: {len(threaded)} commands over {args.threads} threads")
            conc_samples, conc_s = run_concurrent(ledger, caller, threaded, args.threads)
            base_cpu = base_a_cpu + base_b_cpu

            note("snapshot")
            snaps = [render_snapshot(queries, caller) for _ in range(args.snapshot_runs)]
            snap_query = statistics.median(s[0] for s in snaps) / 1e6
            snap_render = statistics.median(s[1] for s in snaps) / 1e6
            snap_total = statistics.median(s[0] + s[1] for s in snaps) / 1e6
            snap_count = snaps[0][2]

            note("materialized change feed")
            feed_q = [read_feed(queries, caller, epoch, False) for _ in range(args.feed_runs)]
            feed_r = [read_feed(queries, caller, epoch, True) for _ in range(args.feed_runs)]
            feed_entries = feed_r[0][0]
            feed_query_rate = max(e / s for e, s in feed_q)
            feed_rate = max(e / s for e, s in feed_r)
            db_bytes = sum(
                os.path.getsize(ledger_path + suffix)
                for suffix in ("", "-wal")
                if os.path.exists(ledger_path + suffix)
            )
        finally:
            store.close()
        note(f"overhead probe: {args.probe_commands} commands and rows, synchronous=OFF")
        probe_ledger_us, probe_raw_us = overhead_probe(tmp, args.probe_commands)

    ledger_rate = n / ledger_s
    base_rate = baseline_rows / base_s
    lat = latency_summary(samples, "commit")
    base_lat = latency_summary(base_samples, "commit")
    cpu_us = ledger_cpu / n * 1e6
    base_cpu_us = base_cpu / baseline_rows * 1e6
    wall_overhead_us = (lat["commit_mean_ms"] - base_lat["commit_mean_ms"]) * 1000

    figures: dict[str, Any] = {
        "commands": n,
        "payload_bytes": PAYLOAD_BYTES,
        "commands_per_s": round(ledger_rate, 1),
        **lat,
        "cpu_us_per_command": round(cpu_us, 1),
        "cpu_overhead_full_us_per_command": round(cpu_us - base_cpu_us, 1),
        "wall_mean_overhead_us_per_command": round(wall_overhead_us, 1),
        "probe_sync_off_cpu_us_per_command": round(probe_ledger_us, 1),
        "python_overhead_us_per_command": round(probe_ledger_us - probe_raw_us, 1),
        "concurrent_threads": args.threads,
        "concurrent_commands": len(threaded),
        "concurrent_commands_per_s": round(len(threaded) / conc_s, 1) if threaded else 0.0,
        **(latency_summary(conc_samples, "concurrent_commit") if conc_samples else {}),
        "snapshot_resources": snap_count,
        "snapshot_query_ms": round(snap_query, 2),
        "snapshot_render_ms": round(snap_render, 2),
        "snapshot_total_ms": round(snap_total, 2),
        "feed_entries": feed_entries,
        "feed_page": FEED_PAGE,
        "feed_query_entries_per_s": round(feed_query_rate),
        "feed_entries_per_s": round(feed_rate),
        "database_mib": round(db_bytes / 2**20, 1),
        "peak_rss_mib": peak_rss_mib(),
        "synchronous": "FULL",
        "sqlite_version": sqlite3.sqlite_version,
        "python": sys.version.split()[0],
    }
    baseline: dict[str, Any] = {
        "what": "raw sqlite3: BEGIN IMMEDIATE; INSERT one 200-byte row; COMMIT (WAL, FULL)",
        "rows": baseline_rows,
        "rows_per_s": round(base_rate, 1),
        "cpu_us_per_row": round(base_cpu_us, 1),
        "probe_sync_off_cpu_us_per_row": round(probe_raw_us, 1),
        **base_lat,
    }
    targets = {
        "commit_ratio": target(ledger_rate / base_rate, ">= 0.5"),
        "commit_p99_ms": target(lat["commit_p99_ms"], "<= 2"),
        "feed_entries_per_s": target(feed_rate, ">= 100,000"),
        "snapshot_10k_ms": target(snap_total, "<= 150"),
    }
    emit("bench_ledger", figures, baseline, targets)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
