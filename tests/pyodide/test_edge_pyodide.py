"""Pyodide tier, edge: the real Workers SDK and our edge code under npm pyodide 314.0.7, offline.

One Node process (tests/pyodide/edge_runner.mjs) per session loads the bundle
scripts/build_edge.py makes for wrangler, with the bindings of wrangler.toml, and runs two
drivers; it prints one JSON result that the cases below read:

- storage_driver.py: Durable Object SQL through the SDK's own `DurableObjectContext(state)
  .storage` wrapper on real SQLite (better-sqlite3): workerd's refusals, the SDK behaviours the
  edge code relies on, and the conformance suite on the shared SQLite store over that storage.
- edge_driver.py: requests through `Default.fetch` into the Durable Objects: admin bootstrap of
  two actors, identity, session, facts, handoff send/accept/return, search (including CJK),
  changes, the table of hostile requests of tests/hostile_table.py (100,000 levels of nesting,
  lone surrogates, bytes that are not UTF-8, secrets, bad tokens, ...: each row its status and
  code, and the runtime answers the next request), the live feed's WebSocket
  upgrade (catch-up, a pushed commit, a refusal), export, the project's alarm, tenant
  deletion, import of the export, rate limiting.

The Workers SDK is the one scripts/build_edge.py vendors into python_modules/ (its wheel is
fetched by scripts/test, scripts/_lib.sh `ensure_sdk_wheel`, into .cache/wheels/): the runner
loads the Worker from the bundle and python_modules/ alone, as the runtime does.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import subprocess
import sys
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from tests.hostile_table import ROWS, as_wire
from tests.node import node as pinned_node

pytestmark = pytest.mark.pyodide

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
PYODIDE_DIR = REPO / "node_modules" / "pyodide"
SQLITE_ADDON = (
    REPO / "node_modules" / "better-sqlite3" / "build" / "Release" / "better_sqlite3.node"
)
RUNNER = HERE / "edge_runner.mjs"
WRANGLER_TOML = REPO / "wrangler.toml"

# Requests per token and period for the rate-limit binding in this run: the real default (600
# per 60 s) would take 600 requests through Pyodide to show a 429.
TEST_RATE_LIMIT = 40

# The steps of edge_driver.py, in order; each is one case.
EDGE_STEPS = (
    "health",
    "insecure_http_refused",
    "admin_requires_token",
    "bootstrap_writer",
    "bootstrap_receiver",
    "identity",
    "session",
    "fact",
    "secret_refused",
    "handoff_send",
    "handoff_accept",
    "handoff_return",
    "search",
    "search_cjk",
    "changes",
    "cursors",
    "mcp",
    "hostile_table",
    "semantic",
    "live_feed",
    "export",
    "alarm",
    "delete_tenant",
    "import_export",
    "rate_limited",
)
STORAGE_PROBES = (
    "begin_refused",
    "commit_refused",
    "rollback_refused",
    "savepoint_refused",
    "release_refused",
    "user_version_refused",
    "user_version_set_refused",
    "journal_mode_refused",
    "sqlite_version_refused",
    "foreign_keys_on",
    "table_list_allowed",
    "fts5_strict_returning",
    "blob_round_trip",
    "blob_round_trip_raw_storage",
    "unconverted_bytes_are_text",
    "bigint_refused",
    "bigint_refused_raw_storage",
    "rollback_on_raise",
    "cursor_from_transaction_sync",
    "cursor_api",
)

try:
    from aidememo.conformance import CHECKS

    CHECK_IDS = [pytest.param(c.rule_id, c.name, id=c.rule_id) for c in CHECKS]
except Exception as exc:  # reported by test_pyodide.py's own import case
    CHECK_IDS = [pytest.param("<import failed>", repr(exc), id="conformance-import")]


def _unavailable(reason: str) -> None:
    """Missing Node, npm packages or the SDK wheel fail under CI and skip elsewhere."""
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


def _require_tools() -> str:
    node = pinned_node()
    if node is None:
        _unavailable("no node: run scripts/test (installs the pinned Node)")
    for need in (PYODIDE_DIR / "pyodide.asm.wasm", SQLITE_ADDON):
        if not need.exists():
            _unavailable(f"{need} is missing: run scripts/test (npm ci)")
    assert node is not None
    return node


def _run(node: str, bundle: Path, config: dict[str, Any], tmp: Path) -> Any:
    config_path = tmp / "config.json"
    config_path.write_text(json.dumps(config))
    args = [node, str(RUNNER), *bundle_args(bundle), "--config", str(config_path)]
    for driver in ("bundle_driver.py", "storage_driver.py", "edge_driver.py", "artifact_driver.py"):
        args += ["--driver", str(HERE / driver)]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=280, check=False)
    lines = proc.stdout.strip().splitlines()
    assert lines, f"edge_runner printed nothing (exit {proc.returncode})\n{proc.stderr[-4000:]}"
    out = json.loads(lines[-1])
    assert out["ok"], f"a driver failed in Pyodide:\n{out.get('error')}\n{proc.stderr[-4000:]}"
    return out


def bundle_args(bundle: Path) -> list[str]:
    """The runner's arguments for a build: the bundle and the python_modules/ beside it."""
    return ["--bundle", str(bundle), "--vendor", str(bundle.parent / "python_modules")]


