"""The origin phases of `scripts/bench_pg.py --workers N`: the same PostgreSQL cluster served
over HTTP by `aidememo serve --workers 1` and `--workers N`, in alternating rounds.

Each phase gets a database of its own (`CREATE DATABASE`, migrated and bootstrapped with one
project and one writer by the code of the commit it serves, dropped after the phase), and the
database is `ANALYZE`d after the warm-up, before the measured run. Until its tables have
statistics PostgreSQL plans the replay check of `aidememo_execute_raw` (the receipt by command
id) as a scan of the project's receipts through the `(tenant_id, project_id, project_seq)`
index, so its cost per command grows with every command before it (measured: 2.3 ms of
PostgreSQL CPU per command in a fresh database, 4.3-5.6 ms six phases later on the same
database, 1.5 ms once analyzed); autovacuum analyzes a database in service, a benchmark of a few
seconds would measure the plan before that. A phase measured after another on the same database
would carry the first one's history too. The rounds alternate the order (1, N, then N, 1, ...)
so that the machine's drifting load hits both sides alike.

A phase starts the server on a free port (the database URL in `AIDEMEMO_DATABASE_URL`, so not in
any argv), waits for `/health`, then drives `wrk -t2 -c32` with `bench_http.lua` in `commands`
mode (a generic put of a new 200-byte `custom.note`, one guarded write) for a warm-up and
a measured run, and stops the server. Reported per worker count (`origin_w{N}_*`): requests/s
and latency from wrk (the median round's), and the CPU split of the measured runs per request
between the origin's processes, PostgreSQL (postmaster and backends) and wrk
(`scripts/_bench_cpu.py`), summed over the rounds. `origin_cpu_ratio_w{N}_over_w1` compares
the origin's CPU per request of the two sides (summed CPU over summed requests);
`origin_cpu_ratio_rounds` is each round's own ratio.
"""

from __future__ import annotations

import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from _bench_common import free_port, note
from _bench_cpu import CpuSplit, postmaster_pid
from _bench_http_tools import (
    ROOT,
    LuaArgs,
    Processes,
    ensure_wrk,
    run_wrk,
    wait_ready,
    wrk_figures,
)

TENANT, PROJECT, ACTOR = "bench-origin", "bench-origin-project", "bench-origin-writer"


def _bootstrap(url: str) -> tuple[str, str]:
    """A project and a writer on the database (migrated first): (token, epoch)."""
    from aidememo.cli.stores import open_postgres
    from aidememo.domain.clock import RandomIds, SystemClock
    from aidememo.service.identity import IdentityService, token_digest

    token = secrets.token_hex(32)
    store = open_postgres(url)
    try:
        boot = IdentityService(store, SystemClock(), RandomIds()).bootstrap(
            tenant_id=TENANT, project_id=PROJECT, actor_id=ACTOR, token_sha256=token_digest(token)
        )
    finally:
        store.close()
    return token, boot.project.project_epoch


def _bootstrap_in(tree: Path, url: str) -> tuple[str, str]:
    """`_bootstrap` by the code of `tree` (its migrations, so another commit's server opens a
    database of its own schema version)."""
    if tree == ROOT:
        return _bootstrap(url)
    code = (
        "import json, sys; sys.path[:0] = ['scripts', '.']; "
        "from _bench_pg_origin import _bootstrap; print(json.dumps(_bootstrap(sys.argv[1])))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, url], cwd=tree, check=True, capture_output=True, text=True
    )
    token, epoch = json.loads(done.stdout.strip().splitlines()[-1])
    return token, epoch


def _admin(url: str, sql: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql)


def _phase(
    url: str,
    data_dir: str,
    n: int,
    k: int,
    seconds: int,
    warmup: int,
    tmp: Path,
    tree: Path = ROOT,
) -> dict[str, Any]:
    """One phase on a fresh database `bench_origin_{k}`: wrk's figures and the CPU split."""
    database = f"bench_origin_{k}"
    _admin(url, f"CREATE DATABASE {database}")
    db_url = url.rsplit("/", 1)[0] + f"/{database}"
    try:
        token, epoch = _bootstrap_in(tree, db_url)
        lua = LuaArgs(token, PROJECT, epoch, 1, 0, "unused")
        procs = Processes()
        port = free_port()
        env = {**os.environ, "AIDEMEMO_HOME": str(tmp / "home"), "PYTHONUNBUFFERED": "1"}
        env["AIDEMEMO_DATABASE_URL"] = db_url
        env["AIDEMEMO_ARTIFACT_ROOT"] = str(tmp / f"artifacts_{k}")  # required with PostgreSQL
        argv = [sys.executable, "-m", "aidememo", "serve", "--port", str(port)]
        if n > 1:
            argv += ["--workers", str(n)]
        log = tmp / f"serve_{k}_w{n}.log"
        try:
            server = procs.start(argv, log, env, cwd=tree)
            wait_ready(server, port, "/health", log)
            tag = secrets.token_hex(3)
            if warmup > 0:
                run_wrk(ensure_wrk(), port, "commands", warmup, lua, f"w{n}{tag}")
            _admin(db_url, "ANALYZE")  # as autovacuum would: see the module docstring
            note(f"origin --workers {n} (phase {k}): wrk POST /v1/commands, {seconds} s")
            split = CpuSplit(server.pid, postmaster_pid(data_dir))
            result = wrk_figures(
                run_wrk(ensure_wrk(), port, "commands", seconds, lua, f"m{n}{tag}")
            )
            result.update(split.totals())
        finally:
            procs.stop_all()
    finally:
        _admin(url, f"DROP DATABASE IF EXISTS {database}")
    return result


