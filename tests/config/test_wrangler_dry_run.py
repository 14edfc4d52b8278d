"""Config tier: `wrangler deploy --dry-run` bundles exactly the edge packages, offline."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
WRANGLER = REPO / "node_modules" / ".bin" / "wrangler"


@dataclass(frozen=True)
class DryRun:
    outdir: Path
    output: str  # what wrangler printed: the module table and the bindings


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory: pytest.TempPathFactory) -> DryRun:
    if not WRANGLER.exists():
        if os.environ.get("CI"):
            pytest.fail("node_modules/.bin/wrangler is missing: run scripts/test (npm ci)")
        pytest.skip("node_modules/.bin/wrangler is missing: run scripts/test (npm ci)")
    outdir = tmp_path_factory.mktemp("wrangler-out")
    env = dict(os.environ, WRANGLER_SEND_METRICS="false", CI="true", NO_COLOR="1")
    proc = subprocess.run(
        [str(WRANGLER), "deploy", "--dry-run", "--outdir", str(outdir)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert proc.returncode == 0, f"wrangler exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return DryRun(outdir, proc.stdout + proc.stderr)


@pytest.fixture(scope="module")
def bundle(dry_run: DryRun) -> Path:
    return dry_run.outdir


def _files(outdir: Path) -> set[str]:
    return {p.relative_to(outdir).as_posix() for p in outdir.rglob("*") if p.is_file()}


def test_bundle_has_worker_entry(bundle: Path) -> None:
    files = _files(bundle)
    # wrangler writes the main module under its basename at the bundle root.
    assert "entry.py" in files
    assert "from workers import" in (bundle / "entry.py").read_text()
    assert "worker/__init__.py" in files


def test_bundle_has_core_files(bundle: Path) -> None:
    files = _files(bundle)
    for name in ("aidememo/__init__.py", "aidememo/ports.py", "aidememo/domain/__init__.py"):
        if (REPO / name).exists():
            assert name in files, name
    core = REPO / "aidememo"
    for sub in ("domain", "service", "stores", "http", "conformance"):
        for path in (core / sub).rglob("*.py") if (core / sub).is_dir() else ():
            if "__pycache__" not in path.parts:
                rel = path.relative_to(REPO).as_posix()
                assert rel in files, rel


def test_bundle_excludes_non_edge_code(bundle: Path) -> None:
    forbidden = (
        "tests/",
        "origin/",
        "scripts/",
        "aidememo/cli/",
        "aidememo/client/",
        "aidememo/mcp/",
        "aidememo/memory/",
    )
    leaked = sorted(f for f in _files(bundle) if f.startswith(forbidden) or "__pycache__" in f)
    assert not leaked, leaked


def test_bundle_is_python_only(bundle: Path) -> None:
    # Only .py modules (and wrangler's README) go up: no sources of node_modules or the venv.
    stray = sorted(f for f in _files(bundle) if not f.endswith(".py") and f != "README.md")
    assert not stray, stray


def test_build_edge_skips_pycache(tmp_path: Path) -> None:
    out = tmp_path / "build"
    subprocess.run(
        [sys.executable, str(REPO / "scripts" / "build_edge.py"), "--out", str(out)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    built = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}
    assert "worker/entry.py" in built
    assert all(name.endswith(".py") for name in built), built


def _config() -> dict[str, Any]:
    return tomllib.loads((REPO / "wrangler.toml").read_text())


def test_dry_run_lists_every_binding(dry_run: DryRun) -> None:
    out = " ".join(dry_run.output.split())
    for binding in (
        "env.PROJECTS (ProjectCoordinator) Durable Object",
        "env.TENANTS (TenantRegistry) Durable Object",
        "env.TOKENS (TokenDirectory) Durable Object",
        "env.RATE_LIMITER (600 requests/60s) Rate Limit",
        'env.HANDOFF_LEASE_MS ("120000") Environment Variable',
    ):
        assert binding in out, (binding, dry_run.output)
    assert "ALLOW_INSECURE_HTTP" not in out  # plain HTTP stays refused unless set for dev


def test_config_declares_sqlite_objects_the_entry_exports() -> None:
    config = _config()
    assert config["compatibility_date"] >= "2026-09-08"
    assert config["compatibility_flags"] == ["python_workers"]
    bindings = config["durable_objects"]["bindings"]
    classes = {b["class_name"] for b in bindings}
    migrated = {c for m in config["migrations"] for c in m.get("new_sqlite_classes", [])}
    assert classes == migrated == {"ProjectCoordinator", "TenantRegistry", "TokenDirectory"}
    # The runtime finds Durable Object classes among the main module's names.
    tree = ast.parse((REPO / "worker" / "entry.py").read_text())
    imported = {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert classes <= imported
    (limiter,) = config["ratelimits"]
    assert limiter["name"] == "RATE_LIMITER"
    assert limiter["simple"] == {"limit": 600, "period": 60}
    assert "ALLOW_INSECURE_HTTP" not in config["vars"]
    assert config["build"]["command"] == "python3 scripts/build_edge.py"
