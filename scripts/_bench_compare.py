"""Same-run A/B of the origin against another commit: `--compare-ref GITREF` of
`scripts/bench_http.py` and `scripts/bench_pg.py --workers N`.

The other commit is checked out into a temporary `git worktree` (removed afterwards) and its
`aidememo serve` runs from there (the working directory is that tree, so `python -m aidememo`
imports that tree's `aidememo` and `origin`), with this checkout's interpreter and packages.
Both sides get the same load in rounds that alternate which side goes first, so the shared
machine's drifting load hits both alike; `cpu_us_per_req` (the server's CPU per request, from
`/proc`) moves far less with that load than requests/s, so a change is judged by it first.
`bench_http.py --compare-ref` runs both servers with the semantic indexer off unless
`--compare-indexer on`: the request path is compared, and with the `semantic` extra installed
the indexer's embedding (its own figure, `bench_http.py --indexer`) would count in the
server's CPU on one side only when the other commit has no indexer.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from _bench_common import note
from _bench_http_tools import ROOT


@contextmanager
def other_tree(ref: str) -> Iterator[Path]:
    """A detached worktree of `ref`, removed on exit."""
    parent = Path(tempfile.mkdtemp(prefix="aidememo-bench-ref."))
    tree = parent / "tree"
    git = ["git", "-C", str(ROOT)]
    subprocess.run([*git, "worktree", "add", "--detach", str(tree), ref], check=True,
                   capture_output=True)  # fmt: skip
    commit = subprocess.run(
        [*git, "rev-parse", "--short", ref], check=True, capture_output=True, text=True
    ).stdout.strip()
    note(f"comparing against {ref} ({commit}) in a temporary worktree")
    try:
        yield tree
    finally:
        subprocess.run([*git, "worktree", "remove", "--force", str(tree)], check=False,
                       capture_output=True)  # fmt: skip
        shutil.rmtree(parent, ignore_errors=True)


def order(round_no: int) -> tuple[str, str]:
    """Which side runs first in round `round_no`: they alternate."""
    return ("after", "before") if round_no % 2 == 0 else ("before", "after")


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over the rounds of one side's runs, and the per-round values."""
    out: dict[str, Any] = {}
    for key in ("rps", "p99_ms", "cpu_us_per_req"):
        values = [float(run[key]) for run in runs if run.get(key) is not None]
        if values:
            out[key] = round(statistics.median(values), 2)
            out[f"{key}_rounds"] = [round(v, 2) for v in values]
    return out


def ratio(after: float | None, before: float | None) -> float | None:
    """after / before, rounded; None without both."""
    if not after or not before:
        return None
    return round(after / before, 3)


