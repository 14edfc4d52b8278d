"""`bench_edge_overhead.py --pyodide`: the edge's real code in real Pyodide beside the origin.

Two servers on loopback, started here and stopped by pid:
- edge: `tests/pyodide/edge_runner.mjs --serve`, the bundle scripts/build_edge.py makes (with
  the vendored Workers SDK) under npm `pyodide` 314.0.7 on the pinned Node, behind the Pyodide
  tier's runtime stand-ins (Durable Object SQL on better-sqlite3, RPC by structured clone);
  Node's HTTP server stands where workerd's front is;
- origin: `aidememo serve` on a SQLite file (one process, its default dispatch).
Both are bootstrapped through their admin route with the same tenant, project, actor and
token, and seeded alike (a session and `--seed-facts` facts). One client on one keep-alive
connection per server sends, per round, each shape to the origin and then to the edge (the
order flips every round), `--warmup` rounds first, then `--requests` measured ones:
`GET resource` (a seeded fact), `search` (a term in every seeded fact, limit 20, `mode=lexical`:
the origin's default `auto` would embed the query with its bundled model while the edge here
has no Workers AI binding, so only the lexical path compares like with like), `GET changes`
(after_seq 0, limit 20), `POST fact` (a new fact each). Reported: p50 and p95 per shape and
side, and the edge/origin ratio of p50s, whose target is at most 4. Wall time on a shared
2-core machine: noisy; the ratio of the same run is what to read.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path
from typing import Any

from _bench_common import emit, free_port, latency_summary, note, target

REPO = Path(__file__).resolve().parent.parent
RUNNER = REPO / "tests" / "pyodide" / "edge_runner.mjs"
TENANT, PROJECT, ACTOR = "t_bench", "p_bench", "a_bench"
TOKEN, ADMIN = "bench-token-0123456789abcdef", "bench-admin-token-0123456789abcdef"
P = f"/v1/projects/{PROJECT}"
SHAPES = ("get_resource", "search", "get_changes", "post_fact")


class Side:
    """One server and one keep-alive connection to it."""

    def __init__(self, name: str, port: int) -> None:
        self.name = name
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def send(
        self, method: str, path: str, body: Any = None, token: str = TOKEN
    ) -> tuple[int, Any, int]:
        """`(status, decoded body, elapsed ns)` of one request."""
        headers = {"authorization": f"Bearer {token}"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["content-type"] = "application/json"
        start = time.perf_counter_ns()
        self.conn.request(method, path, body=data, headers=headers)
        response = self.conn.getresponse()
        raw = response.read()
        elapsed = time.perf_counter_ns() - start
        return response.status, json.loads(raw) if raw else None, elapsed


def _edge_config(tmp: Path) -> Path:
    with (REPO / "wrangler.toml").open("rb") as f:
        conf = tomllib.load(f)
    config = {
        "main": "worker/entry.py",
        "durable_objects": conf["durable_objects"]["bindings"],
        "ratelimits": [
            {"name": rl["name"], "limit": 10**9, "period": 60} for rl in conf["ratelimits"]
        ],
        "r2_buckets": [],
        "vars": {k: str(v) for k, v in conf.get("vars", {}).items()},
        "secrets": {"ADMIN_TOKEN_SHA256": hashlib.sha256(ADMIN.encode()).hexdigest()},
    }
    path = tmp / "edge.json"
    path.write_text(json.dumps(config))
    return path


def _node() -> str:
    sys.path.insert(0, str(REPO))
    from tests.node import node

    found = node()
    if found is None:
        raise SystemExit("no node: run scripts/test once (installs the pinned Node and npm ci)")
    return found


def _start_edge(tmp: Path, procs: list[subprocess.Popen[bytes]]) -> int:
    subprocess.run(
        [sys.executable, str(REPO / "scripts" / "build_edge.py"), "--out", str(tmp / "build"),
         "--vendor", str(tmp / "python_modules")],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    vendor, config = tmp / "python_modules", _edge_config(tmp)
    args = [_node(), str(RUNNER), "--bundle", str(tmp / "build"), "--vendor", str(vendor),
            "--config", str(config), "--serve", "0"]  # fmt: skip
    log = (tmp / "edge.log").open("wb")
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=log, cwd=REPO)
    procs.append(proc)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        raise SystemExit(f"the edge runner exited:\n{(tmp / 'edge.log').read_text()[-3000:]}")
    return int(json.loads(line)["listening"])


def _start_origin(tmp: Path, procs: list[subprocess.Popen[bytes]]) -> int:
    port = free_port()
    (tmp / "admin.token").write_text(ADMIN)
    args = [sys.executable, "-m", "aidememo", "serve", "--database", str(tmp / "origin.sqlite"),
            "--port", str(port), "--admin-token-file", str(tmp / "admin.token"),
            "--rate-limit", "off"]  # fmt: skip
    log = (tmp / "origin.log").open("wb")
    procs.append(subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, cwd=REPO))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/health")
            if conn.getresponse().status == 200:
                return port
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"the origin did not start:\n{(tmp / 'origin.log').read_text()[-3000:]}")


def _check(side: Side, method: str, path: str, body: Any = None, token: str = TOKEN) -> Any:
    status, answer, _ = side.send(method, path, body, token)
    if status != 200:
        raise SystemExit(f"{side.name} {method} {path}: HTTP {status} {answer}")
    return answer


def _seed(side: Side, facts: int) -> str:
    digest = hashlib.sha256(TOKEN.encode()).hexdigest()
    boot = {"tenant_id": TENANT, "project_id": PROJECT, "actor_id": ACTOR, "token_sha256": digest}
    _check(side, "POST", "/v1/admin/bootstrap", boot, token=ADMIN)
    epoch = str(_check(side, "GET", f"{P}/identity")["project_epoch"])
    session = {"command_id": "cmd_s1", "payload": {"session_id": "s1", "topic": "bench"}}
    _check(side, "POST", f"{P}/sessions", session)
    for n in range(facts):
        _check(side, "POST", f"{P}/facts", _fact(n, "seed"))
    return epoch


def _fact(n: int, tag: str) -> dict[str, Any]:
    content = f"benchmark fact {n} {tag} about the cache timeout"
    return {
        "command_id": f"cmd_{tag}_{n}",
        "payload": {"fact_id": f"f_{tag}_{n}", "session_id": "s1", "content": content},
    }


def _request(shape: str, n: int, epoch: str, seeded: int) -> tuple[str, str, Any]:
    if shape == "get_resource":
        return "GET", f"{P}/resources/fact/f_seed_{n % min(10, seeded)}", None
    if shape == "search":
        return "GET", f"{P}/search?q=cache&limit=20&mode=lexical", None
    if shape == "get_changes":
        return "GET", f"{P}/changes?project_epoch={epoch}&after_seq=0&limit=20", None
    return "POST", f"{P}/facts", _fact(n, "bench")


def run(requests: int, warmup: int, seed_facts: int, tmp_dir: Path | None) -> int:
    seed_facts = max(1, seed_facts)
    procs: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory(prefix="bench-edge-pyodide-", dir=tmp_dir) as tmp_name:
        tmp = Path(tmp_name)
        try:
            sides = [
                Side("origin", _start_origin(tmp, procs)),
                Side("edge", _start_edge(tmp, procs)),
            ]
            epochs = {side.name: _seed(side, seed_facts) for side in sides}
            samples: dict[str, dict[str, list[int]]] = {
                side.name: {shape: [] for shape in SHAPES} for side in sides
            }
            note(f"pyodide mode: {warmup} warm-up and {requests} measured rounds")
            for n in range(warmup + requests):
                order = sides if n % 2 == 0 else sides[::-1]
                for shape in SHAPES:
                    for side in order:
                        method, path, body = _request(shape, n, epochs[side.name], seed_facts)
                        status, answer, elapsed = side.send(method, path, body)
                        if status != 200:
                            raise SystemExit(f"{side.name} {shape}: HTTP {status} {answer}")
                        if n >= warmup:
                            samples[side.name][shape].append(elapsed)
            return _report(samples, requests, warmup, seed_facts)
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.terminate()
                    try:
                        proc.wait(timeout=20)
                    except subprocess.TimeoutExpired:
                        proc.kill()


def _report(
    samples: dict[str, dict[str, list[int]]], requests: int, warmup: int, seed_facts: int
) -> int:
    figures: dict[str, Any] = {"requests": requests, "warmup": warmup, "seed_facts": seed_facts,
                               "cpus": os.cpu_count()}  # fmt: skip
    baseline: dict[str, Any] = {}
    targets: dict[str, Any] = {}
    for shape in SHAPES:
        edge = latency_summary(samples["edge"][shape], f"{shape}_edge")
        origin = latency_summary(samples["origin"][shape], f"{shape}_origin")
        figures.update({k: v for k, v in edge.items() if k.endswith(("p50_ms", "p95_ms"))})
        baseline.update({k: v for k, v in origin.items() if k.endswith(("p50_ms", "p95_ms"))})
        ratio = edge[f"{shape}_edge_p50_ms"] / origin[f"{shape}_origin_p50_ms"]
        figures[f"{shape}_edge_over_origin_p50"] = round(ratio, 2)
        targets[f"{shape}_edge_over_origin_p50"] = target(ratio, "<= 4")
    emit("bench_edge_overhead_pyodide", figures, baseline, targets)
    return 0
