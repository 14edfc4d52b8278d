"""`bench_http.py --indexer`: POST facts throughput while the semantic indexer catches up,
against the same server without one, in the same run (SPEC.md SEM-7: writes keep their
throughput while the indexer works; the indexer takes at most half of one core).

One SQLite database, seeded as bench_http seeds it, served four times in turn by
`aidememo serve` with `--indexer off` and `on` in turn, three times each (the same server
otherwise); each run is bench_http's `POST facts` wrk run (warm-up, then `--duration`
seconds) with the server's CPU per request (its indexer child process included). Each `on`
server starts with every fact the runs before it wrote still to index (thousands: the indexer
is behind for the whole run), and is measured once its indexer has applied a first batch;
`/ready`'s `semantic` part gives the lag and the facts embedded during the measured run.
Figures are the means of the runs of each kind; the target compares them. The machine's two
cores are shared with wrk and other work: the figures are noisy.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from _bench_common import emit, free_port, note, target
from _bench_cpu import CpuSplit
from _bench_http_tools import LuaArgs, Processes, ensure_wrk, run_wrk, wait_ready, wrk_figures

ORDER = ("off", "on") * 3
WORKING_S = 120.0  # a bound on waiting for the indexer's first batch, never a figure


def _semantic(port: int) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/ready", timeout=10) as answer:
        found: dict[str, Any] = json.loads(answer.read()).get("semantic") or {}
        return found


def compare_indexer(args: argparse.Namespace) -> int:
    """Run the four servers and print one JSON line."""
    import bench_http as bh

    wrk = ensure_wrk()
    procs = Processes()
    tmp = Path(tempfile.mkdtemp(prefix="bench_http_indexer_"))
    runs: list[dict[str, Any]] = []
    try:
        home = tmp / "home"
        home.mkdir(mode=0o700)
        database = str(home / "ssot.sqlite")
        tokens = {bh.ACTOR_A: secrets.token_hex(32), bh.ACTOR_B: secrets.token_hex(32)}
        note(f"seeding {args.seed_facts} facts")
        epoch, head = bh.seed(database, tokens, args.seed_facts)
        env = {**os.environ, "AIDEMEMO_HOME": str(home), "PYTHONUNBUFFERED": "1"}
        env.pop("AIDEMEMO_DATABASE_URL", None)
        lua = LuaArgs(tokens[bh.ACTOR_A], bh.PROJECT, epoch, args.seed_facts, head, bh.SESSION)
        for n, indexer in enumerate(ORDER):
            port = free_port()
            log = tmp / f"server-{n}.log"
            argv = [sys.executable, "-m", "aidememo", "serve", "--port", str(port)]
            argv += ["--database", database, "--indexer", indexer]
            server = procs.start(argv, log, env)
            wait_ready(server, port, "/health", log)
            tag = f"{n}{secrets.token_hex(3)}"
            if args.warmup > 0:
                run_wrk(wrk, port, "facts", args.warmup, lua, f"w{tag}")
            deadline = time.monotonic() + WORKING_S
            while indexer == "on" and not _semantic(port).get("facts_indexed"):
                assert time.monotonic() < deadline, "the indexer never indexed"
                time.sleep(0.5)
            before = _semantic(port)
            note(f"wrk facts, indexer {indexer}: {args.duration} s (lag {before.get('index_lag')})")
            split = CpuSplit(server.pid, None)
            figures = wrk_figures(run_wrk(wrk, port, "facts", args.duration, lua, f"m{tag}"))
            figures["cpu_us_per_req"] = split.per_request(figures["requests"])[
                "origin_cpu_us_per_req"
            ]
            after = _semantic(port)
            if indexer == "on":
                figures["index_lag_at_start"] = before["index_lag"]
                figures["index_lag_at_end"] = after["index_lag"]
                figures["facts_indexed_during_run"] = (
                    after["facts_indexed"] - before["facts_indexed"]
                )
            runs.append({"indexer": indexer, **figures})
            procs.stop(server)
    finally:
        procs.stop_all()
        shutil.rmtree(tmp, ignore_errors=True)

    def mean(kind: str, key: str) -> float:
        values = [float(r[key]) for r in runs if r["indexer"] == kind]
        return round(sum(values) / len(values), 2)

    on_rps, off_rps = mean("on", "rps"), mean("off", "rps")
    figures = {
        "post_facts_rps_indexer_catching_up": on_rps,
        "post_facts_p99_ms_indexer_catching_up": mean("on", "p99_ms"),
        "cpu_us_per_req_indexer_catching_up": mean("on", "cpu_us_per_req"),
        "indexer_facts_per_s_during_runs": round(
            mean("on", "facts_indexed_during_run") / args.duration, 1
        ),
        "runs": runs,
        "load": f"wrk -t2 -c32 -d{args.duration}s --latency after {args.warmup} s warm-up",
        "server": "aidememo serve: uvicorn, one process, SQLite synchronous=FULL, bundled model",
        "machine_load_1m": round(os.getloadavg()[0], 2),
        "noisy_machine": "2 shared cores (wrk, server and indexer on them); figures are noisy",
    }
    baseline = {
        "post_facts_rps_indexer_off": off_rps,
        "post_facts_p99_ms_indexer_off": mean("off", "p99_ms"),
        "cpu_us_per_req_indexer_off": mean("off", "cpu_us_per_req"),
    }
    targets = {"post_facts_rps_ratio_indexer_on_off": target(on_rps / off_rps, ">= 0.9")}
    emit("bench_http_indexer", figures, baseline, targets)
    return 0
