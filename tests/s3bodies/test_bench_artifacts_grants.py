"""`scripts/bench_artifacts.py --grants` runs end to end on the test S3 server (GRANT-3): grant
transfers and the same run's raw boto3 baseline in its one JSON line (tiny sizes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.s3 import s3_endpoint

REPO = Path(__file__).resolve().parents[2]


def test_grant3_bench_artifacts_grants_prints_its_json_line() -> None:
    s3_endpoint()  # skips (fails under CI) without the test S3 server
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "bench_artifacts.py"), "--grants",
         "--sizes", "4096", "--rounds", "2"],
        capture_output=True, text=True, timeout=240, check=True, env=dict(os.environ),
    )  # fmt: skip
    line = json.loads(proc.stdout.strip().splitlines()[-1])
    assert line["name"] == "bench_artifacts_grants"
    for name in ("grant_put", "grant_transfer", "download", "grant_get"):
        for stat in ("p50", "p95", "p99"):
            assert f"4kib_{name}_{stat}_ms" in line["figures"], (name, stat)
        assert line["figures"][f"4kib_{name}_mib_s"] > 0
    for name in ("boto3_put", "boto3_get"):
        assert f"4kib_{name}_p50_ms" in line["baseline"] and line["baseline"][f"4kib_{name}_mib_s"]
