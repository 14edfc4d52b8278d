"""scripts/bench_latency.py against `aidememo serve --artifact-backend s3` on SeaweedFS: its
artifact operations go through grants when the server offers them (the shape, not timings)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.origin.test_serve_process import ServeProcess
from tests.s3 import S3Endpoint, fresh_prefix, s3_endpoint
from tests.s3bodies.test_s3_serve import _aws, _flags, home, token

__all__ = ["home", "token"]
SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_latency.py"


@pytest.fixture
def s3() -> S3Endpoint:
    return s3_endpoint()


def test_grant8_bench_latency_measures_grant_transfers(
    tmp_path: Path, home: Path, token: str, s3: S3Endpoint
) -> None:
    server = ServeProcess(home, tmp_path / "serve.log", *_flags(s3, fresh_prefix()),
                          environ=_aws(s3))  # fmt: skip
    try:
        token_file = tmp_path / "writer.token"
        token_file.write_text(token + "\n")
        proc = subprocess.run(
            [sys.executable, str(SCRIPT), "--base-url", server.url, "--token-file",
             str(token_file), "--project", "demo", "--requests", "3", "--cold", "1"],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
    finally:
        server.kill()
    assert proc.returncode == 0, proc.stderr
    figures = json.loads(proc.stdout.strip().splitlines()[-1])["figures"]
    assert figures["artifact_mode"] == "grant"
    for op in ("artifact_put", "artifact_get"):
        assert (figures[f"{op}_cold_n"], figures[f"{op}_warm_n"]) == (1, 3)
        assert isinstance(figures[f"{op}_warm_p50_ms"], float)
    assert "X-Amz-Signature" not in proc.stderr + server.stderr()
