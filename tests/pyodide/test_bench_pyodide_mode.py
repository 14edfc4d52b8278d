"""scripts/bench_edge_overhead.py --pyodide runs end to end and prints its JSON line (tiny
sizes): the Pyodide edge (tests/pyodide/edge_runner.mjs --serve) beside the origin on SQLite."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.node import node

pytestmark = pytest.mark.pyodide

REPO = Path(__file__).resolve().parents[2]
SHAPES = ("get_resource", "search", "get_changes", "post_fact")


def test_deploy9_bench_edge_overhead_runs_the_built_bundle(tmp_path: Path) -> None:
    if node() is None or not (REPO / "node_modules" / "pyodide").is_dir():
        pytest.skip("no node or npm pyodide: run scripts/test")
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "bench_edge_overhead.py"), "--pyodide",
         "--requests", "5", "--warmup", "2", "--seed-facts", "3", "--tmp-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=240, check=False, cwd=REPO,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = json.loads(proc.stdout.strip().splitlines()[-1])
    assert line["name"] == "bench_edge_overhead_pyodide"
    for shape in SHAPES:
        assert line["figures"][f"{shape}_edge_p50_ms"] > 0
        assert line["baseline"][f"{shape}_origin_p50_ms"] > 0
        assert line["targets"][f"{shape}_edge_over_origin_p50"]["goal"] == "<= 4"
