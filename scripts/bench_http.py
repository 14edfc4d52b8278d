#!/usr/bin/env python3
"""Benchmark of the origin HTTP service on SQLite.

What is measured, and how:

- Setup: a temporary `AIDEMEMO_HOME`; a project with two writer agents and their bearer
  tokens bootstrapped directly through the store (`IdentityService.bootstrap`), one session and
  `--seed-facts` facts (default 1,000) written through the core's `HttpApp.dispatch`. Then
  `aidememo serve` (uvicorn, one process, `synchronous=FULL`) on a free loopback port.
- Load: Debian's `wrk` (installed with apt-get when missing), `-t2 -c32 --latency`, one run of
  `--duration` seconds (default 10) per request shape after a `--warmup` run (default 2 s),
  driven by `scripts/bench_http.lua`: `POST facts` (command_id and fact_id unique per request:
  run tag, wrk thread number and a per-thread counter; about 200 bytes of content),
  `GET resource` (a random seeded fact), `GET changes` (`limit=1000`, random cursor) and
  `GET search` (two random rare terms; each fact carries 4 of 2,000 rare terms besides common
  words, so a search matches a small share of the facts, like a real lookup). The Lua `done()`
  prints requests and the p50/p90/p95/p99 latencies from wrk's own histogram as JSON;
  requests/s is requests over wrk's duration.
- Handoff cycle: a separate Python process (`http.client`, one keep-alive connection per
  actor) runs `--cycles` full cycles (send by A; accept, result fact and return by B) with no
  other load, timing each cycle and each step.
- Baseline, in the same run: a hello-world JSON ASGI app under the same uvicorn settings as
  `origin.server` (uvloop, httptools, lifespan on, no uvicorn access log), started by this
  script on another port and driven by the same wrk command. The same hello answer behind
  `origin.asgi` (our adapter and access log, no core) is reported as a figure, so the cost of
  the adapter and of the core can be told apart.
- Peak memory: the server's peak RSS (`VmHWM`) read before it is stopped.
- CPU: each run's `cpu_us_per_req` is the serving process tree's user plus system CPU time
  (`/proc/PID/stat`, all threads, every worker) over the run, per request. On this shared
  machine it moves far less from run to run than requests/s, so compare changes by it first.
  Beside it, `loadgen_cpu_us_per_req` (wrk's, from `getrusage` of this script's children),
  `postgres_cpu_us_per_req` (the cluster's postmaster and backends, on PostgreSQL) and
  `origin_processes` (`scripts/_bench_cpu.py`): the CPU split between origin, database and
  load generator, which share this machine's cores.
- `--workers N` serves with `aidememo serve --workers N` from a throwaway PostgreSQL 15
  cluster (`scripts/_bench_pg_server.py`: fsync, synchronous_commit and full_page_writes on),
  seeded the same way; `--postgres` does that with one worker, for the same-run comparison.
  SQLite refuses several workers (SPEC.md HTTP-8). The targets below are the SQLite ones.

Every process this script starts is stopped (SIGTERM, then SIGKILL) in a `finally`, also on
failure and on SIGTERM/SIGINT. The last line of output is the JSON result object
(`_bench_common.emit`); progress goes to stderr. Run from the repository root:
`.venv/bin/python scripts/bench_http.py [--duration 5 --cycles 100]`.
`--indexer` measures instead `POST facts` with the semantic indexer catching up against the
same server without it (`scripts/_bench_http_indexer.py`, its own JSON line).
`--py-spy DIR` adds extra runs (not reported) with py-spy recording the server, one per
`--py-spy-modes` entry, and prints where the samples fall.
The process and load-tool plumbing (child processes, `/proc` readings, wrk) is in
`scripts/_bench_http_tools.py`; this file holds what is served, seeded and measured.
"""

from __future__ import annotations

import argparse
import http.client
import importlib.util
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _bench_common import emit, free_port, latency_summary, note, peak_rss_mib, target
from _bench_cpu import CpuSplit, postmaster_pid
from _bench_http_tools import (
    ROOT,
    LuaArgs,
    Processes,
    ensure_wrk,
    peak_rss_of,
    run_wrk,
    stop_on_signals,
    wait_ready,
    wrk_figures,
)

