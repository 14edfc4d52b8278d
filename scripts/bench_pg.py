#!/usr/bin/env python3
"""Benchmark of the PostgreSQL canonical store.

The script starts its own throwaway PostgreSQL 15 cluster (a fresh temporary directory owned
by `postgres`, `initdb`/`pg_ctl` through `runuser -u postgres --` when run as root, a free
port) with `fsync=on`, `synchronous_commit=on` and `full_page_writes=on`: the test cluster's
speed settings would make every figure meaningless. The cluster is stopped and its directory
removed in a `finally`, also when the run fails or is interrupted (SIGINT, SIGTERM, SIGHUP).

Every client connects over TCP to 127.0.0.1 with the origin's connection factory
(`aidememo.cli.stores.psycopg_connector`: psycopg 3, `prepare_threshold=None`) and has its own
`PostgresStore` (pool of one connection) in its own process (multiprocessing, `fork`, after every
connection of this process is closed). Each
command is a `Ledger.execute_raw` of a `resource.put` creating a new `custom.note` with a
unique command id and resource id and a payload of exactly 200 canonical bytes, built before
its timer starts. Clients warm up (`--warmup` commands each) and meet at a barrier; the database
is then `ANALYZE`d, as autovacuum does in service, and they start together at a second
barrier, then run until `--seconds` have passed or they have committed `--commands`, whichever
comes first. Until its tables have statistics PostgreSQL plans the replay check of
`aidememo_execute_raw` (the receipt by command id) through the `(tenant_id, project_id,
project_seq)` index with the command id as a filter, so a fresh database's cost per command
grows with every command (one client, 6,000 commands in blocks of 1,500: 721, 904, 1,109 and
1,297 us a command; flat at 587-615 us once analyzed); analyzed after only a few dozen rows,
it plans small-table scans that grow the same way, hence a warm-up of 300 (the origin phases
do the same, `scripts/_bench_pg_origin.py`). Phases:

- `one_client`: one client on its own project;
- `sixteen_clients_one_project`: 16 clients on one project (its writers are serialized);
- `sixteen_clients_sixteen_projects`: 16 clients, one project each (they never wait for
  each other; only the WAL flush is shared, where group commit applies).

Reported per phase: commit latency p50/p95/p99/max/mean (each `execute_raw` timed on its
own), commands/s over the phase's window (first client start to last client end), client CPU
per command and failed commands (a failure is counted, never retried).

Baseline, in the same run: a raw psycopg loop on one connection from the same factory,
`INSERT` of one 200-byte row into a plain table, then `commit()` (psycopg sends the `BEGIN`
itself), half before the phases and half after them, so drift hits both sides alike.

Each command is the store's guarded write (`Store.execute_raw`: one autocommit
`aidememo_execute_raw` statement per command), whose verdict names the answer.

Where the time goes (`profile_*` figures): a short single-client probe on a connection that
times every statement the store sends (`aidememo_execute_raw`) and turns on, for that
session only, `track_functions` and `track_wal_io_timing`, so the server's time inside each
function and in WAL fsync is known too; the rest of a command's wall time is Python in the
client. The same probe on the raw loop gives the baseline's split.

What the clients' server backends are doing is sampled every 0.1 s during each phase
(`{phase}_server_states`, shares of samples from `pg_stat_activity`): `active:cpu` (running),
`Lock:tuple`/`Lock:transactionid` (queued behind the project row), `IO:WALSync` or
`LWLock:WALWrite` (the commit's flush), `idle in transaction` (waiting for the client's next
statement inside a command: client Python, driver and network) and `idle` (between commands).

Peak memory: the largest client's and this process's maximum resident set size.
The last line of output is the JSON result object (`_bench_common.emit`); progress goes to
stderr.
Run from the repository root: `.venv/bin/python scripts/bench_pg.py [--seconds 5]`.
The cluster's lifecycle and the server-side observation (sampler, statistics, settings) are in
`scripts/_bench_pg_server.py`; this file holds the commands, the clients, the phases, the
baseline and the profile.
"""

from __future__ import annotations

import argparse
import array
import multiprocessing
import os
import queue
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench_common import emit, latency_summary, note, peak_rss_mib, target
from _bench_pg_probe import probe_connector
from _bench_pg_server import (
    SAMPLE_INTERVAL_S,
    Cluster,
    _client_url,
    _raise_on_signal,
    _reset_stats,
    _Sampler,
    _server_facts,
    _server_stats,
    _shares,
)

