"""Pyodide tier, edge grants (SPEC.md GRANT-5): the bundle wrangler uploads, under npm pyodide
with the real Workers SDK (tests/pyodide/edge_runner.mjs), configured with R2 S3 secrets and
`R2_S3_ENDPOINT` naming the test SeaweedFS: grants are signed with the stdlib in Pyodide, the
Worker HEADs and GETs the store through the SDK's `fetch`, and the driver
(tests/pyodide/grant_driver.py) sends the grants' requests with the same `fetch`."""

from __future__ import annotations

import json
import secrets
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.pyodide.test_edge_pyodide import (
    HERE,
    RUNNER,
    _edge_config,
    _require_tools,
    bundle,  # the session's build, a fixture
    bundle_args,
)
from tests.s3 import s3_endpoint

pytestmark = pytest.mark.pyodide
__all__ = ["bundle"]

STEPS = (
    "bootstrap",
    "reserve_offers_grants",
    "upload_through_the_grant",
    "publish_heads_through_s3",
    "download_route_streams_from_s3",
    "download_grant_reads_the_store",
)


@pytest.fixture(scope="module")
def grant_run(bundle: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    s3 = s3_endpoint()
    node = _require_tools()
    admin = secrets.token_hex(32)
    params: dict[str, Any] = {
        "admin_token": admin,
        "tenant_id": "tenant_grants",
        "project_id": "project_grants",
        "writer": "codex-grants",
        "writer_token": secrets.token_hex(32),
    }
    config = _edge_config(admin, params)
    config["vars"].update(R2_ACCOUNT_ID="0" * 32, R2_BUCKET=s3.bucket,
                          R2_S3_ENDPOINT=s3.endpoint, R2_S3_REGION=s3.region)  # fmt: skip
    config["secrets"].update(R2_ACCESS_KEY_ID=s3.access_key_id,
                             R2_SECRET_ACCESS_KEY=s3.secret_access_key)  # fmt: skip
    tmp = tmp_path_factory.mktemp("grant_run")
    (tmp / "config.json").write_text(json.dumps(config))
    driver = HERE / "grant_driver.py"
    args = [node, str(RUNNER), *bundle_args(bundle),
            "--config", str(tmp / "config.json"), "--driver", str(driver)]  # fmt: skip
    proc = subprocess.run(args, capture_output=True, text=True, timeout=280, check=False)
    lines = proc.stdout.strip().splitlines()
    assert lines, f"edge_runner printed nothing (exit {proc.returncode})\n{proc.stderr[-4000:]}"
    out = json.loads(lines[-1])
    assert out["ok"], (
        f"the grant driver failed in Pyodide:\n{out.get('error')}\n{proc.stderr[-4000:]}"
    )
    assert s3.secret_access_key not in proc.stdout + proc.stderr
    result: dict[str, Any] = out["result"]["grant_driver"]
    return result


@pytest.mark.parametrize("name", STEPS)
def test_grant5_edge_grants_in_pyodide(grant_run: dict[str, Any], name: str) -> None:
    found = [s for s in grant_run["steps"] if s["name"] == name]
    assert len(found) == 1, f"grant_driver.py did not report {name}"
    assert found[0]["ok"], found[0]["detail"]
