"""scripts/bench_latency.py against a local origin: the shape of its JSON line, not timings.

The origin is `aidememo serve` on a temporary AIDEMEMO_HOME with two writers bootstrapped by
the CLI, so the handoff cycle runs too; a few requests per operation keep it short.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "bench_latency.py"
OPERATIONS = ("post_facts", "get_resource", "get_search", "get_changes")
STATS = ("p50", "p95", "p99", "max", "mean")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _cli(env: dict[str, str], *args: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "aidememo", *args],
        cwd=REPO,
        env=env,
        check=True,
        capture_output=True,
        timeout=60,
    )


def _healthy(port: int) -> bool:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
    try:
        conn.request("GET", "/health")
        return conn.getresponse().status == 200
    except OSError:
        return False
    finally:
        conn.close()


@pytest.fixture
def origin(tmp_path: Path) -> Iterator[tuple[str, Path, Path]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIDEMEMO_")}
    env["AIDEMEMO_HOME"] = str(tmp_path / "home")
    tokens = []
    for actor in ("bench-writer", "bench-receiver"):
        token = tmp_path / f"{actor}.token"
        _cli(env, "token", "new", "--out", str(token))
        bootstrap = ["bootstrap", "--tenant-id", "local", "--project-id", "demo"]
        _cli(env, *bootstrap, "--actor-id", actor, "--token-file", str(token))
        tokens.append(token)
    port = _free_port()
    log = (tmp_path / "serve.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "aidememo", "serve", "--port", str(port)],
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=log,
    )
    try:
        deadline = time.monotonic() + 20
        while not _healthy(port):
            assert proc.poll() is None, (tmp_path / "serve.log").read_text()
            assert time.monotonic() < deadline, "aidememo serve did not become healthy"
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}", tokens[0], tokens[1]
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        log.close()


def _bench(*words: str) -> subprocess.CompletedProcess[str]:
    """Run the script; each argument is split on spaces (temporary paths have none)."""
    args = [arg for chunk in words for arg in chunk.split()]
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_bench1_bench_latency_prints_the_design_json_line(origin: tuple[str, Path, Path]) -> None:
    url, writer, receiver = origin
    proc = _bench(
        f"--base-url {url} --token-file {writer} --receiver-token-file {receiver}",
        "--project demo --requests 4 --cold 2 --cycles 2",
    )
    assert proc.returncode == 0, proc.stderr
    line = json.loads(proc.stdout.strip().splitlines()[-1])
    assert set(line) == {"name", "figures", "baseline", "targets"}
    assert line["name"] == "bench_latency"
    figures, baseline = line["figures"], line["baseline"]
    for op in OPERATIONS:
        for kind, count in (("cold", 2), ("warm", 4)):
            assert figures[f"{op}_{kind}_n"] == count
            for stat in STATS:
                assert isinstance(figures[f"{op}_{kind}_{stat}_ms"], float), (op, kind, stat)
        assert isinstance(figures["ratios_to_health_warm_p50"][op], float)
    for step in ("send", "accept", "fact", "return", "cycle"):
        assert isinstance(figures[f"handoff_{step}_p50_ms"], float)
    assert figures["handoff_cycles"] == 2
    for op in ("artifact_put", "artifact_get"):  # local bodies: the direct routes
        assert (figures[f"{op}_cold_n"], figures[f"{op}_warm_n"]) == (2, 4)
        assert isinstance(figures[f"{op}_warm_p50_ms"], float)
    assert figures["artifact_mode"] == "direct"
    assert (baseline["health_cold_n"], baseline["health_warm_n"]) == (2, 4)
    assert isinstance(baseline["health_warm_p99_ms"], float)
    assert isinstance(line["targets"], dict)


def test_bench1_bench_latency_refuses_a_bad_token(
    origin: tuple[str, Path, Path], tmp_path: Path
) -> None:
    url, _, _ = origin
    bad = tmp_path / "bad.token"
    bad.write_text("not-a-token\n")
    proc = _bench(f"--base-url {url} --token-file {bad} --requests 1")
    assert proc.returncode == 1
    assert "401" in proc.stderr


def test_bench1_live2_bench_latency_live_prints_the_design_json_line(
    origin: tuple[str, Path, Path],
) -> None:
    """`--live`: commit-to-delivery latency of the live feed, every commit
    delivered to every subscriber exactly once and in order."""
    url, writer, _ = origin
    proc = _bench(
        f"--base-url {url} --token-file {writer} --project demo",
        "--live --live-subscribers 1,3 --live-commits 5 --live-interval-ms 0",
    )
    assert proc.returncode == 0, proc.stderr
    line = json.loads(proc.stdout.strip().splitlines()[-1])
    assert set(line) == {"name", "figures", "baseline", "targets"}
    assert line["name"] == "bench_latency_live"
    figures = line["figures"]
    for n in (1, 3):
        for stat in STATS:
            assert isinstance(figures[f"live_{n}_{stat}_ms"], float), (n, stat)
        assert figures[f"live_{n}_expected"] == figures[f"live_{n}_received"] == 5 * n
        assert figures[f"live_{n}_samples"] == 5 * n
        assert figures[f"live_{n}_lost"] == figures[f"live_{n}_duplicated"] == 0
        assert figures[f"live_{n}_out_of_order"] == 0
    assert line["baseline"]["post_ack_n"] == 10
    assert line["targets"]["lost_or_duplicated"]["met"] is True
    assert "live_100_p95_ms" not in line["targets"]  # no round of 100 subscribers here


def test_bench1_bench_latency_client_prints_the_design_json_line(
    origin: tuple[str, Path, Path],
) -> None:
    """`--client`: the operations through aidememo.client, raw HTTP of the same run as the
    baseline, and the p50 overhead per operation as targets (the shape, not the figures)."""
    url, writer, receiver = origin
    proc = _bench(
        f"--base-url {url} --token-file {writer} --receiver-token-file {receiver}",
        "--project demo --client --requests 3 --cycles 2",
    )
    assert proc.returncode == 0, proc.stderr
    line = json.loads(proc.stdout.strip().splitlines()[-1])
    assert set(line) == {"name", "figures", "baseline", "targets"}
    assert line["name"] == "bench_latency_client"
    figures, baseline, targets = line["figures"], line["baseline"], line["targets"]
    for op in OPERATIONS:
        for side in (figures, baseline):
            assert side[f"{op}_warm_n"] == 3
            assert isinstance(side[f"{op}_client_cpu_us"], float)
            for stat in STATS:
                assert isinstance(side[f"{op}_warm_{stat}_ms"], float), (op, stat)
        overhead = targets[f"{op}_p50_overhead_ms"]
        assert overhead["goal"] == "<= 0.3" and isinstance(overhead["met"], bool)
    for step in ("send", "accept", "fact", "return", "cycle"):
        assert isinstance(figures[f"handoff_{step}_p50_ms"], float)
        assert isinstance(baseline[f"handoff_{step}_p50_ms"], float)
    assert figures["handoff_cycles"] == 2


def test_mcp2_bench_latency_mcp_prints_the_design_json_line(
    origin: tuple[str, Path, Path],
) -> None:
    """`--mcp`: each operation as its MCP tool call, the REST route of the same run as the
    baseline, and the p50 overhead per operation as targets."""
    url, writer, _ = origin
    proc = _bench(f"--base-url {url} --token-file {writer}", "--project demo --mcp --requests 3")
    assert proc.returncode == 0, proc.stderr
    line = json.loads(proc.stdout.strip().splitlines()[-1])
    assert line["name"] == "bench_latency_mcp"
    for op in OPERATIONS:
        for side in (line["figures"], line["baseline"]):
            for stat in STATS:
                assert isinstance(side[f"{op}_warm_{stat}_ms"], float), (op, stat)
        assert line["targets"][f"{op}_p50_overhead_ms"]["goal"] == "<= 0.5"
