"""Config tier: the Node toolchain matches wrangler.toml's compatibility date (DEPLOY-10).

The lock file holds one workerd, the one wrangler and miniflare both depend on, and its own
`compatibilityDate` is not older than wrangler.toml's; the Node the tests run (tests/node.py,
the pinned one scripts/test installs) meets wrangler's and miniflare's `engines`; the live tier
runs that wrangler's `dev`.
"""

from __future__ import annotations

import json
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest

from tests.edge_live.backend import WRANGLER, dev_command
from tests.node import node

REPO = Path(__file__).resolve().parents[2]


def _lock() -> dict[str, Any]:
    packages: dict[str, Any] = json.loads((REPO / "package-lock.json").read_text())["packages"]
    return packages


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.lstrip("v").split("-")[0].split("."))


def test_deploy10_one_workerd_that_accepts_the_compatibility_date() -> None:
    lock = _lock()
    manifest = json.loads((REPO / "package.json").read_text())["devDependencies"]
    wrangler, miniflare = lock["node_modules/wrangler"], lock["node_modules/miniflare"]
    assert manifest["wrangler"] == wrangler["version"] == "4.164.0"
    assert manifest["miniflare"] == miniflare["version"]
    assert wrangler["dependencies"]["miniflare"] == miniflare["version"]
    workerds = sorted(k for k in lock if k.endswith("node_modules/workerd"))
    assert workerds == ["node_modules/workerd"], workerds
    workerd = lock["node_modules/workerd"]["version"]
    assert wrangler["dependencies"]["workerd"] == miniflare["dependencies"]["workerd"] == workerd
    # workerd's version carries the newest compatibility date it supports (1.YYYYMMDD.N).
    supported = workerd.split(".")[1]
    with (REPO / "wrangler.toml").open("rb") as f:
        wanted = tomllib.load(f)["compatibility_date"].replace("-", "")
    assert supported >= wanted, (workerd, wanted)


def test_deploy10_the_pinned_node_meets_the_engines() -> None:
    found = node()
    if found is None:
        pytest.skip("no node: run scripts/test")
    running = subprocess.run([found, "--version"], capture_output=True, text=True, check=True)
    have = _version(running.stdout.strip())
    lock = _lock()
    for name in ("wrangler", "miniflare"):
        engine = lock[f"node_modules/{name}"]["engines"]["node"]
        assert engine.startswith(">="), engine
        assert have >= _version(engine[2:]), (name, engine, have)


def test_deploy10_live_tier_runs_the_pinned_wrangler_dev(tmp_path: Path) -> None:
    args = dev_command(8787, tmp_path / "state", "admin")
    assert args[:2] == [str(WRANGLER), "dev"]
    assert "ALLOW_INSECURE_HTTP:1" in args