from aidememo.cli.stores import psycopg_connector
from aidememo.domain.canonical import canonical_bytes
from aidememo.domain.clock import RandomIds, SystemClock
from aidememo.domain.envelope import Command
from aidememo.domain.model import ChangeOp, ResourceRef
from aidememo.service.access import Caller
from aidememo.service.identity import IdentityService
from aidememo.service.ledger import Ledger
from aidememo.stores.postgres import PostgresStore

TENANT = "bench-tenant"
ACTOR = "bench-agent"
KIND = "custom.note"
PAYLOAD_BYTES = 200
CLIENTS = 16

# -- commands -------------------------------------------------------------------------------

_PAD: dict[int, str] = {}


def payload_for(i: int) -> dict[str, Any]:
    """A JSON object whose canonical encoding is exactly `PAYLOAD_BYTES` bytes (the padding is
    computed once per number of digits, so building a command costs a few microseconds)."""
    digits = len(str(i))
    pad = _PAD.get(digits)
    if pad is None:
        base = {"n": i, "tags": ["bench", "pg"], "title": f"note {i}", "text": ""}
        pad = _PAD[digits] = "x" * max(0, PAYLOAD_BYTES - len(canonical_bytes(base)))
    return {"n": i, "tags": ["bench", "pg"], "title": f"note {i}", "text": pad}


def make_command(project_id: str, prefix: str, i: int) -> Command:
    """A `resource.put` creating `custom.note/{prefix}-{i}` (what `parse_raw_command` returns
    for that body, without its validation cost)."""
    return Command(
        command_id=f"{prefix}-cmd-{i}",
        project_id=project_id,
        expected_revision=None,
        operation="resource.put",
        resource=ResourceRef(KIND, f"{prefix}-{i}"),
        change=ChangeOp.UPSERT,
        payload=payload_for(i),
    )


# -- clients --------------------------------------------------------------------------------


@dataclass
class ClientResult:
    committed: int
    failed: int
    samples: array.array  # type: ignore[type-arg]
    start_ns: int
    end_ns: int
    cpu_s: float
    peak_rss_mib: float


def client_main(
    url: str,
    project_id: str,
    prefix: str,
    seconds: float,
    max_commands: int,
    warmup: int,
    barrier: Any,
    results: Any,
) -> None:
    """One client process: its own store and connection, warm-up, barrier, timed loop."""
    try:
        store = PostgresStore(psycopg_connector(url), pool_size=1)
        caller = Caller(TENANT, ACTOR)
        execute = Ledger(store, SystemClock()).execute_raw
        for i in range(warmup):
            execute(caller, make_command(project_id, prefix + "-w", i))
    except BaseException as exc:
        barrier.abort()
        results.put(("error", f"{type(exc).__name__}: {exc}"))
        raise
    samples = array.array("q")
    failed = 0
    clock = time.monotonic_ns  # system-wide on Linux: comparable across the processes
    barrier.wait()  # warmed up: the parent analyzes the database
    barrier.wait()  # go
    cpu = time.process_time()
    start = clock()
    deadline = start + int(seconds * 1e9)
    i = 0
    try:
        while i < max_commands:
            command = make_command(project_id, prefix, i)
            i += 1
            t0 = clock()
            try:
                execute(caller, command)
            except Exception:  # storage_failure (a lock or statement timeout): counted
                failed += 1
                continue
            t1 = clock()
            samples.append(t1 - t0)
            if t1 >= deadline:
                break
        end = clock()
        cpu_s = time.process_time() - cpu
    finally:
        store.close()
    result = ClientResult(len(samples), failed, samples, start, end, cpu_s, peak_rss_mib())
    results.put(("ok", result))


