"""The origin phases of `scripts/bench_pg.py --workers N`: the same PostgreSQL cluster served
over HTTP by `aidememo serve --workers 1`, then `--workers N`, in the same run.

Each phase starts the server on a free port (the database URL in `AIDEMEMO_DATABASE_URL`, so
not in any argv), waits for `/health`, then drives `wrk -t2 -c32` with `bench_http.lua` in
`commands` mode (a generic put of a new 200-byte `custom.note`, the one-statement path) for a
warm-up and a measured run, and stops the server. Reported per phase (`origin_w{N}_*`):
requests/s and latency from wrk, and the CPU split of the measured run per request between
the origin's processes, PostgreSQL (postmaster and backends) and wrk (`scripts/_bench_cpu.py`).
`origin_cpu_ratio_w{N}_over_w1` compares the origin's CPU per request of the two phases.
"""

from __future__ import annotations

import os
import secrets
import sys
import tempfile
from pathlib import Path
from typing import Any

from _bench_common import free_port, note
from _bench_cpu import CpuSplit, postmaster_pid
from _bench_http_tools import LuaArgs, Processes, ensure_wrk, run_wrk, wait_ready, wrk_figures

TENANT, PROJECT, ACTOR = "bench-origin", "bench-origin-project", "bench-origin-writer"


def _bootstrap(url: str) -> tuple[str, str]:
    """A project and a writer on the cluster: (token, epoch)."""
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


def run_origin(url: str, data_dir: str, workers: int, seconds: int, warmup: int) -> dict[str, Any]:
    """The `--workers 1` and `--workers N` phases; their figures, prefixed `origin_w{N}_`."""
    wrk = ensure_wrk()
    token, epoch = _bootstrap(url)
    lua = LuaArgs(token, PROJECT, epoch, 1, 0, "unused")
    figures: dict[str, Any] = {"origin_load": f"wrk -t2 -c32 -d{seconds}s, POST /v1/commands"}
    tmp = Path(tempfile.mkdtemp(prefix="bench_pg_origin_"))
    for n in sorted({1, workers}):
        procs = Processes()
        port = free_port()
        env = {**os.environ, "AIDEMEMO_HOME": str(tmp / "home"), "PYTHONUNBUFFERED": "1"}
        env["AIDEMEMO_DATABASE_URL"] = url
        env["AIDEMEMO_ARTIFACT_ROOT"] = str(tmp / "artifacts")  # required with PostgreSQL
        argv = [sys.executable, "-m", "aidememo", "serve", "--port", str(port)]
        if n > 1:
            argv += ["--workers", str(n)]
        log = tmp / f"serve_w{n}.log"
        try:
            server = procs.start(argv, log, env)
            wait_ready(server, port, "/health", log)
            tag = secrets.token_hex(3)
            if warmup > 0:
                run_wrk(wrk, port, "commands", warmup, lua, f"w{n}{tag}")
            note(f"origin --workers {n}: wrk POST /v1/commands, {seconds} s")
            split = CpuSplit(server.pid, postmaster_pid(data_dir))
            result = wrk_figures(run_wrk(wrk, port, "commands", seconds, lua, f"m{n}{tag}"))
            result.update(split.per_request(result["requests"]))
        finally:
            procs.stop_all()
        for key, value in result.items():
            figures[f"origin_w{n}_{key}"] = value
    if workers > 1:
        one = figures["origin_w1_origin_cpu_us_per_req"]
        many = figures[f"origin_w{workers}_origin_cpu_us_per_req"]
        figures[f"origin_cpu_ratio_w{workers}_over_w1"] = round(many / one, 3) if one else None
        figures[f"origin_rps_ratio_w{workers}_over_w1"] = round(
            figures[f"origin_w{workers}_rps"] / figures["origin_w1_rps"], 3
        )
    return figures
