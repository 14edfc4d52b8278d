"""Live edge tier: `wrangler dev` (or AIDEMEMO_EDGE_URL) and the HTTP contract suite.

Marked `edge_live`: skipped, with the reason, unless AIDEMEMO_EDGE_LIVE=1; a skipped test makes
no network call (the fixtures that start or reach the Worker never run).

The contract suite's test functions are collected here from their modules, so they run against
the live edge with this folder's `api` fixture. Tests that move the fixture's clock are skipped
there (a live Worker keeps its own time).
"""

from __future__ import annotations

import importlib
from typing import Any

import pytest

from tests.contract.live import SocketClient
from tests.edge_live.backend import LiveEdge

pytestmark = pytest.mark.edge_live

# The contract modules whose tests talk to the service only through the `api` fixture.
CONTRACT_MODULES = (
    "tests.contract.test_http_anchor",
    "tests.contract.test_reads",
    "tests.contract.test_request_checks",
    "tests.contract.test_hostile_requests",
    "tests.contract.test_search",
    "tests.contract.test_handoff_lease",
    "tests.contract.test_scenario_t",
    "tests.contract.test_admin",
    "tests.contract.test_mcp",
)
# Contract tests that cannot run against one live deployment, and why (reported as skips).
NOT_LIVE = {
    "test_arc5_export_then_import_into_a_fresh_backend_is_identical_apart_from_the_epoch": (
        "needs a second, fresh deployment to import into"
    ),
    "test_boot1_bootstrap_is_idempotent_and_adds_members": (
        "compares two exports byte for byte; each carries the live clock's export time"
    ),
    "test_adm1_admin_routes_stay_closed_without_a_configured_token": (
        "builds its own in-process app without an admin token; nothing live to test"
    ),
    "test_mcp7_allowlisted_origin_passes": (
        "the deployment's MCP_ALLOWED_ORIGINS is its own (empty in wrangler.toml)"
    ),
}


def _not_live(reason: str) -> Any:
    @pytest.mark.skip(reason=f"not run live: {reason}")
    def skipped() -> None:
        raise AssertionError("unreachable")

    return skipped


def _collect(modules: tuple[str, ...]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for name in modules:
        module = importlib.import_module(name)
        for attr, value in vars(module).items():
            if attr.startswith("test_") and callable(value):
                assert attr not in found, f"{attr} is defined in two contract modules"
                found[attr] = _not_live(NOT_LIVE[attr]) if attr in NOT_LIVE else value
    return found


globals().update(_collect(CONTRACT_MODULES))


def test_ready3_live_health_is_the_edge(edge: LiveEdge) -> None:
    client = SocketClient(edge.url, timeout=60)
    try:
        status, _, body = client.request("GET", "/health")
    finally:
        client.close()
    assert status == 200
    assert body["mode"] == "edge"