def run_phase(
    ctx: Any,
    name: str,
    url: str,
    projects: list[str],
    seconds: float,
    max_commands: int,
    warmup: int,
) -> dict[str, Any]:
    """Run one client process per entry of `projects`; the phase's figures."""
    n = len(projects)
    barrier = ctx.Barrier(n + 1, timeout=120)
    results = ctx.Queue()
    procs = [
        ctx.Process(
            target=client_main,
            args=(
                _client_url(url),
                project,
                f"{name}-{k}",
                seconds,
                max_commands,
                warmup,
                barrier,
                results,
            ),
            daemon=True,
        )
        for k, project in enumerate(projects)
    ]
    note(f"{name}: {n} client process(es), {seconds:g} s or {max_commands} commands each")
    for p in procs:
        p.start()
    states: dict[str, int] = {}
    try:
        barrier.wait()  # every client warmed up
        _analyze(url)
        barrier.wait()  # go
        got: list[ClientResult] = []
        give_up = time.monotonic() + seconds + 120
        with _Sampler(url) as sampler:
            while len(got) < n:
                if time.monotonic() > give_up:
                    raise RuntimeError(f"{name}: the clients did not finish in time")
                try:
                    kind, value = results.get(timeout=SAMPLE_INTERVAL_S)
                except queue.Empty:
                    sampler.sample(states)
                    continue
                if kind == "error":
                    raise RuntimeError(f"{name}: a client failed: {value}")
                got.append(value)
        for p in procs:
            p.join(timeout=30)
    finally:
        for p in procs:
            if p.is_alive():
                p.terminate()
                p.join(timeout=5)
    samples = [s for r in got for s in r.samples]
    committed = sum(r.committed for r in got)
    window_s = (max(r.end_ns for r in got) - min(r.start_ns for r in got)) / 1e9
    cpu_s = sum(r.cpu_s for r in got)
    return {
        f"{name}_clients": n,
        f"{name}_projects": len(set(projects)),
        f"{name}_commands": committed,
        f"{name}_failed": sum(r.failed for r in got),
        f"{name}_window_s": round(window_s, 2),
        f"{name}_commands_per_s": round(committed / window_s, 1),
        **latency_summary(samples, f"{name}_commit"),
        f"{name}_client_cpu_us_per_command": round(cpu_s / max(committed, 1) * 1e6, 1),
        f"{name}_client_peak_rss_mib": max(r.peak_rss_mib for r in got),
        f"{name}_server_states": _shares(states),
    }


def _analyze(url: str) -> None:
    """`ANALYZE` the database, as autovacuum does in service (see the module docstring)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ANALYZE")


# -- baseline -------------------------------------------------------------------------------

RAW_TABLE = "CREATE TABLE IF NOT EXISTS bench_raw (id BIGINT PRIMARY KEY, body BYTEA NOT NULL)"
RAW_INSERT = "INSERT INTO bench_raw (id, body) VALUES (%s, %s)"


def run_baseline(
    connect: Callable[[], Any], start: int, seconds: float, max_rows: int
) -> tuple[list[int], float, float]:
    """The raw loop: INSERT one 200-byte row, commit; per-row ns, wall and CPU seconds."""
    conn = connect()
    try:
        with conn.cursor() as cur:
            cur.execute(RAW_TABLE)
            conn.commit()
            blob = b"x" * PAYLOAD_BYTES
            samples: list[int] = []
            clock = time.monotonic_ns
            cpu = time.process_time()
            began = clock()
            deadline = began + int(seconds * 1e9)
            for i in range(start, start + max_rows):
                t0 = clock()
                cur.execute(RAW_INSERT, (i, blob))
                conn.commit()
                t1 = clock()
                samples.append(t1 - t0)
                if t1 >= deadline:
                    break
            return samples, (clock() - began) / 1e9, time.process_time() - cpu
    finally:
        conn.close()


# -- profile: where a command's time goes ---------------------------------------------------


def profile(url: str, commands: int) -> dict[str, Any]:
    """Split one client's command (and one raw row) into statements, server and fsync time."""
    out: dict[str, Any] = {"profile_commands": commands}

    sink: dict[str, int] = {}
    # The probe's wrapper hides psycopg's connection class: say it is unframed.
    store = PostgresStore(probe_connector(url, sink), pool_size=1, framed=False)
    try:
        execute = Ledger(store, SystemClock()).execute_raw
        caller = Caller(TENANT, ACTOR)
        for i in range(50):
            execute(caller, make_command("bench-probe", "probe-w", i))
        _reset_stats(url)
        sink.clear()
        cpu = time.process_time()
        t0 = time.perf_counter_ns()
        for i in range(commands):
            execute(caller, make_command("bench-probe", "probe", i))
        wall_ns = time.perf_counter_ns() - t0
        cpu_s = time.process_time() - cpu
    finally:
        store.close()
    funcs, (syncs, sync_ms) = _server_stats(url)
    per = 1 / (commands * 1e3)  # ns in total -> us per command
    statements_ns = sum(sink.values())
    out["profile_wall_us_per_command"] = round(wall_ns * per, 1)
    for kind in ("execute_raw", "begin", "begin_command", "commit_mutation", "commit", "other"):
        out[f"profile_{kind}_us"] = round(sink.get(kind, 0) * per, 1)
    out["profile_python_outside_statements_us"] = round((wall_ns - statements_ns) * per, 1)
    out["profile_client_cpu_us_per_command"] = round(cpu_s / commands * 1e6, 1)
    for name in (
        "aidememo_execute_raw",
        "aidememo_begin_command",
        "aidememo_commit_mutation",
        "aidememo_index_fact",
    ):
        if name in funcs:
            calls, total_ms, _self_ms = funcs[name]
            out[f"profile_server_{name}_us"] = round(total_ms / max(calls, 1) * 1e3, 1)
    out["profile_wal_syncs_per_command"] = round(syncs / commands, 2)
    out["profile_wal_sync_us_per_command"] = round(sync_ms / commands * 1e3, 1)

    # The raw loop through the same instrumentation.
    sink.clear()
    _reset_stats(url)
    conn = probe_connector(url, sink)()
    try:
        with conn.cursor() as cur:
            blob = b"x" * PAYLOAD_BYTES
            t0 = time.perf_counter_ns()
            for i in range(commands):
                cur.execute(RAW_INSERT, (10**9 + i, blob))
                conn.commit()
            raw_wall = time.perf_counter_ns() - t0
    finally:
        conn.close()
    _funcs, (_raw_syncs, raw_sync_ms) = _server_stats(url)
    out["profile_raw_wall_us_per_row"] = round(raw_wall * per, 1)
    out["profile_raw_insert_us"] = round(sink.get("insert", 0) * per, 1)
    out["profile_raw_commit_us"] = round(sink.get("commit", 0) * per, 1)
    out["profile_raw_wal_sync_us_per_row"] = round(raw_sync_ms / commands * 1e3, 1)
    return out


