"""Config tier: `wrangler deploy --dry-run` bundles exactly the edge packages, offline, plus the
vendored pg8000 of the PostgreSQL mode from python_modules/ next to wrangler.toml."""

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

from tests.node import node_env

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
    env = node_env(WRANGLER_SEND_METRICS="false", CI="true", NO_COLOR="1")
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


def test_deploy9_bundle_has_worker_entry(bundle: Path) -> None:
    files = _files(bundle)
    # wrangler writes the main module under its basename at the bundle root.
    assert "entry.py" in files
    assert "from workers import" in (bundle / "entry.py").read_text()
    assert "worker/__init__.py" in files


def test_deploy9_bundle_has_core_files(bundle: Path) -> None:
    files = _files(bundle)
    for name in ("aidememo/__init__.py", "aidememo/ports.py", "aidememo/domain/__init__.py"):
        if (REPO / name).exists():
            assert name in files, name
    core = REPO / "aidememo"
    for sub in ("domain", "service", "stores", "http", "conformance", "mcp", "bodies"):
        for path in (core / sub).rglob("*.py") if (core / sub).is_dir() else ():
            if "__pycache__" not in path.parts:
                rel = path.relative_to(REPO).as_posix()
                assert rel in files, rel


def test_deploy9_bundle_excludes_non_edge_code(bundle: Path) -> None:
    forbidden = (
        "tests/",
        "origin/",
        "scripts/",
        "aidememo/cli/",
        "aidememo/client/",
        "aidememo/agent_memory/",
    )
    leaked = sorted(f for f in _files(bundle) if f.startswith(forbidden) or "__pycache__" in f)
    assert not leaked, leaked


def test_deploy9_bundle_is_python_only(bundle: Path) -> None:
    # Only .py modules (and wrangler's README) go up: no sources of node_modules or the venv;
    # the vendored distributions add their METADATA (read by importlib.metadata at import),
    # the Workers SDK its JavaScript helper and its .pth loader.
    sdk_extras = (
        "python_modules/workers/workflows.js",
        "python_modules/_workers_sdk_patch_loader.pth",
    )

    def allowed(name: str) -> bool:
        if name.startswith("python_modules/"):
            return name.endswith((".py", ".dist-info/METADATA")) or name in sdk_extras
        return name.endswith(".py") or name == "README.md"

    stray = sorted(f for f in _files(bundle) if not allowed(f))
    assert not stray, stray


def _build_edge() -> Any:
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import build_edge
    finally:
        sys.path.pop(0)
    return build_edge


def test_deploy9_dry_run_uploads_the_vendored_sdk_and_pg8000(dry_run: DryRun) -> None:
    """The Workers SDK, pg8000 and every pure-Python dependency its wheel requires go up as
    vendored modules from python_modules/ next to wrangler.toml, never from inside the module
    root."""
    assert "Vendored Modules" in dry_run.output, dry_run.output
    files = _files(dry_run.outdir)
    vendored = _build_edge().VENDORED
    assert set(vendored) == {
        "workers-runtime-sdk", "pg8000", "scramp", "asn1crypto", "python-dateutil", "six"
    }  # fmt: skip
    for module in ("__init__.py", "entrypoints.py", "rpc.py", "workflows.js"):
        assert f"python_modules/workers/{module}" in files
    for name, (version, tops) in vendored.items():
        info = f"{name.replace('-', '_')}-{version}.dist-info"
        assert f"python_modules/{info}/METADATA" in files, name
        for top in tops:
            assert any(
                f in (f"python_modules/{top}/__init__.py", f"python_modules/{top}.py")
                for f in files
            ), top
    for module in ("core.py", "dbapi.py", "converters.py"):
        assert f"python_modules/pg8000/{module}" in files
    assert not (REPO / "build" / "python_modules").exists()


def test_deploy9_vendored_pins_match_what_pg8000_requires() -> None:
    """The pins are the installed versions, and pg8000's own requirements are all vendored."""
    from importlib import metadata

    build_edge = _build_edge()
    vendored = {k: v for k, v in build_edge.VENDORED.items() if k != build_edge.SDK_DIST}
    for name, (version, _) in vendored.items():
        assert metadata.version(name) == version, name
    pending, seen = ["pg8000"], set()
    while pending:
        name = pending.pop()
        seen.add(name)
        for req in metadata.requires(name) or ():
            if "extra ==" in req:
                continue
            dep = req.split(";")[0].split("[")[0]
            for sep in ("=", "<", ">", "!", "~", " ", "("):
                dep = dep.split(sep)[0]
            if dep.lower() not in seen:
                pending.append(dep.lower())
    assert seen == set(vendored), seen