@pytest.fixture(scope="session")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What wrangler uploads: scripts/build_edge.py into a private folder (build/ and the
    python_modules/ beside it, with the vendored Workers SDK)."""
    root = tmp_path_factory.mktemp("edge")
    subprocess.run(
        [sys.executable, str(REPO / "scripts" / "build_edge.py"), "--out", str(root / "build"),
         "--vendor", str(root / "python_modules")],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    return root / "build"


def _wrangler() -> dict[str, Any]:
    with WRANGLER_TOML.open("rb") as f:
        return tomllib.load(f)


def _driver_params(
    admin: str, tenant_id: str, project_epoch: str, hostile: Iterable[Any]
) -> dict[str, Any]:
    """What the edge driver is given: the admin token, the project and its two members with
    fresh tokens, the rate limit, and the hostile requests to replay."""
    return {
        "admin_token": admin,
        "tenant_id": tenant_id,
        "project_id": "project_edge",
        "project_epoch": project_epoch,
        "writer": "codex-edge",
        "receiver": "claude-edge",
        "writer_token": secrets.token_hex(32),
        "receiver_token": secrets.token_hex(32),
        "rate_limit": TEST_RATE_LIMIT,
        "rate_period": 60,
        "hostile": as_wire(hostile),
    }


def _edge_config(
    admin_token: str, params: dict[str, Any], environment: str | None = None
) -> dict[str, Any]:
    """The runtime configuration wrangler.toml declares (its `environment`'s bindings and vars
    when given, as `wrangler deploy --env` uses them), plus this run's secrets."""
    top = _wrangler()
    conf = top["env"][environment] if environment else top
    ratelimits = []
    for rl in conf.get("ratelimits", []):
        simple = rl.get("simple", {})
        params["rate_period"] = int(simple.get("period", 60))
        ratelimits.append(
            {"name": rl["name"], "limit": TEST_RATE_LIMIT, "period": params["rate_period"]}
        )
    variables = {k: v for k, v in conf.get("vars", {}).items() if k != "ALLOW_INSECURE_HTTP"}
    main = Path(top["main"])
    base = Path(top.get("base_dir", main.parent))
    return {
        "main": str(main.relative_to(base)),
        "durable_objects": conf.get("durable_objects", {}).get("bindings", []),
        "ratelimits": ratelimits,
        "r2_buckets": conf.get("r2_buckets", []),
        "ai": conf.get("ai"),
        "vectorize": conf.get("vectorize", []),
        "vars": {k: str(v) for k, v in variables.items()},
        "secrets": {"ADMIN_TOKEN_SHA256": hashlib.sha256(admin_token.encode()).hexdigest()},
        "driver_params": params,
    }


