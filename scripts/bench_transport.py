"""Hello-world throughput: uvicorn's httptools protocol against the origin's limited one.

The origin serves through `origin.transport.LimitedHttpProtocol` (SPEC.md HTTP-4, HTTP-5)
instead of uvicorn's stock httptools protocol; this measures what that costs. Both servers
run `bench_http.hello_asgi` (the bare ASGI hello world) with the same uvicorn settings as
`origin.server` (uvloop, access log off, the same logging configuration), one process each,
on their own ports, and are driven by the same wrk command as `scripts/bench_http.py`
(`-t2 -c32`, `bench_http.lua` in hello mode). Runs alternate between the two servers so that
load from other jobs on the machine falls on both alike. Besides requests/s, each run records
the server's CPU time per request (user plus system, from `/proc`), which other jobs on a
shared machine disturb far less; the JSON line has every run and the medians.

    .venv/bin/python scripts/bench_transport.py --rounds 5 --duration 5
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

from _bench_common import free_port, note
from _bench_http_tools import (
    LuaArgs,
    Processes,
    cpu_seconds_of,
    ensure_wrk,
    run_wrk,
    stop_on_signals,
    wait_ready,
    wrk_figures,
)

KINDS = ("stock", "limited", "h11")


def serve(kind: str, port: int) -> int:
    """`stock`: uvicorn's httptools protocol; `limited`: the origin's, as `origin.server`
    configures it (its WebSocket protocol and keep-alive included); `h11`: uvicorn's h11
    protocol bounded to a 64 KiB head (`h11_max_incomplete_event_size`), the alternative."""
    import uvicorn
    from bench_http import hello_asgi

    from origin.limits import TransportLimits
    from origin.server import http_protocol, logging_config, ws_protocol

    limited = kind == "limited"
    limits = TransportLimits()
    config = uvicorn.Config(
        hello_asgi,
        host="127.0.0.1",
        port=port,
        loop="uvloop" if importlib.util.find_spec("uvloop") else "asyncio",
        http=http_protocol(limits) if limited else ("h11" if kind == "h11" else "httptools"),
        h11_max_incomplete_event_size=limits.max_head_bytes,
        ws=ws_protocol() if limited else "auto",
        timeout_keep_alive=int(limits.idle_timeout_s) if limited else 5,
        lifespan="on",
        access_log=False,
        log_config=logging_config("INFO"),
        server_header=False,
        proxy_headers=False,
    )
    uvicorn.Server(config).run()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="measured runs per server")
    parser.add_argument("--duration", type=int, default=5, help="seconds per measured run")
    parser.add_argument("--warmup", type=int, default=2, help="seconds of warm-up per server")
    parser.add_argument(
        "--h11", action="store_true", help="also measure uvicorn's h11 protocol (the alternative)"
    )
    parser.add_argument("--serve", choices=KINDS, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        return serve(args.serve, args.port)
    with stop_on_signals():
        return orchestrate(args)


def orchestrate(args: argparse.Namespace) -> int:
    wrk = ensure_wrk()
    procs = Processes()
    tmp = Path(tempfile.mkdtemp(prefix="bench_transport_"))
    lua = LuaArgs(token="-", project="-", epoch="-", seed_facts=0, head_seq=0, session="-")
    py, me = sys.executable, str(Path(__file__).resolve())
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    try:
        kinds = KINDS if args.h11 else KINDS[:2]
        ports = {kind: free_port() for kind in kinds}
        pids = {}
        for kind in kinds:
            log = tmp / f"{kind}.log"
            proc = procs.start([py, me, "--serve", kind, "--port", str(ports[kind])], log, env)
            wait_ready(proc, ports[kind], "/hello", log)
            pids[kind] = proc.pid
            run_wrk(wrk, ports[kind], "hello", args.warmup, lua, f"w{kind}")
        rps: dict[str, list[float]] = {kind: [] for kind in kinds}
        cpu_us: dict[str, list[float]] = {kind: [] for kind in kinds}
        for round_no in range(args.rounds):
            for kind in kinds if round_no % 2 == 0 else reversed(kinds):
                before = cpu_seconds_of(pids[kind])
                raw = run_wrk(wrk, ports[kind], "hello", args.duration, lua, "m")
                used = cpu_seconds_of(pids[kind]) - before
                figures = wrk_figures(raw)
                rps[kind].append(figures["rps"])
                cpu_us[kind].append(round(used / max(1, raw["requests"]) * 1e6, 2))
                note(f"round {round_no + 1} {kind}: {figures['rps']} req/s, {cpu_us[kind][-1]} us")
        median_rps = {kind: statistics.median(values) for kind, values in rps.items()}
        median_cpu = {kind: statistics.median(values) for kind, values in cpu_us.items()}
        result = {
            "rps": rps,
            "cpu_us_per_request": cpu_us,
            "median_rps": median_rps,
            "median_cpu_us_per_request": median_cpu,
            "rps_limited_over_stock": round(median_rps["limited"] / median_rps["stock"], 3),
            "cpu_limited_over_stock": round(median_cpu["limited"] / median_cpu["stock"], 3),
        }
        print(json.dumps(result))
        return 0
    finally:
        procs.stop_all()


if __name__ == "__main__":
    sys.exit(main())
