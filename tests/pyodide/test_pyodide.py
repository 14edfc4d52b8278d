"""Pyodide tier: the edge core imports and passes conformance under npm pyodide 314.0.7.

One Node process (tests/pyodide/runner.mjs) runs tests/pyodide/core_snippet.py inside Pyodide,
offline, from the repo's node_modules/pyodide/; every case below reads its one JSON result.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.node import node as pinned_node

pytestmark = pytest.mark.pyodide

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
PYODIDE_DIR = REPO / "node_modules" / "pyodide"
RUNNER = HERE / "runner.mjs"
SNIPPET = HERE / "core_snippet.py"
ID_VECTORS = REPO / "tests" / "data" / "command_id_vectors.json"
EXPECTED_PYTHON = (3, 14)

IMPORT_FAILED = "<import failed>"
try:
    from aidememo.conformance import CHECKS

    CHECK_PARAMS = [pytest.param(c.rule_id, c.name, id=c.rule_id) for c in CHECKS]
except Exception as exc:  # report as one failing case instead of a collection error
    CHECK_PARAMS = [pytest.param(IMPORT_FAILED, repr(exc), id="conformance-import")]


def _unavailable(reason: str) -> None:
    """Missing Node or npm pyodide fails under CI and skips on a developer machine."""
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def pyodide_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    node = pinned_node()
    if node is None:
        _unavailable("no node: run scripts/test (installs the pinned Node)")
    if not (PYODIDE_DIR / "pyodide.asm.wasm").exists():
        _unavailable(f"{PYODIDE_DIR} is missing: run scripts/test (npm ci)")
    # The runner copies only .py files into Pyodide: the command id vectors (SPEC.md ID-4)
    # travel as the text of a one-line module the snippet imports.
    vectors = tmp_path_factory.mktemp("pyodide_data") / "aidememo_test_vectors"
    vectors.mkdir()
    text = ID_VECTORS.read_text(encoding="utf-8")
    (vectors / "__init__.py").write_text(f"COMMAND_ID_VECTORS = {text!r}\n", encoding="utf-8")
    pkgs = ["--pkg", str(REPO / "aidememo"), "--pkg", str(vectors)]
    proc = subprocess.run(
        [str(node), str(RUNNER), *pkgs, "--file", str(SNIPPET)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    lines = proc.stdout.strip().splitlines()
    assert lines, f"runner printed nothing (exit {proc.returncode})\n{proc.stderr}"
    out: dict[str, Any] = json.loads(lines[-1])
    assert out["ok"], f"snippet failed in Pyodide:\n{out.get('error')}\n{proc.stderr}"
    assert proc.returncode == 0, proc.stderr
    return out


def test_layer3_python_version_is_314(pyodide_run: dict[str, Any]) -> None:
    result = pyodide_run["result"]
    assert pyodide_run["pyodide"] == "314.0.7"
    assert result["platform"] == "emscripten"
    assert tuple(result["version_info"][:2]) == EXPECTED_PYTHON, pyodide_run["python"]


def test_layer3_core_modules_import_without_sqlite3(pyodide_run: dict[str, Any]) -> None:
    result = pyodide_run["result"]
    assert not result["sqlite3_importable"], "the sqlite3 block did not hold"
    assert not result["failed"], "\n".join(f"{k}:\n{v}" for k, v in result["failed"].items())
    allowed = {"aidememo.stores.sqlite.sqlite3_executor"}
    assert set(result["needs_sqlite3"]) <= allowed, result["needs_sqlite3"]
    for root in ("aidememo.domain", "aidememo.ports", "aidememo.stores", "aidememo.conformance"):
        assert root in result["imported"]


def test_layer3_every_core_file_was_imported(pyodide_run: dict[str, Any]) -> None:
    result = pyodide_run["result"]
    seen = set(result["imported"]) | set(result["needs_sqlite3"])
    core = REPO / "aidememo"
    expected = set()
    for sub in ("domain", "service", "stores", "http", "conformance", "mcp"):
        for path in (core / sub).rglob("*.py"):
            parts = path.relative_to(REPO).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            expected.add(".".join(parts))
    if (core / "ports.py").exists():
        expected.add("aidememo.ports")
    assert expected <= seen, sorted(expected - seen)


@pytest.mark.parametrize(("rule_id", "name"), CHECK_PARAMS)
def test_layer3_conformance_memory_store(
    pyodide_run: dict[str, Any], rule_id: str, name: str
) -> None:
    if rule_id == IMPORT_FAILED:
        pytest.fail(f"aidememo.conformance does not import on CPython: {name}")
    result = pyodide_run["result"]
    assert not result["conformance_error"], result["conformance_error"]
    matches = [r for r in result["conformance"] if r["rule_id"] == rule_id and r["name"] == name]
    assert len(matches) == 1, f"{rule_id} {name} not reported by Pyodide"
    assert matches[0]["ok"], matches[0]["message"]


def test_sec2_the_secret_detector_finds_the_same_kinds_in_pyodide(
    pyodide_run: dict[str, Any],
) -> None:
    from aidememo.domain.secrets import secret_kinds

    samples = pyodide_run["result"]["secrets"]
    assert len(samples) == 17
    assert [kinds for _, kinds in samples] == [secret_kinds(text) for text, _ in samples]
    assert all(kinds for _, kinds in samples[:13]) and not any(k for _, k in samples[13:])


def test_id4_pyodide_derives_the_committed_command_ids(pyodide_run: dict[str, Any]) -> None:
    from aidememo.domain.command_ids import stable_id

    vectors = json.loads(ID_VECTORS.read_text(encoding="utf-8"))
    result = pyodide_run["result"]
    assert not result["command_ids_error"], result["command_ids_error"]
    assert result["command_ids"] == [v["id"] for v in vectors["vectors"]]
    raw = [v["id"] for v in vectors["stable_id"]]
    assert result["stable_ids"] == raw
    assert raw == [stable_id(v["prefix"], *v["parts"]) for v in vectors["stable_id"]]


def test_grant1_pyodide_presigns_like_cpython(pyodide_run: dict[str, Any]) -> None:
    from aidememo.bodies.sigv4 import Credentials, S3Location, presign_url, sign_request

    creds = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "tok+en")
    signed = {"Content-Length": "5", "Content-Type": "text/plain", "If-None-Match": "*"}
    want = []
    for style in ("path", "virtual"):
        loc = S3Location("https://acct.r2.cloudflarestorage.com", "auto", "aidememo-bodies", style)
        for key in ("gen/ab/Xy_09", "sp ace/é/🙂", "q!'()*;=@&+$,?#"):
            want.append(
                presign_url(
                    creds, loc, "PUT", key, now_s=1_796_146_205, expires_s=900, headers=signed
                )
            )
            want.append(
                sign_request(creds, loc, "HEAD", key, now_s=1_796_146_205)[1]["Authorization"]
            )
    assert pyodide_run["result"]["presigned"] == want