def test_deploy9_vendored_folder_alone_imports_pg8000(tmp_path: Path) -> None:
    """The vendored folder is all pg8000 needs: a bare interpreter (no site-packages) imports
    it, and importlib.metadata finds every version from the vendored METADATA."""
    out, vendor = tmp_path / "build", tmp_path / "python_modules"
    subprocess.run(
        [sys.executable, str(REPO / "scripts" / "build_edge.py"), "--out", str(out),
         "--vendor", str(vendor)],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    code = (
        "import sys; sys.path.insert(0, sys.argv[1])\n"
        "import pg8000.dbapi, scramp, dateutil.parser, asn1crypto, six\n"
        "assert pg8000.__file__.startswith(sys.argv[1]), pg8000.__file__\n"
        "print(pg8000.__version__, scramp.__version__)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-S", "-c", code, str(vendor)],
        check=True, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.stdout.split() == ["1.31.6", "1.5.0"]
    # A complete folder is left as is; one inside the module root is refused.
    again = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "build_edge.py"), "--out", str(out),
         "--vendor", str(vendor)],
        check=True, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert "up to date" in again.stderr
    inside = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "build_edge.py"), "--out", str(out),
         "--vendor", str(out / "python_modules")],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert inside.returncode == 2 and "module root" in inside.stderr


def test_deploy9_build_edge_skips_pycache(tmp_path: Path) -> None:
    out = tmp_path / "build"
    subprocess.run(
        [sys.executable, str(REPO / "scripts" / "build_edge.py"), "--out", str(out),
         "--vendor", str(tmp_path / "python_modules")],
        check=True,
        capture_output=True,
        timeout=120,
    )  # fmt: skip
    built = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}
    assert "worker/entry.py" in built
    assert all(name.endswith(".py") for name in built), built


def _config() -> dict[str, Any]:
    return tomllib.loads((REPO / "wrangler.toml").read_text())


def test_deploy8_dry_run_lists_every_binding(dry_run: DryRun) -> None:
    out = " ".join(dry_run.output.split())
    for binding in (
        "env.PROJECTS (ProjectCoordinator) Durable Object",
        "env.TENANTS (TenantRegistry) Durable Object",
        "env.TOKENS (TokenDirectory) Durable Object",
        "env.RATE_LIMITER (600 requests/60s) Rate Limit",
        'env.HANDOFF_LEASE_MS ("120000") Environment Variable',
        'env.STORAGE_MODE ("sqlite") Environment Variable',
        "env.ARTIFACTS (aidememo-artifacts) R2 Bucket",
    ):
        assert binding in out, (binding, dry_run.output)
    assert "ALLOW_INSECURE_HTTP" not in out  # plain HTTP stays refused unless set for dev
    assert "Hyperdrive" not in out  # the default deploy needs none (DEPLOY-8)


def test_deploy8_config_declares_sqlite_objects_the_entry_exports() -> None:
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
    assert config["vars"]["STORAGE_MODE"] == "sqlite"


def test_art10_config_declares_the_r2_binding() -> None:
    (bucket,) = _config()["r2_buckets"]
    assert bucket["binding"] == "ARTIFACTS"  # worker.artifacts.BINDING
    assert 'BINDING = "ARTIFACTS"' in (REPO / "worker" / "artifacts.py").read_text()


def test_deploy8_config_declares_the_hyperdrive_binding() -> None:
    config = _config()
    assert "hyperdrive" not in config  # only the postgres environment has one (DEPLOY-8)
    (hd,) = config["env"]["postgres"]["hyperdrive"]
    assert hd["binding"] == "HYPERDRIVE"  # durable_objects.pg_connection.HYPERDRIVE
    assert len(hd["id"]) == 32  # a placeholder: `wrangler hyperdrive create` gives the real one
    assert hd["localConnectionString"].startswith("postgres://")
    pg_connection = (REPO / "durable_objects" / "pg_connection.py").read_text()
    assert 'HYPERDRIVE = "HYPERDRIVE"' in pg_connection
    assert 'STORAGE_MODE = "STORAGE_MODE"' in pg_connection
