"""scripts/bench_edge_overhead.py runs end to end and prints its JSON line (tiny sizes)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_bench1_bench_edge_overhead_prints_the_design_json_line(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "scripts" / "bench_edge_overhead.py"),
            "--requests",
            "20",
            "--seed-facts",
            "5",
            "--blocks",
            "2",
            "--tmp-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        cwd=REPO,
    )
    line = json.loads(proc.stdout.strip().splitlines()[-1])
    assert line["name"] == "bench_edge_overhead"
    assert set(line) == {"name", "figures", "baseline", "targets"}
    for key in ("get_resource_translation_overhead", "post_facts_translation_overhead"):
        assert line["targets"][key]["goal"] == "<= 0.15"
        assert isinstance(line["targets"][key]["met"], bool)
    assert line["baseline"]["get_direct_p50_ms"] > 0