@pytest.fixture(scope="session")
def edge_session(bundle: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    node = _require_tools()
    admin = secrets.token_hex(32)
    params = _driver_params(admin, "tenant_edge", "epoch_edge", ROWS)
    out: dict[str, Any] = _run(
        node, bundle, _edge_config(admin, params), tmp_path_factory.mktemp("edge_run")
    )
    return out


@pytest.fixture(scope="session")
def storage_run(edge_session: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = edge_session["result"]["storage_driver"]
    return result


@pytest.fixture(scope="session")
def edge_run(edge_session: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = edge_session["result"]["edge_driver"]
    return result


# -- the bundle -------------------------------------------------------------------------------


def test_deploy9_worker_imports_from_the_bundle_alone(edge_session: dict[str, Any]) -> None:
    """worker/entry.py is imported from the build with only the bundle and its python_modules/
    on the path: the Workers SDK is the vendored one, at the pinned version."""
    run = edge_session["result"]["bundle_driver"]
    assert run["entry"] == "/bundle/entry.py", run
    assert run["workers"] == "/python_modules/workers/__init__.py", run
    assert run["sdk_version"] == _build_edge_pins()["workers-runtime-sdk"][0], run
    assert run["outside"] == [], run  # nothing else outside the stdlib was importable


def _build_edge_pins() -> dict[str, tuple[str, tuple[str, ...]]]:
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import build_edge
    finally:
        sys.path.pop(0)
    pins: dict[str, tuple[str, tuple[str, ...]]] = build_edge.VENDORED
    return pins


def test_deploy9_sdk_pin_is_the_one_scripts_test_fetches() -> None:
    lib = (REPO / "scripts" / "_lib.sh").read_text()
    assert f'SDK_WHEEL_VERSION="{_build_edge_pins()["workers-runtime-sdk"][0]}"' in lib


# -- storage ----------------------------------------------------------------------------------


@pytest.mark.parametrize("probe", STORAGE_PROBES)
def test_store12_do_sql_through_the_sdk(storage_run: dict[str, Any], probe: str) -> None:
    got = storage_run["probes"].get(probe)
    assert got is not None, f"storage_driver.py did not report {probe}"
    assert got["ok"], got["detail"]


def test_suite1_storage_driver_reports_exactly_the_listed_probes(
    storage_run: dict[str, Any],
) -> None:
    assert tuple(storage_run["probes"]) == STORAGE_PROBES


@pytest.mark.parametrize(("rule_id", "name"), CHECK_IDS)
def test_layer3_conformance_on_do_sql_in_pyodide(
    storage_run: dict[str, Any], rule_id: str, name: str
) -> None:
    assert not storage_run["error"], storage_run["error"]
    matches = [
        r for r in storage_run["conformance"] if (r["rule_id"], r["name"]) == (rule_id, name)
    ]
    assert len(matches) == 1, f"{rule_id} {name} not reported"
    assert matches[0]["ok"], matches[0]["message"]


# -- the edge, through Default.fetch ------------------------------------------------------------


def test_http13_cursor_routes_through_the_stricter_sql_double(edge_run: dict[str, Any]) -> None:
    """The `cursors` step: every cursor route with cursors Pyodide hands over as BigInt."""
    (step,) = [s for s in edge_run["steps"] if s["name"] == "cursors"]
    assert step["ok"], step["detail"]


def test_sem10_sem11_semantic_search_through_the_real_sdk(edge_run: dict[str, Any]) -> None:
    """The `semantic` step: Workers AI and Vectorize doubles behind the SDK's binding wrappers,
    the project object indexing while a search waits on `at_least_seq`, then one Workers AI
    call and one Vectorize query per hybrid search."""
    (step,) = [s for s in edge_run["steps"] if s["name"] == "semantic"]
    assert step["ok"], step["detail"]


@pytest.mark.parametrize("name", EDGE_STEPS)
def test_layer3_edge_flow(edge_run: dict[str, Any], name: str) -> None:
    found = [s for s in edge_run["steps"] if s["name"] == name]
    assert len(found) == 1, f"edge_driver.py did not report {name}"
    assert found[0]["ok"], found[0]["detail"]


def test_suite1_edge_driver_reports_exactly_the_listed_steps(edge_run: dict[str, Any]) -> None:
    assert tuple(s["name"] for s in edge_run["steps"]) == EDGE_STEPS


def test_edge1_objects_are_per_project_tenant_and_token_shard(edge_run: dict[str, Any]) -> None:
    """One project object, one tenant registry, token directory shards (never one global)."""
    by_binding: dict[str, list[Any]] = {}
    for obj in edge_run["objects"]:
        by_binding.setdefault(obj["binding"], []).append(obj["name"])
    declared = {b["name"] for b in _wrangler()["durable_objects"]["bindings"]}
    assert set(by_binding) == declared, by_binding
    assert all(len(names) == len(set(names)) for names in by_binding.values()), by_binding


def test_layer3_every_edge_module_imports(edge_run: dict[str, Any]) -> None:
    """worker/ and durable_objects/, walked: a module added later (the PostgreSQL mode) is
    imported under Pyodide without being listed here."""
    failed = {k: v for k, v in edge_run["imports"].items() if v != "ok"}
    assert not failed, "\n".join(f"{k}:\n{v}" for k, v in failed.items())
    expected = set()
    for package in ("worker", "durable_objects"):
        for path in (REPO / package).rglob("*.py"):
            parts = path.relative_to(REPO).with_suffix("").parts
            expected.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    assert expected <= set(edge_run["imports"]), sorted(expected - set(edge_run["imports"]))


# -- artifacts on a real R2 bucket (Miniflare), through Default.fetch --------------------------

ARTIFACT_STEPS = (
    "reserve",
    "upload_to_r2",
    "publish_verifies_the_r2_object",
    "resolve_and_download_stream",
    "replacement_needs_the_token",
    "digest_mismatch_refused_by_r2_observation",
    "mcp_artifact_write_and_read_through_r2",
    "export_and_import_with_bodies_through_r2",
)


@pytest.mark.parametrize("name", ARTIFACT_STEPS)
def test_art10_artifacts_on_miniflare_r2(edge_session: dict[str, Any], name: str) -> None:
    run = edge_session["result"]["artifact_driver"]
    found = [s for s in run["steps"] if s["name"] == name]
    assert len(found) == 1, f"artifact_driver.py did not report {name}"
    assert found[0]["ok"], found[0]["detail"]
