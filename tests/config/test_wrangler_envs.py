"""Config tier: the edge deploys as shipped (SPEC.md DEPLOY-8). The default `wrangler deploy`
needs no edit (no Hyperdrive binding, no placeholder to replace), the PostgreSQL mode is the
`postgres` environment with every binding of the default plus its Hyperdrive, and both pass
`wrangler deploy --dry-run` offline; `.dev.vars.example` names every variable the Worker reads
from its environment."""

from __future__ import annotations

import os
import re
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest

from tests.node import node_env

REPO = Path(__file__).resolve().parents[2]
WRANGLER = REPO / "node_modules" / ".bin" / "wrangler"


def _config() -> dict[str, Any]:
    return tomllib.loads((REPO / "wrangler.toml").read_text())


def _dry_run(tmp_path: Path, *args: str) -> str:
    if not WRANGLER.exists():
        if os.environ.get("CI"):
            pytest.fail("node_modules/.bin/wrangler is missing: run scripts/test (npm ci)")
        pytest.skip("node_modules/.bin/wrangler is missing: run scripts/test (npm ci)")
    env = node_env(WRANGLER_SEND_METRICS="false", CI="true", NO_COLOR="1")
    proc = subprocess.run(
        [str(WRANGLER), "deploy", "--dry-run", "--outdir", str(tmp_path / "out"), *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert proc.returncode == 0, f"wrangler exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return " ".join((proc.stdout + proc.stderr).split())


def test_deploy8_postgres_environment_dry_run_lists_its_bindings(tmp_path: Path) -> None:
    out = _dry_run(tmp_path, "--env", "postgres")
    for binding in (
        "env.PROJECTS (ProjectCoordinator) Durable Object",
        "env.TENANTS (TenantRegistry) Durable Object",
        "env.TOKENS (TokenDirectory) Durable Object",
        "env.RATE_LIMITER (600 requests/60s) Rate Limit",
        'env.STORAGE_MODE ("postgres") Environment Variable',
        "env.HYPERDRIVE (00000000000000000000000000000000) Hyperdrive Config",
    ):
        assert binding in out, (binding, out)


def test_deploy8_the_postgres_environment_repeats_every_default_binding() -> None:
    config = _config()
    env = config["env"]["postgres"]
    assert env["durable_objects"] == config["durable_objects"]
    assert set(env["vars"]) == set(config["vars"])
    assert {k: v for k, v in env["vars"].items() if k != "STORAGE_MODE"} == {
        k: v for k, v in config["vars"].items() if k != "STORAGE_MODE"
    }
    assert env["vars"]["STORAGE_MODE"] == "postgres"
    ((default,), (postgres,)) = config["ratelimits"], env["ratelimits"]
    assert default["simple"] == postgres["simple"]
    assert default["namespace_id"] != postgres["namespace_id"]  # two Workers, two counters


def test_deploy11_both_environments_bind_workers_ai_and_one_vectorize_index() -> None:
    config = _config()
    postgres = config["env"]["postgres"]
    assert config["ai"] == postgres["ai"] == {"binding": "AI"}
    ((default,), (pg,)) = config["vectorize"], postgres["vectorize"]
    assert default == pg == {"binding": "VECTORIZE", "index_name": "aidememo-facts"}
    text = (REPO / "wrangler.toml").read_text()
    docs = (REPO / "docs" / "edge.md").read_text()
    for where in (text, docs):
        assert "vectorize create aidememo-facts --dimensions=384 --metric=cosine" in where
        assert "--property-name=source_id" in where


def test_deploy8_dev_vars_example_names_every_variable_the_worker_reads() -> None:
    example = (REPO / ".dev.vars.example").read_text()
    named = set(re.findall(r"^([A-Z][A-Z0-9_]*)=", example, re.M))
    config = _config()
    assert {"ALLOW_INSECURE_HTTP", "ADMIN_TOKEN_SHA256"} <= named
    sources = "".join(
        path.read_text() for d in ("worker", "durable_objects") for path in (REPO / d).glob("*.py")
    )
    read = set(re.findall(r'"([A-Z][A-Z0-9_]+)"', sources))
    bindings = {
        "PROJECTS",
        "TENANTS",
        "TOKENS",
        "RATE_LIMITER",
        "HYPERDRIVE",
        "ARTIFACTS",
        "AI",
        "VECTORIZE",
        "GET",
        "POST",
        "HEAD",  # methods and a header value of the S3 requests (durable_objects.r2_s3)
        "DELETE",
        "ENABLED",
    }
    variables = read - bindings
    # Every variable the Worker reads is a var of wrangler.toml or named in the example.
    unknown = {v for v in variables if v not in config["vars"] and v not in named}
    assert not unknown, sorted(unknown)
