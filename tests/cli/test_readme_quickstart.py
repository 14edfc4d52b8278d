"""The README's quickstart, run as written: `scripts/serve`, then each command of its block in a
shell, then its Python example, against that server (only the port differs, and `HOME` is a
temporary directory, so `~/.aidememo` is the test's own).

Like tests/origin/test_scripts_serve.py, this runs only when the `.venv` install is current,
so it never installs anything itself.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.cli.agent_support import free_port

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
STARTUP_TIMEOUT_S = 240.0
QUICKSTART = "## Quickstart: two agents hand work to each other"
ARTIFACTS = "### Files that go with the work: artifacts"


def _venv_current() -> bool:
    import hashlib

    stamp = REPO / ".venv" / ".aidememo-pyproject.sha256"
    want = hashlib.sha256((REPO / "pyproject.toml").read_bytes()).hexdigest()
    return stamp.is_file() and stamp.read_text().strip() == want


pytestmark = pytest.mark.skipif(
    not _venv_current(), reason="scripts/serve would install into .venv first (stamp is stale)"
)


def quickstart_blocks() -> tuple[list[str], str]:
    """The quickstart's shell commands (comments dropped) and its Python example."""
    text = README.read_text()
    section = text[text.index(QUICKSTART) :]
    section = section[: section.index("\n## ", len(QUICKSTART))]
    shell = re.search(r"```bash\n(.*?)```", section, re.S)
    python = re.search(r"```python\n(.*?)```", section, re.S)
    assert shell is not None and python is not None
    commands = [line.split("  #", 1)[0].strip() for line in shell.group(1).splitlines()]
    return [c for c in commands if c], python.group(1)


def artifact_block() -> list[str]:
    """The shell commands of the quickstart's artifacts step."""
    text = README.read_text()
    section = text[text.index(ARTIFACTS) :]
    shell = re.search(r"```bash\n(.*?)```", section, re.S)
    assert shell is not None
    return [line.strip() for line in shell.group(1).splitlines() if line.strip()]


def test_cli2_cli3_readme_quickstart_runs_as_written(tmp_path: Path) -> None:
    commands, example = quickstart_blocks()
    assert commands[0] == "scripts/serve" and commands[1] == "source .venv/bin/activate"
    assert len(commands) < 10, "the quickstart promises under ten commands"
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIDEMEMO_", "VIRTUAL_ENV"))}
    env["HOME"] = str(tmp_path)  # ~/.aidememo is the test's
    served = subprocess.Popen(
        [str(REPO / "scripts" / "serve"), "--port", str(port)],
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            assert served.poll() is None, "scripts/serve exited"
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "scripts/serve did not become healthy"
            time.sleep(0.1)
        script = "set -e\n" + "\n".join(c.replace("3030", str(port)) for c in commands[1:])
        done = subprocess.run(
            ["bash", "-c", script], cwd=REPO, env=env, capture_output=True, text=True,
            timeout=300, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "returned handoff h1 (succeeded, result fact f1)" in done.stdout
        status = subprocess.run(
            ["bash", "-c", "source .venv/bin/activate && "
             "aidememo handoff status h1 --profile demo --json"],
            cwd=REPO, env=env, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert status.returncode == 0, status.stderr
        assert '"status": "completed"' in status.stdout
        ran = subprocess.run(
            [sys.executable, "-c", example.replace("3030", str(port))],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert ran.returncode == 0, ran.stderr
        assert ran.stdout.splitlines() == [
            "completed",
            "step 3 races the cache warm-up",
            "404 resource_not_found",
        ]
        # the artifacts step, in a directory of its own (it writes two files)
        work = tmp_path / "work"
        work.mkdir()
        steps = [f"source {REPO}/.venv/bin/activate", *artifact_block()]
        put = subprocess.run(
            ["bash", "-c", "set -e\n" + "\n".join(steps)],
            cwd=work, env=env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert put.returncode == 0, put.stderr
        assert (work / "profile-copy.txt").read_bytes() == (work / "profile.txt").read_bytes()
        assert "sessions/s1/artifacts/profile.txt" in put.stdout and "text/plain" in put.stdout
    finally:
        if served.poll() is None:
            os.killpg(served.pid, signal.SIGTERM)
            try:
                served.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(served.pid, signal.SIGKILL)
                served.wait(timeout=10)
