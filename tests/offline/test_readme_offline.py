"""The README's "Working offline" section, run as written after its quickstart: `scripts/serve`
(stopped and started again where the section says so), each `$` command of its block in a
shell, and each command's output compared line for line with the block (only the port
differs, and `HOME` is a temporary directory, so `~/.aidememo` is the test's own).

Like tests/cli/test_readme_quickstart.py, this runs only when the `.venv` install is current,
so it never installs anything itself.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.cli.agent_support import free_port

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
QUICKSTART = "## Quickstart: two agents hand work to each other"
OFFLINE = "## Working offline"
STARTUP_TIMEOUT_S = 240.0
STOP, START = "# stop scripts/serve", "# start scripts/serve"


def _venv_current() -> bool:
    import hashlib

    stamp = REPO / ".venv" / ".aidememo-pyproject.sha256"
    want = hashlib.sha256((REPO / "pyproject.toml").read_bytes()).hexdigest()
    return stamp.is_file() and stamp.read_text().strip() == want


pytestmark = pytest.mark.skipif(
    not _venv_current(), reason="scripts/serve would install into .venv first (stamp is stale)"
)


def _section(title: str) -> str:
    text = README.read_text()
    section = text[text.index(title) :]
    return section[: section.index("\n## ", len(title))]


def quickstart_commands() -> list[str]:
    shell = re.search(r"```bash\n(.*?)```", _section(QUICKSTART), re.S)
    assert shell is not None
    commands = [line.split("  #", 1)[0].strip() for line in shell.group(1).splitlines()]
    return [c for c in commands if c]


def offline_steps() -> list[tuple[str, list[str]]]:
    """The block as (command or note, expected output lines)."""
    block = re.search(r"```console\n(.*?)```", _section(OFFLINE), re.S)
    assert block is not None
    steps: list[tuple[str, list[str]]] = []
    for line in block.group(1).splitlines():
        if line.startswith(("$ ", "# ")):
            steps.append((line, []))
        else:
            steps[-1][1].append(line)
    return steps


class Serve:
    """`scripts/serve` in its own process group, HOME the test's."""

    def __init__(self, port: int, env: dict[str, str]) -> None:
        self.port, self.env = port, env
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [str(REPO / "scripts" / "serve"), "--port", str(self.port)],
            cwd=REPO, env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            assert self.proc.poll() is None, "scripts/serve exited"
            try:
                url = f"http://127.0.0.1:{self.port}/health"
                if httpx.get(url, timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "scripts/serve did not become healthy"
            time.sleep(0.1)

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def test_replica1_replica4_outbox1_outbox3_readme_working_offline_runs_as_written(
    tmp_path: Path,
) -> None:
    quickstart, steps = quickstart_commands(), offline_steps()
    assert quickstart[0] == "scripts/serve" and quickstart[1] == "source .venv/bin/activate"
    assert [s for s, _ in steps if s.startswith("# ")] == [
        "# stop scripts/serve (Ctrl-C in terminal 1)",
        "# start scripts/serve again",
    ]
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIDEMEMO_", "VIRTUAL_ENV"))}
    env["HOME"] = str(tmp_path)
    env["PATH"] = f"{REPO / '.venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    serve = Serve(port, env)
    serve.start()
    try:
        script = "set -e\n" + "\n".join(c.replace("3030", str(port)) for c in quickstart[2:])
        done = subprocess.run(
            ["bash", "-c", script], cwd=REPO, env=env, capture_output=True, text=True,
            timeout=300, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        for step, expected in steps:
            if step.startswith(STOP):
                serve.stop()
                continue
            if step.startswith(START):
                serve.start()
                continue
            ran = subprocess.run(
                ["bash", "-c", step[2:].replace("3030", str(port))], cwd=REPO, env=env,
                capture_output=True, text=True, timeout=120, check=False,
            )  # fmt: skip
            assert ran.returncode == 0, (step, ran.stderr)
            assert ran.stdout.splitlines() == expected, step
    finally:
        serve.stop()
