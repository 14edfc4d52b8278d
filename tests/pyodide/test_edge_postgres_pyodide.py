"""Pyodide tier, edge in PostgreSQL mode: the bundle scripts/build_edge.py makes, with the
bindings and vars of wrangler.toml's `postgres` environment, under npm pyodide 314.0.7 with the
real Workers SDK (tests/pyodide/edge_runner.mjs), on the real PostgreSQL of scripts/test.

The Hyperdrive binding is a stand-in with the binding's documented properties only
(`connectionString`, host, port, user, password, database), naming PgBouncer in transaction
pool mode in front of a fresh migrated schema, which is what Hyperdrive is to the Worker. The
Worker and its Durable Objects connect with the vendored pg8000 over Node's TCP sockets for
Python (`edge_runner.mjs --sockets`: Pyodide's NodeSockFS, blocking through JSPI, so Node runs
with `--experimental-wasm-jspi`), where workerd gives Python Workers its own sockets.

The driver is edge_driver.py, the one the SQLite mode runs (tests/pyodide/test_edge_pyodide.py):
every request goes through `Default.fetch`, the project's Durable Object included, and the
search modes' contract (SEM-10, SEM-11: lexical fallback at no cost, `at_least_seq` waiting on
the object's indexer, one Workers AI call and one Vectorize query per hybrid search) is its
`semantic` step, here with the index state in PostgreSQL. The `postgres` environment binds no
R2 bucket (the edge serves no bodies in that mode, SPEC.md ART-12), so artifact_driver.py does
not run here and the hostile table goes without its rows on the Worker's body routes (there
they answer `artifact_store_unavailable` before looking at the reservation; the SQLite mode's
run checks them).
"""

from __future__ import annotations

import json
import secrets
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests import pg
from tests.hostile_table import ROWS
from tests.pyodide.test_edge_pyodide import (
    EDGE_STEPS,
    HERE,
    RUNNER,
    _driver_params,
    _edge_config,
    _require_tools,
    _wrangler,
    bundle,  # the session's build, a fixture
    bundle_args,
)

pytestmark = pytest.mark.pyodide
__all__ = ["bundle"]

ENVIRONMENT = "postgres"
# Bounds on the run (about 10 s here): the runner's own, which says which driver was running,
# and the process's, for a runner stuck where its timer cannot fire.
RUNNER_TIMEOUT_S = 120
PROCESS_TIMEOUT_S = 150


def _body_route(path: str) -> bool:
    """An upload or publish of a reservation: a route the Worker serves with the R2 bucket."""
    return path.endswith(("/body", "/publish"))


@pytest.fixture(scope="module")
def edge_run(bundle: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    node = _require_tools()
    admin = secrets.token_hex(32)
    rows = (row for row in ROWS if not _body_route(row.path))
    params = _driver_params(admin, "tenant_pg_edge", "epoch_pg_edge", rows)
    config = _edge_config(admin, params, ENVIRONMENT)
    assert config["vars"]["STORAGE_MODE"] == "postgres"
    tmp = tmp_path_factory.mktemp("pg_edge_run")
    with pg.fresh_database(pooled=True) as db:
        config["hyperdrive"] = [
            {"binding": h["binding"], "connection_string": db.url}
            for h in _wrangler()["env"][ENVIRONMENT]["hyperdrive"]
        ]
        (tmp / "config.json").write_text(json.dumps(config))
        args = [node, "--experimental-wasm-jspi", str(RUNNER), *bundle_args(bundle),
                "--config", str(tmp / "config.json"), "--sockets",
                "--timeout", str(RUNNER_TIMEOUT_S),
                "--driver", str(HERE / "edge_driver.py")]  # fmt: skip
        proc = subprocess.run(
            args, capture_output=True, text=True, timeout=PROCESS_TIMEOUT_S, check=False
        )
    lines = proc.stdout.strip().splitlines()
    assert lines, f"edge_runner printed nothing (exit {proc.returncode})\n{proc.stderr[-4000:]}"
    out = json.loads(lines[-1])
    assert out["ok"], f"the driver failed in Pyodide:\n{out.get('error')}\n{proc.stderr[-4000:]}"
    result: dict[str, Any] = out["result"]["edge_driver"]
    return result


def test_sem10_sem11_semantic_search_in_postgres_mode(edge_run: dict[str, Any]) -> None:
    """The `semantic` step with every record, the index state included, in PostgreSQL."""
    (step,) = [s for s in edge_run["steps"] if s["name"] == "semantic"]
    assert step["ok"], step["detail"]


@pytest.mark.parametrize("name", EDGE_STEPS)
def test_store8_edge_flow_in_postgres_mode(edge_run: dict[str, Any], name: str) -> None:
    found = [s for s in edge_run["steps"] if s["name"] == name]
    assert len(found) == 1, f"edge_driver.py did not report {name}"
    assert found[0]["ok"], found[0]["detail"]


def test_store8_postgres_mode_runs_exactly_the_listed_steps(edge_run: dict[str, Any]) -> None:
    assert tuple(s["name"] for s in edge_run["steps"]) == EDGE_STEPS
    # The project's records are PostgreSQL's: its object is still the one that serves it.
    assert {"binding": "PROJECTS", "name": "tenant_pg_edge/project_edge"} in edge_run["objects"]