TENANT = "bench-tenant"
PROJECT = "bench-project"
ACTOR_A = "bench-a"
ACTOR_B = "bench-b"
SESSION = "s-bench"
HANDOFF_SESSION = "s-handoff"
HELLO_BODY = b'{"ok":true,"service":"hello","n":42}'

# -- the hello-world baseline servers (run as child processes of this script) ----------------


async def hello_asgi(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The smallest JSON ASGI app: every request gets `HELLO_BODY`."""
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] != "http":
        return
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": HELLO_BODY})


class HelloDispatcher:
    """A core-shaped `dispatch` that answers `HELLO_BODY`, to serve behind `origin.asgi`."""

    def dispatch(self, request: Any) -> Any:
        from aidememo.http.types import Response

        return Response(200, [("content-type", "application/json")], HELLO_BODY)


def serve_hello(kind: str, port: int) -> int:
    """`raw`: `hello_asgi` under `origin.server`'s uvicorn settings; `adapter`: the hello
    dispatcher behind `origin.asgi`, through `origin.server.serve` itself."""
    from origin.server import ServerSettings, logging_config, serve

    if kind == "adapter":
        return serve(HelloDispatcher(), ServerSettings(port=port), close=lambda: None)
    import uvicorn

    config = uvicorn.Config(
        hello_asgi,
        host="127.0.0.1",
        port=port,
        loop="uvloop" if importlib.util.find_spec("uvloop") else "asyncio",
        http="httptools" if importlib.util.find_spec("httptools") else "h11",
        lifespan="on",
        access_log=False,
        log_config=logging_config("INFO"),
        server_header=False,
        proxy_headers=False,
    )
    uvicorn.Server(config).run()
    return 0


def serve_app(database: str, port: int) -> int:
    """Fallback when the `aidememo serve` command is not available: the same app and server."""
    from aidememo.http.app import HttpApp
    from aidememo.stores.sqlite import SqliteStore
    from origin.server import ServerSettings, serve

    store = SqliteStore.open_file(database, synchronous="FULL")
    return serve(HttpApp(store), ServerSettings(port=port), close=store.close)


# -- the handoff cycle client (a separate process) -------------------------------------------


class Client:
    """One keep-alive connection acting as one actor."""

    def __init__(self, port: int, token: str) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.conn.request("POST", path, json.dumps(body).encode(), self.headers)
        response = self.conn.getresponse()
        data = response.read()
        if response.status != 200:
            raise RuntimeError(f"POST {path}: {response.status} {data[:300]!r}")
        result: dict[str, Any] = json.loads(data)
        return result


def handoff_client(port: int, token_a: str, token_b: str, cycles: int, tag: str) -> int:
    """Run `cycles` handoff cycles and print their timings as one JSON line."""
    a, b = Client(port, token_a), Client(port, token_b)
    base = f"/v1/projects/{PROJECT}"
    steps: dict[str, list[int]] = {"send": [], "accept": [], "fact": [], "return": []}
    cycle_ns: list[int] = []
    clock = time.perf_counter_ns
    began = clock()
    for i in range(cycles):
        hid, claim, fid = f"h-{tag}-{i}", f"claim-{tag}-{i}", f"rf-{tag}-{i}"
        t0 = clock()
        sent = a.post(
            f"{base}/handoffs",
            {
                "command_id": f"hs-{tag}-{i}",
                "payload": {
                    "handoff_id": hid,
                    "session_id": HANDOFF_SESSION,
                    "to_actor": ACTOR_B,
                    "focus": "benchmark handoff",
                },
            },
        )
        t1 = clock()
        accepted = b.post(
            f"{base}/handoffs/{hid}/accept",
            {
                "command_id": f"ha-{tag}-{i}",
                "expected_revision": sent["revision"],
                "payload": {"claim_id": claim},
            },
        )
        t2 = clock()
        b.post(
            f"{base}/facts",
            {
                "command_id": f"hf-{tag}-{i}",
                "payload": {
                    "fact_id": fid,
                    "session_id": HANDOFF_SESSION,
                    "content": f"result of handoff {i}: the benchmark work is done",
                },
            },
        )
        t3 = clock()
        b.post(
            f"{base}/handoffs/{hid}/return",
            {
                "command_id": f"hr-{tag}-{i}",
                "expected_revision": accepted["revision"],
                "payload": {"claim_id": claim, "result_fact_id": fid, "outcome": "succeeded"},
            },
        )
        t4 = clock()
        steps["send"].append(t1 - t0)
        steps["accept"].append(t2 - t1)
        steps["fact"].append(t3 - t2)
        steps["return"].append(t4 - t3)
        cycle_ns.append(t4 - t0)
    total_s = (clock() - began) / 1e9
    out: dict[str, Any] = {"cycles": cycles, "cycles_per_s": round(cycles / total_s, 1)}
    out.update(latency_summary(cycle_ns, "cycle"))
    for name, samples in steps.items():
        out[f"{name}_p50_ms"] = latency_summary(samples, "x")["x_p50_ms"]
    print("HANDOFF_JSON " + json.dumps(out), flush=True)
    return 0


# -- orchestration ----------------------------------------------------------------------------


def open_seed_store(database: str) -> Any:
    """The store to seed: the SQLite file, or the PostgreSQL database (migrated first)."""
    if database.startswith("postgresql://"):
        from aidememo.cli.stores import open_postgres

        return open_postgres(database)
    from aidememo.stores.sqlite import SqliteStore

    return SqliteStore.open_file(database, synchronous="FULL")


def seed(database: str, tokens: dict[str, str], facts: int) -> tuple[str, int]:
    """Bootstrap the project and actors, create the sessions and seed facts; (epoch, head)."""
    from aidememo.domain.clock import RandomIds, SystemClock
    from aidememo.http.app import HttpApp
    from aidememo.http.body import Body
    from aidememo.http.types import Request
    from aidememo.service.identity import IdentityService, token_digest

    store = open_seed_store(database)
    try:
        identity = IdentityService(store, SystemClock(), RandomIds())
        boot = identity.bootstrap(
            tenant_id=TENANT,
            project_id=PROJECT,
            actor_id=ACTOR_A,
            token_sha256=token_digest(tokens[ACTOR_A]),
        )
        identity.bootstrap(
            tenant_id=TENANT,
            project_id=PROJECT,
            actor_id=ACTOR_B,
            token_sha256=token_digest(tokens[ACTOR_B]),
        )
        app = HttpApp(store)
        headers = {
            "authorization": f"Bearer {tokens[ACTOR_A]}",
            "content-type": "application/json",
        }

        def post(path: str, body: dict[str, Any]) -> None:
            target_path = f"/v1/projects/{PROJECT}/{path}"
            request = Request("POST", target_path, "", headers, Body.of(json.dumps(body).encode()))
            response = app.dispatch(request)
            if response.status != 200:
                raise RuntimeError(f"seeding {path}: {response.status} {response.body!r}")

        for sid in (SESSION, HANDOFF_SESSION):
            post(
                "sessions",
                {"command_id": f"cs-{sid}", "payload": {"session_id": sid, "topic": "benchmark"}},
            )
        words = ["server", "latency", "sqlite", "commit", "handoff", "memory", "agent", "ledger"]
        for i in range(facts):
            common = " ".join(words[(i + k) % len(words)] for k in range(22))
            # four rare terms, as in bench_http.lua's POST facts (r0 .. r1999)
            content = common + " " + " ".join(f"r{(i * 7 + k * 503) % 2000}" for k in range(4))
            post(
                "facts",
                {
                    "command_id": f"seed-cmd-{i}",
                    "payload": {"fact_id": f"seed-{i}", "session_id": SESSION, "content": content},
                },
            )
        return boot.project.project_epoch, facts + 2
    finally:
        store.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=int, default=10, help="seconds per measured wrk run")
    parser.add_argument("--warmup", type=int, default=2, help="seconds of warm-up per run")
    parser.add_argument("--cycles", type=int, default=200, help="handoff cycles to time")
    parser.add_argument("--seed-facts", type=int, default=1000)
    parser.add_argument(
        "--py-spy", default=None, metavar="DIR", help="after measuring, record py-spy profiles"
    )
    parser.add_argument(
        "--py-spy-modes",
        default="facts,resource,adapter_hello",
        help="comma-separated: facts, resource, changes, search, adapter_hello, hello",
    )
    parser.add_argument(
        "--py-spy-gil",
        action="store_true",
        help="sample only the thread holding the GIL (py-spy --gil): Python CPU, not waits",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        help="origin processes (aidememo serve --workers); above 1 serves from PostgreSQL",
    )
    parser.add_argument(
        "--postgres",
        action="store_true",
        help="serve from a throwaway PostgreSQL cluster instead of SQLite (also one worker)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    parser.add_argument(
        "--indexer", action="store_true", help="instead: POST facts, indexer on/off"
    )
    parser.add_argument(
        "--compare-ref",
        metavar="GITREF",
        help="A/B instead: this checkout's server against GITREF's (scripts/_bench_compare.py)",
    )
    parser.add_argument("--rounds", type=int, default=3, help="A/B rounds (--compare-ref)")
    parser.add_argument("--modes", default="resource,facts", help="A/B wrk modes (--compare-ref)")
    parser.add_argument(
        "--compare-indexer",
        choices=["off", "on"],
        default="off",
        help="the semantic indexer on both A/B sides (--compare-ref; default off: the request "
        "path alone, as `--indexer` measures the indexer's own cost)",
    )
    # internal modes: this script re-runs itself as the baseline server and the cycle client
    parser.add_argument("--serve-hello", choices=["raw", "adapter"], help=argparse.SUPPRESS)
    parser.add_argument("--serve-app", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--handoff-client", nargs=4, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.serve_hello:
        return serve_hello(args.serve_hello, args.port)
    if args.serve_app:
        return serve_app(args.serve_app, args.port)
    if args.handoff_client:
        token_a, token_b, cycles, tag = args.handoff_client
        return handoff_client(args.port, token_a, token_b, int(cycles), tag)

    with stop_on_signals():
        if args.compare_ref:
            from _bench_compare import compare_http

            return compare_http(args, str(Path(__file__).resolve()))
        if args.indexer:
            from _bench_http_indexer import compare_indexer

            return compare_indexer(args)
        return orchestrate(args)


def orchestrate(args: argparse.Namespace) -> int:
    wrk = ensure_wrk()
    procs = Processes()
    tmp = Path(tempfile.mkdtemp(prefix="bench_http_"))
    postgres = args.postgres or args.workers > 1
    cluster: Any = None
    try:
        home = tmp / "home"
        home.mkdir(mode=0o700)
        database = str(home / "ssot.sqlite")
        if postgres:
            from _bench_pg_server import Cluster

            cluster = Cluster(tempfile.mkdtemp(prefix="aidememo-bench-http-pg."))
            note("starting a PostgreSQL 15 cluster (fsync=on, synchronous_commit=on)")
            cluster.start()
            database = cluster.url
        tokens = {ACTOR_A: secrets.token_hex(32), ACTOR_B: secrets.token_hex(32)}
        note(f"seeding {args.seed_facts} facts")
        epoch, head = seed(database, tokens, args.seed_facts)

        env = {**os.environ, "AIDEMEMO_HOME": str(home), "PYTHONUNBUFFERED": "1"}
        env.pop("AIDEMEMO_DATABASE_URL", None)
        py, me = sys.executable, str(Path(__file__).resolve())
        app_port, hello_port, adapter_port = free_port(), free_port(), free_port()
        if postgres:
            serve_argv = [py, "-m", "aidememo", "serve", "--port", str(app_port)]
            serve_argv += ["--workers", str(args.workers)]
            env["AIDEMEMO_DATABASE_URL"] = database  # keeps the URL out of the argv
            serve_argv += ["--artifact-root", str(tmp / "artifacts")]  # required with it
            how = f"aidememo serve --workers {args.workers} on PostgreSQL"
        elif importlib.util.find_spec("origin.serve_command") is not None:
            serve_argv = [py, "-m", "aidememo", "serve", "--port", str(app_port)]
            serve_argv += ["--database", database]
            how = "aidememo serve"
        else:
            serve_argv = [py, me, "--serve-app", str(database), "--port", str(app_port)]
            how = "origin.server.serve (no aidememo serve command in this tree)"
        note(f"starting the server ({how}) and the hello baselines")
        server = procs.start(serve_argv, tmp / "server.log", env)
        env.pop("AIDEMEMO_DATABASE_URL", None)
        hello = procs.start(
            [py, me, "--serve-hello", "raw", "--port", str(hello_port)], tmp / "hello.log", env
        )
        adapter = procs.start(
            [py, me, "--serve-hello", "adapter", "--port", str(adapter_port)],
            tmp / "adapter.log",
            env,
        )
        wait_ready(server, app_port, "/health", tmp / "server.log")
        wait_ready(hello, hello_port, "/hello", tmp / "hello.log")
        wait_ready(adapter, adapter_port, "/hello", tmp / "adapter.log")

        lua_args = LuaArgs(tokens[ACTOR_A], PROJECT, epoch, args.seed_facts, head, SESSION)
        run_id = secrets.token_hex(3)

        def measure(proc: subprocess.Popen[bytes], port: int, mode: str) -> dict[str, Any]:
            if args.warmup > 0:
                run_wrk(wrk, port, mode, args.warmup, lua_args, f"w{run_id}")
            note(f"wrk {mode}: {args.duration} s")
            # The server's whole process tree (its workers too); PostgreSQL only for the app.
            pg_pid = postmaster_pid(cluster.data) if cluster is not None else None
            split = CpuSplit(proc.pid, pg_pid if proc is server else None)
            raw = run_wrk(wrk, port, mode, args.duration, lua_args, f"m{run_id}")
            figures = wrk_figures(raw)
            cpu = split.per_request(figures["requests"])
            figures["cpu_us_per_req"] = cpu.pop("origin_cpu_us_per_req")
            figures.update(cpu)
            return figures

        # The baseline right before GET resource: the pair the ratio target compares.
        results: dict[str, dict[str, Any]] = {}
        results["hello"] = measure(hello, hello_port, "hello")
        results["get_resource"] = measure(server, app_port, "resource")
        results["post_facts"] = measure(server, app_port, "facts")
        results["get_changes"] = measure(server, app_port, "changes")
        results["get_search"] = measure(server, app_port, "search")
        results["adapter_hello"] = measure(adapter, adapter_port, "hello")

        note(f"handoff cycle: {args.cycles} cycles from a separate process")
        client = subprocess.run(
            [
                py,
                me,
                "--port",
                str(app_port),
                "--handoff-client",
                tokens[ACTOR_A],
                tokens[ACTOR_B],
                str(args.cycles),
                run_id,
            ],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
            env=env,
            cwd=ROOT,
        )
        handoff: dict[str, Any] = {}
        for line in client.stdout.splitlines():
            if line.startswith("HANDOFF_JSON "):
                handoff = json.loads(line[len("HANDOFF_JSON ") :])
        if not handoff:
            raise RuntimeError(f"handoff client failed:\n{client.stdout}\n{client.stderr}")

        if args.py_spy:
            where = {
                "facts": (server.pid, app_port),
                "resource": (server.pid, app_port),
                "changes": (server.pid, app_port),
                "search": (server.pid, app_port),
                "adapter_hello": (adapter.pid, adapter_port),
                "hello": (hello.pid, hello_port),
            }
            profile_runs(args, wrk, where, lua_args, run_id)

        server_rss = peak_rss_of(server.pid)
        hello_rss = peak_rss_of(hello.pid)
    finally:
        procs.stop_all()
        if cluster is not None:
            cluster.stop()
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            note(f"kept {tmp}")

    figures: dict[str, Any] = {}
    for name in ("post_facts", "get_resource", "get_changes", "get_search", "adapter_hello"):
        for key, value in results[name].items():
            figures[f"{name}_{key}"] = value
    for key, value in handoff.items():
        figures[f"handoff_{key}"] = value
    hello_rps = results["hello"]["rps"]
    figures["adapter_hello_ratio"] = round(results["adapter_hello"]["rps"] / hello_rps, 4)
    figures["server_peak_rss_mib"] = server_rss
    figures["bench_peak_rss_mib"] = peak_rss_mib()
    figures["load"] = f"wrk -t2 -c32 -d{args.duration}s --latency after {args.warmup} s warm-up"
    figures["seed_facts"] = args.seed_facts
    figures["changes_page"] = 1000
    figures["server"] = (
        f"aidememo serve --workers {args.workers}: uvicorn, PostgreSQL (fsync on)"
        if postgres
        else "aidememo serve: uvicorn, one process, SQLite synchronous=FULL"
    )
    figures["workers"] = args.workers
    figures["machine_load_1m"] = round(os.getloadavg()[0], 2)
    baseline = {f"hello_{key}": value for key, value in results["hello"].items()}
    baseline["hello_peak_rss_mib"] = hello_rss
    baseline["what"] = "hello-world JSON ASGI app, same uvicorn settings, same wrk command"
    post, get = results["post_facts"], results["get_resource"]
    targets = {
        "get_resource_ratio": target(get["rps"] / results["hello"]["rps"], ">= 0.4"),
        "post_facts_rps": target(post["rps"], ">= 2,500"),
        "post_facts_p99_ms": target(post["p99_ms"], "<= 30"),
    }
    emit("bench_http", figures, baseline, targets)
    return 0


def profile_runs(
    args: argparse.Namespace,
    wrk: str,
    targets: dict[str, tuple[int, int]],
    lua: LuaArgs,
    run_id: str,
) -> None:
    """Extra wrk runs (not reported) with py-spy recording the serving process; each writes
    `DIR/MODE.txt` (collapsed stacks) and prints where the samples fall to stderr."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    out_dir = Path(args.py_spy)
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in args.py_spy_modes.split(","):
        if name not in targets:
            raise RuntimeError(f"unknown --py-spy-modes entry {name!r}: use {sorted(targets)}")
        pid, port = targets[name]
        out = out_dir / f"{name}.txt"
        note(f"py-spy: {args.duration} s of {name} into {out}")
        argv = [spy, "record", "--pid", str(pid), "--duration", str(args.duration)]
        argv += ["--rate", "250", "--format", "raw", "--output", str(out), "--nonblocking"]
        if args.py_spy_gil:
            argv.append("--gil")  # only the thread holding the GIL: where the CPU goes
        recorder = subprocess.Popen(
            argv,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            time.sleep(1)
            mode = "hello" if name.endswith("hello") else name
            run_wrk(wrk, port, mode, args.duration, lua, f"p{run_id}{name[:2]}")
            recorder.wait(timeout=60)
        finally:
            if recorder.poll() is None:
                recorder.terminate()
                recorder.wait(timeout=10)
        if out.exists():
            note(summarize_profile(out))


def summarize_profile(path: Path, top: int = 15) -> str:
    """Self and inclusive shares of the functions in a py-spy raw (collapsed) profile."""
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not count_text.isdigit():
            continue
        count = int(count_text)
        total += count
        frames = stack.split(";")
        own[frames[-1]] += count
        for frame in set(frames):
            inclusive[frame] += count
    lines = [f"== {path.name}: {total} samples; self (function file:line):"]
    lines += [f"  {100 * n / total:5.1f}%  {f}" for f, n in own.most_common(top)]
    lines.append("  inclusive:")
    lines += [f"  {100 * n / total:5.1f}%  {f}" for f, n in inclusive.most_common(top * 2)]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
