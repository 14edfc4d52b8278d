#!/usr/bin/env python3
"""Time agent commands from process start to exit against a loopback `aidememo serve`.

Each round runs, as separate processes and interleaved so load on the machine falls on all
alike: `python -c pass` (the interpreter's own start), a bare `httpx.get` of `/health` (the
start of the HTTP stack every agent command needs), `aidememo --help`, `aidememo fact add`
and `aidememo handoff accept` (a fresh pending handoff each round, sent beforehand). The
server runs on SQLite in a temporary home with two members logged in as profiles. Figures
are the p50 and best wall time per command and the children's CPU time per run (user +
system, less disturbed than wall time by other processes on a shared machine). Bytecode
caching is on for the children (`PYTHONDONTWRITEBYTECODE` removed, one warm-up round), as in
an installed package.

    scripts/bench_cli_startup.py [--rounds 15]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from _bench_common import emit, free_port, note, percentile, target

AIDEMEMO = str(Path(sys.executable).with_name("aidememo"))
PROJECT = "bench"


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIDEMEMO_")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["AIDEMEMO_HOME"] = str(home)
    return env


def _run(argv: list[str], env: dict[str, str]) -> tuple[int, float]:
    """Wall ns and CPU seconds (user + system) of one child run to exit."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter_ns()
    done = subprocess.run(argv, env=env, capture_output=True, check=False)
    wall = time.perf_counter_ns() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{argv} failed: {done.stderr.decode(errors='replace')}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def _setup(tmp: Path) -> tuple[subprocess.Popen[bytes], str, dict[str, str]]:
    """A served SQLite project with members `a` and `b`, logged in as profiles a and b."""
    home = tmp / "home"
    env = _env(home)
    database = str(tmp / "ssot.sqlite")
    for actor in ("a", "b"):
        token = str(tmp / f"{actor}.token")
        subprocess.run([AIDEMEMO, "token", "new", "--out", token], env=env, check=True,
                       capture_output=True)  # fmt: skip
        subprocess.run([AIDEMEMO, "bootstrap", "--database", database, "--tenant-id", "t",
                        "--project-id", PROJECT, "--actor-id", actor, "--token-file", token],
                       env=env, check=True, capture_output=True)  # fmt: skip
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [AIDEMEMO, "serve", "--database", database, "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                break
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline or server.poll() is not None:
            server.kill()
            raise SystemExit("aidememo serve did not start")
        time.sleep(0.05)
    for actor in ("a", "b"):
        subprocess.run([AIDEMEMO, "auth", "login", "--profile", actor, "--url", url,
                        "--project-id", PROJECT, "--token-file", str(tmp / f"{actor}.token")],
                       env=env, check=True, capture_output=True)  # fmt: skip
    subprocess.run([AIDEMEMO, "session", "new", "bench", "--id", "s1", "--profile", "a"],
                   env=env, check=True, capture_output=True)  # fmt: skip
    return server, url, env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-cli-") as tmp_name:
        server, url, env = _setup(Path(tmp_name))
        try:
            figures = _measure(url, env, args.rounds)
        finally:
            server.terminate()
            server.wait(timeout=30)
    py, get = figures.pop("python_pass"), figures.pop("httpx_get")
    baseline = {
        "python_pass_p50_ms": py["p50_ms"],
        "python_pass_cpu_ms": py["cpu_ms"],
        "httpx_get_p50_ms": get["p50_ms"],
        "httpx_get_cpu_ms": get["cpu_ms"],
    }
    flat = {f"{name}_{key}": value for name, row in figures.items() for key, value in row.items()}
    flat["rounds"] = args.rounds
    flat["note"] = "wall time on a shared 2-core machine is noisy; cpu_ms is steadier"
    targets = {
        "help_p50_ms": target(figures["help"]["p50_ms"], "<= 80"),
        "fact_add_p50_ms": target(figures["fact_add"]["p50_ms"], "<= 150"),
        "handoff_accept_p50_ms": target(figures["handoff_accept"]["p50_ms"], "<= 150"),
    }
    emit("cli_startup", flat, baseline, targets)


def _measure(url: str, env: dict[str, str], rounds: int) -> dict[str, dict[str, float]]:
    py = sys.executable
    get = f"import httpx; httpx.get({url + '/health'!r})"
    walls: dict[str, list[int]] = {}
    cpus: dict[str, list[float]] = {}
    for round_ in range(rounds + 1):  # round 0 warms the bytecode cache and is dropped
        handoff = f"h{round_}"
        subprocess.run([AIDEMEMO, "handoff", "send", "--session", "s1", "--to", "b", "--id",
                        handoff, "--profile", "a"], env=env, check=True,
                       capture_output=True)  # fmt: skip
        commands = {
            "python_pass": [py, "-c", "pass"],
            "httpx_get": [py, "-c", get],
            "help": [AIDEMEMO, "--help"],
            "fact_add": [
                AIDEMEMO,
                "fact",
                "add",
                "--session",
                "s1",
                f"round {round_}",
                "--profile",
                "a",
            ],
            "handoff_accept": [AIDEMEMO, "handoff", "accept", handoff, "--profile", "b"],
        }
        for name, argv in commands.items():
            wall, cpu = _run(argv, env)
            if round_:
                walls.setdefault(name, []).append(wall)
                cpus.setdefault(name, []).append(cpu)
        if round_:
            note(f"round {round_}/{rounds}")
    out: dict[str, dict[str, float]] = {}
    for name, samples in walls.items():
        ordered = sorted(samples)
        out[name] = {
            "p50_ms": round(percentile(ordered, 50) / 1e6, 1),
            "min_ms": round(ordered[0] / 1e6, 1),
            "cpu_ms": round(sorted(cpus[name])[len(ordered) // 2] * 1e3, 1),
        }
    return out


if __name__ == "__main__":
    main()