def run_origin(
    url: str, data_dir: str, workers: int, seconds: int, warmup: int, rounds: int = 3
) -> dict[str, Any]:
    """`rounds` of a `--workers 1` and a `--workers N` phase, alternating which runs first;
    their figures, prefixed `origin_w{N}_`."""
    ensure_wrk()
    figures: dict[str, Any] = {
        "origin_load": f"wrk -t2 -c32 -d{seconds}s, POST /v1/commands",
        "origin_rounds": rounds,
    }
    tmp = Path(tempfile.mkdtemp(prefix="bench_pg_origin_"))
    sides = sorted({1, workers})
    runs: dict[int, list[dict[str, Any]]] = {n: [] for n in sides}
    k = 0
    for r in range(rounds):
        for n in sides if r % 2 == 0 else sides[::-1]:
            runs[n].append(_phase(url, data_dir, n, k, seconds, warmup, tmp))
            k += 1
    for n, results in runs.items():
        figures.update({f"origin_w{n}_{key}": v for key, v in _summary(results).items()})
    if workers > 1:
        one = figures["origin_w1_origin_cpu_us_per_req"]
        many = figures[f"origin_w{workers}_origin_cpu_us_per_req"]
        figures[f"origin_cpu_ratio_w{workers}_over_w1"] = round(many / one, 3) if one else None
        figures[f"origin_rps_ratio_w{workers}_over_w1"] = round(
            figures[f"origin_w{workers}_rps"] / figures["origin_w1_rps"], 3
        )
        figures["origin_cpu_ratio_rounds"] = [
            round(_us(m, "origin") / _us(o, "origin"), 3)
            for o, m in zip(runs[1], runs[workers], strict=True)
        ]
        figures["postgres_cpu_ratio_rounds"] = [
            round(_us(m, "postgres") / _us(o, "postgres"), 3)
            for o, m in zip(runs[1], runs[workers], strict=True)
        ]
    return figures


def run_origin_compare(
    url: str, data_dir: str, workers: int, seconds: int, warmup: int, rounds: int, ref: str
) -> dict[str, Any]:
    """`--compare-ref REF`: `run_origin`'s phases from this checkout and from REF's, the four
    phases of a round in an order that alternates from round to round; each side's
    `--workers N` over `--workers 1` CPU ratio, and after over before."""
    from _bench_compare import order, other_tree

    ensure_wrk()
    tmp = Path(tempfile.mkdtemp(prefix="bench_pg_origin_compare_"))
    sides = sorted({1, workers})
    runs: dict[tuple[str, int], list[dict[str, Any]]] = {}
    k = 0
    with other_tree(ref) as before:
        trees = {"after": ROOT, "before": before}
        for r in range(rounds):
            for side in order(r):
                for n in sides if r % 2 == 0 else sides[::-1]:
                    result = _phase(url, data_dir, n, k, seconds, warmup, tmp, trees[side])
                    runs.setdefault((side, n), []).append(result)
                    k += 1
    figures: dict[str, Any] = {"origin_load": f"wrk -t2 -c32 -d{seconds}s, POST /v1/commands"}
    figures["compare_ref"], figures["origin_rounds"] = ref, rounds
    for (side, n), results in runs.items():
        figures.update({f"{side}_w{n}_{key}": v for key, v in _summary(results).items()})
    for side in ("after", "before"):
        one = figures[f"{side}_w1_origin_cpu_us_per_req"]
        many = figures[f"{side}_w{workers}_origin_cpu_us_per_req"]
        figures[f"{side}_origin_cpu_ratio_w{workers}_over_w1"] = round(many / one, 3)
    for n in sides:
        for key in ("origin_cpu_us_per_req", "rps_median", "p99_ms"):
            a, b = figures.get(f"after_w{n}_{key}"), figures.get(f"before_w{n}_{key}")
            if a and b:
                figures[f"w{n}_{key}_after_over_before"] = round(float(a) / float(b), 3)
    return figures


def _us(result: dict[str, Any], part: str) -> float:
    return float(result[f"{part}_cpu_s"]) / max(1, int(result["requests"])) * 1e6


def _summary(results: list[dict[str, Any]]) -> dict[str, Any]:
    """wrk's figures of the median round (by requests/s), CPU per request over all rounds."""
    median = sorted(results, key=lambda r: float(r["rps"]))[len(results) // 2]
    out = {key: v for key, v in median.items() if not key.endswith("_cpu_s")}
    out["rps_rounds"] = [r["rps"] for r in results]
    requests = sum(int(r["requests"]) for r in results)
    out["requests"] = requests
    for part in ("origin", "postgres", "loadgen"):
        total = sum(float(r[f"{part}_cpu_s"]) for r in results)
        out[f"{part}_cpu_us_per_req"] = round(total / max(1, requests) * 1e6, 1)
    out["origin_cpu_us_per_req_rounds"] = [round(_us(r, "origin"), 1) for r in results]
    out["postgres_cpu_us_per_req_rounds"] = [round(_us(r, "postgres"), 1) for r in results]
    out["rps_median"] = statistics.median(float(r["rps"]) for r in results)
    return out