def compare_http(args: Any, me: str) -> int:
    """`bench_http.py --compare-ref REF`: this checkout's `aidememo serve` and REF's on SQLite,
    each on a home seeded alike, driven by the same wrk runs (GET resource, POST facts) in
    `--rounds` alternating rounds, with the hello baseline measured once per round."""
    import os
    import secrets
    import sys

    from _bench_common import emit, free_port, target
    from _bench_cpu import CpuSplit
    from _bench_http_tools import LuaArgs, Processes, ensure_wrk, run_wrk, wait_ready, wrk_figures
    from bench_http import ACTOR_A, ACTOR_B, PROJECT, SESSION, seed

    wrk, procs = ensure_wrk(), Processes()
    tmp = Path(tempfile.mkdtemp(prefix="bench_http_compare_"))
    py = sys.executable
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    hello_runs: list[dict[str, Any]] = []
    run_id = secrets.token_hex(3)
    try:
        with other_tree(args.compare_ref) as tree:
            servers: dict[str, tuple[Any, int, LuaArgs]] = {}
            for side, cwd in (("after", ROOT), ("before", tree)):
                home = tmp / side
                home.mkdir(mode=0o700)
                database = str(home / "ssot.sqlite")
                tokens = {ACTOR_A: secrets.token_hex(32), ACTOR_B: secrets.token_hex(32)}
                note(f"{side}: seeding {args.seed_facts} facts")
                epoch, head = seed(database, tokens, args.seed_facts)
                port = free_port()
                env = {**os.environ, "AIDEMEMO_HOME": str(home), "PYTHONUNBUFFERED": "1"}
                env["AIDEMEMO_INDEXER"] = args.compare_indexer  # an older tree ignores it
                env.pop("AIDEMEMO_DATABASE_URL", None)
                argv = [py, "-m", "aidememo", "serve", "--port", str(port)]
                log = tmp / f"{side}.log"
                proc = procs.start([*argv, "--database", database], log, env, cwd=cwd)
                wait_ready(proc, port, "/health", log)
                lua = LuaArgs(tokens[ACTOR_A], PROJECT, epoch, args.seed_facts, head, SESSION)
                servers[side] = (proc, port, lua)
            hello_port = free_port()
            hello_log = tmp / "hello.log"
            hello = procs.start([py, me, "--serve-hello", "raw", "--port", str(hello_port)],
                                hello_log, {**os.environ, "PYTHONUNBUFFERED": "1"})  # fmt: skip
            wait_ready(hello, hello_port, "/hello", hello_log)

            def measure(proc: Any, port: int, mode: str, lua: LuaArgs) -> dict[str, Any]:
                if args.warmup > 0:
                    run_wrk(wrk, port, mode, args.warmup, lua, f"w{run_id}")
                split = CpuSplit(proc.pid, None)
                figures = wrk_figures(run_wrk(wrk, port, mode, args.duration, lua, f"m{run_id}"))
                figures["cpu_us_per_req"] = split.per_request(figures["requests"]).pop(
                    "origin_cpu_us_per_req"
                )
                return figures

            for r in range(args.rounds):
                note(f"round {r + 1} of {args.rounds}")
                hello_runs.append(measure(hello, hello_port, "hello", servers["after"][2]))
                for mode in args.modes.split(","):
                    for side in order(r):
                        proc, port, lua = servers[side]
                        runs.setdefault((side, mode), []).append(measure(proc, port, mode, lua))
    finally:
        procs.stop_all()
        shutil.rmtree(tmp, ignore_errors=True)

    figures: dict[str, Any] = {"compare_ref": args.compare_ref, "rounds": args.rounds}
    figures["indexer"] = args.compare_indexer
    for (side, mode), side_runs in runs.items():
        for key, value in summary(side_runs).items():
            figures[f"{side}_{mode}_{key}"] = value
    hello_figures = summary(hello_runs)
    for side in ("after", "before") if "resource" in args.modes else ():  # over its hello
        ratios = [
            float(run["rps"]) / float(base["rps"])
            for run, base in zip(runs[(side, "resource")], hello_runs, strict=True)
        ]
        figures[f"{side}_get_resource_ratio"] = round(statistics.median(ratios), 4)
        figures[f"{side}_get_resource_ratio_rounds"] = [round(r, 4) for r in ratios]
    for key in ("rps", "p99_ms", "cpu_us_per_req"):
        for mode in ("resource", "facts"):
            figures[f"{mode}_{key}_after_over_before"] = ratio(
                figures.get(f"after_{mode}_{key}"), figures.get(f"before_{mode}_{key}")
            )
    figures["load"] = f"wrk -t2 -c32 -d{args.duration}s after {args.warmup} s warm-up, per run"
    figures["note"] = "2 shared cores: rps and p99 move with other work; cpu_us_per_req less"
    for mode in args.modes.split(","):  # each round's after over the same round's before
        figures[f"{mode}_cpu_ratio_rounds"] = [
            ratio(float(a["cpu_us_per_req"]), float(b["cpu_us_per_req"]))
            for a, b in zip(runs[("after", mode)], runs[("before", mode)], strict=True)
        ]
    resource_ratio = ratio(
        figures.get("after_get_resource_ratio"), figures.get("before_get_resource_ratio")
    )

    wanted = {
        "post_facts_rps_after_over_before": (figures.get("facts_rps_after_over_before"), ">= 0.95"),
        "post_facts_p99_after_over_before": (
            figures.get("facts_p99_ms_after_over_before"),
            "<= 1.05",
        ),
        "post_facts_cpu_after_over_before": (
            figures.get("facts_cpu_us_per_req_after_over_before"),
            "<= 1.05",
        ),
        "get_resource_ratio_after_over_before": (resource_ratio, ">= 0.95"),
        "get_resource_cpu_after_over_before": (
            figures.get("resource_cpu_us_per_req_after_over_before"),
            "<= 1.05",
        ),
    }
    # a mode left out of --modes has no figure, so no target either
    targets = {name: target(v, text) for name, (v, text) in wanted.items() if v is not None}
    baseline = {f"hello_{key}": value for key, value in hello_figures.items()}
    baseline["what"] = f"the same runs against {args.compare_ref}; hello-world once per round"
    emit("bench_http_compare", figures, baseline, targets)
    return 0