# -- main -----------------------------------------------------------------------------------


def setup(url: str) -> None:
    """Migrate, then bootstrap every project the run writes to, with the one actor."""
    store = PostgresStore.open(psycopg_connector(url), migrate=True, pool_size=1)
    try:
        identity = IdentityService(store, SystemClock(), RandomIds())
        for project in ["bench-solo", "bench-shared", "bench-probe", *_many_projects()]:
            identity.bootstrap(tenant_id=TENANT, project_id=project, actor_id=ACTOR)
    finally:
        store.close()


def _many_projects() -> list[str]:
    return [f"bench-p{k:02d}" for k in range(CLIENTS)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--seconds", type=float, default=20.0, help="length of each phase (default 20)"
    )
    parser.add_argument(
        "--commands", type=int, default=10**9, help="at most this many commands per client"
    )
    parser.add_argument(
        "--warmup", type=int, default=300, help="untimed commands per client, before ANALYZE"
    )
    parser.add_argument(
        "--profile-commands", type=int, default=1_000, help="size of the where-time-goes probe"
    )
    parser.add_argument("--dir", default=None, help="parent directory of the cluster")
    parser.add_argument(
        "--workers",
        type=int,
        default=0,
        help="also serve the cluster over HTTP with aidememo serve --workers 1 and N "
        "(scripts/_bench_pg_origin.py) and report the CPU split",
    )
    parser.add_argument(
        "--origin-seconds", type=int, default=5, help="length of each origin phase (default 5)"
    )
    parser.add_argument(
        "--origin-rounds",
        type=int,
        default=3,
        help="rounds of the two origin phases, alternating their order (default 3)",
    )
    parser.add_argument(
        "--compare-ref",
        metavar="GITREF",
        help="with --workers: the origin phases of this checkout against GITREF's, A/B "
        "(scripts/_bench_compare.py); implies --skip-store-phases",
    )
    parser.add_argument(
        "--skip-store-phases",
        action="store_true",
        help="with --workers: only the origin phases (no in-process clients, baseline, profile)",
    )
    args = parser.parse_args()
    seconds, max_commands = args.seconds, args.commands

    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _raise_on_signal)
    ctx = multiprocessing.get_context("fork")
    cluster = Cluster(tempfile.mkdtemp(prefix="aidememo-bench-pg.", dir=args.dir))
    began = time.monotonic()
    load_before = os.getloadavg()
    try:
        note("starting a PostgreSQL 15 cluster with fsync=on, synchronous_commit=on")
        cluster.start()
        url = cluster.url
        server = _server_facts(url)
        if server["fsync"] != "on" or server["synchronous_commit"] != "on":
            raise RuntimeError(f"the cluster is not durable: {server}")
        setup(url)
        connect = psycopg_connector(url)

        origin: dict[str, Any] = {}
        if args.workers and args.compare_ref:
            from _bench_pg_origin import run_origin_compare

            origin = run_origin_compare(url, cluster.data, args.workers, args.origin_seconds, 1,
                                        args.origin_rounds, args.compare_ref)  # fmt: skip
            emit("bench_pg_origin_compare", origin, {}, _compare_targets(origin, args.workers))
            return 0
        if args.workers:
            from _bench_pg_origin import run_origin

            origin = run_origin(
                url, cluster.data, args.workers, args.origin_seconds, 1, args.origin_rounds
            )
            if args.skip_store_phases:
                emit("bench_pg_origin", origin, {}, _origin_targets(origin, args.workers))
                return 0

        half_s = seconds / 2
        half_rows = max(1, max_commands // 2)
        note(f"baseline: raw psycopg insert+commit loop, {half_s:g} s (first half)")
        base_a, base_a_s, base_a_cpu = run_baseline(connect, 0, half_s, half_rows)

        figures: dict[str, Any] = {"payload_bytes": PAYLOAD_BYTES}
        figures.update(origin)
        for name, projects in (
            ("one_client", ["bench-solo"]),
            ("sixteen_clients_one_project", ["bench-shared"] * CLIENTS),
            ("sixteen_clients_sixteen_projects", _many_projects()),
        ):
            figures.update(run_phase(ctx, name, url, projects, seconds, max_commands, args.warmup))

        note(f"baseline: raw psycopg insert+commit loop, {half_s:g} s (second half)")
        base_b, base_b_s, base_b_cpu = run_baseline(connect, len(base_a), half_s, half_rows)
        base_samples = base_a + base_b
        base_s, base_cpu = base_a_s + base_b_s, base_a_cpu + base_b_cpu

        note(f"profile: {args.profile_commands} commands and raw rows, statements timed")
        figures.update(profile(url, args.profile_commands))
    finally:
        cluster.stop()
    elapsed = time.monotonic() - began

    rows = len(base_samples)
    base_rate = rows / base_s
    one = figures["one_client_commands_per_s"]
    shared = figures["sixteen_clients_one_project_commands_per_s"]
    many = figures["sixteen_clients_sixteen_projects_commands_per_s"]
    figures.update(
        {
            "peak_rss_mib": peak_rss_mib(),
            "client_peak_rss_mib": max(
                v for k, v in figures.items() if k.endswith("_peak_rss_mib")
            ),
            "run_s": round(elapsed, 1),
            "load_average_1m_before": round(load_before[0], 2),
            "load_average_1m_after": round(os.getloadavg()[0], 2),
            "cpus": os.cpu_count(),
            "transport": "tcp 127.0.0.1",
            "driver": "psycopg " + __import__("psycopg").__version__,
            **{f"server_{k}": v for k, v in server.items()},
            "python": sys.version.split()[0],
        }
    )
    baseline: dict[str, Any] = {
        "what": "raw psycopg, one connection: INSERT one 200-byte row; commit() (fsync on)",
        "rows": rows,
        "rows_per_s": round(base_rate, 1),
        "first_half_rows_per_s": round(len(base_a) / base_a_s, 1),
        "second_half_rows_per_s": round(len(base_b) / base_b_s, 1),
        "cpu_us_per_row": round(base_cpu / rows * 1e6, 1),
        **latency_summary(base_samples, "commit"),
    }
    targets = {
        "one_client_ratio": target(one / base_rate, ">= 0.4"),
        "sixteen_projects_scaling": target(many / one, ">= 2.5"),
        "one_project_contention": target(shared / one, ">= 0.8"),
    }
    if args.workers:
        targets.update(_origin_targets(figures, args.workers))
    emit("bench_pg", figures, baseline, targets)
    return 0


def _compare_targets(figures: dict[str, Any], workers: int) -> dict[str, Any]:
    """A/B: the `--workers N` CPU ratio, and each side's CPU per request, within 5% of
    before's."""
    after = figures[f"after_origin_cpu_ratio_w{workers}_over_w1"]
    before = figures[f"before_origin_cpu_ratio_w{workers}_over_w1"]
    out = {"cpu_ratio_after_over_before": target(after / before, "<= 1.05")}
    for n in sorted({1, workers}):
        value = figures.get(f"w{n}_origin_cpu_us_per_req_after_over_before")
        if value is not None:
            out[f"w{n}_cpu_per_request_after_over_before"] = target(value, "<= 1.05")
    return out


def _origin_targets(figures: dict[str, Any], workers: int) -> dict[str, Any]:
    """With several workers, the origin's CPU per request within 10% of one worker's."""
    ratio = figures.get(f"origin_cpu_ratio_w{workers}_over_w1")
    if workers < 2 or ratio is None:
        return {}
    return {"origin_cpu_per_request_ratio": target(ratio, "<= 1.1")}


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except KeyboardInterrupt as exc:  # SIGINT, or SIGTERM/SIGHUP through _raise_on_signal
        note(f"interrupted ({exc or 'SIGINT'}); the cluster was stopped and removed")
        raise SystemExit(130) from None
