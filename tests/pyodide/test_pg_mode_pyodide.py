"""Pyodide tier, PostgreSQL mode: its modules and the vendored pg8000 import under npm pyodide
314.0.7 (the Python of the Workers runtime at our compatibility date), offline.

The modules and pg8000 import; and the store runs on pg8000 against the real PostgreSQL of
scripts/test through PgBouncer (what Hyperdrive is), over Node's TCP sockets for Python
(`runner.mjs --sockets`: Pyodide's NodeSockFS, blocking through JSPI, so Node runs with
`--experimental-wasm-jspi`), which stand where workerd gives Python Workers its own sockets.
The bundle and python_modules/ are what scripts/build_edge.py makes for wrangler, built into a
private folder.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest

from tests import pg
from tests.node import node as pinned_node

pytestmark = pytest.mark.pyodide

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
RUNNER = HERE / "runner.mjs"
SNIPPET = HERE / "pg_mode_snippet.py"
STORE_SNIPPET = HERE / "pg_store_snippet.py"


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


def _vendored() -> dict[str, tuple[str, tuple[str, ...]]]:
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import build_edge
    finally:
        sys.path.pop(0)
    pins: dict[str, tuple[str, tuple[str, ...]]] = build_edge.VENDORED
    return pins


@pytest.fixture(scope="module")
def build(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[str]]:
    """The pinned Node and the runner's `--pkg` arguments of a fresh build."""
    node = pinned_node()
    if node is None:
        _unavailable("no node: run scripts/test (installs the pinned Node)")
    if not (REPO / "node_modules" / "pyodide" / "pyodide.asm.wasm").exists():
        _unavailable("node_modules/pyodide is missing: run scripts/test (npm ci)")
    assert node is not None
    tmp = tmp_path_factory.mktemp("pg_mode")
    out, vendor = tmp / "build", tmp / "python_modules"
    subprocess.run(
        [sys.executable, str(REPO / "scripts" / "build_edge.py"), "--out", str(out),
         "--vendor", str(vendor)],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    pkgs: list[str] = []
    for pkg in (out / "aidememo", out / "durable_objects", vendor):
        pkgs += ["--pkg", str(pkg)]
    return node, pkgs


def _snippet(args: list[str]) -> dict[str, Any]:
    proc = subprocess.run(args, capture_output=True, text=True, timeout=240, check=False)
    lines = proc.stdout.strip().splitlines()
    assert lines, f"runner printed nothing (exit {proc.returncode})\n{proc.stderr[-4000:]}"
    result: dict[str, Any] = json.loads(lines[-1])
    assert result["ok"], f"the snippet failed in Pyodide:\n{result.get('error')}"
    return dict(result["result"])


@pytest.fixture(scope="module")
def run(build: tuple[str, list[str]]) -> dict[str, Any]:
    node, pkgs = build
    return _snippet([node, str(RUNNER), "--file", str(SNIPPET), *pkgs])


def test_layer2_layer3_postgres_mode_modules_import_without_the_driver(run: dict[str, Any]) -> None:
    from aidememo.stores.postgres import SCHEMA_VERSION

    assert run["python"] == [3, 14]
    assert run["mode"] == "postgres"
    assert run["schema_version"] == SCHEMA_VERSION
    assert run["params"] == {
        "host": "hyperdrive.local",
        "port": 5432,
        "user": "aidememo",
        "password": "secret",
        "database": "aidememo",
    }
    assert run["store"] == ["PostgresStore", "edge", 1, True]
    # pg8000 is loaded by the first connection only, never by importing the mode.
    assert run["loaded_at_import"] is False
    assert run["loaded_before_connect"] is False


def test_deploy9_layer3_vendored_pg8000_imports_with_its_dependencies(run: dict[str, Any]) -> None:
    assert run["paramstyle"] == "format"  # the shared store's %s placeholders
    assert all(path.startswith("/pkgs/python_modules/") for path in run["files"].values())
    pins = {name: pin for name, (pin, _) in _vendored().items() if name != "workers-runtime-sdk"}
    assert run["versions"] == pins  # the SDK's pin: test_edge_pyodide.py (DEPLOY-9)


def test_store8_pg8000_store_in_pyodide_on_real_postgres(build: tuple[str, list[str]]) -> None:
    from aidememo.stores.postgres import SCHEMA_VERSION

    node, pkgs = build
    with pg.fresh_database(pooled=True) as db:
        url = urlsplit(db.url)
        connection = {
            "host": url.hostname,
            "port": url.port or 5432,
            "user": unquote(url.username or ""),
            "password": unquote(url.password) if url.password else None,
            "database": unquote(url.path.lstrip("/")) or None,
        }
        code = f"CONNECTION = {connection!r}\n" + STORE_SNIPPET.read_text()
        args = [node, "--experimental-wasm-jspi", str(RUNNER), "--sockets", "--code", code]
        result = _snippet([*args, *pkgs])
    assert result == {
        "mode": "edge",
        "schema_version": SCHEMA_VERSION,
        "caller": ["t_pyo", "a_pyo"],
        "driver_loaded": True,
    }
