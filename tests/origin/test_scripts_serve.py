"""`scripts/serve`, the README's first command: first run bootstraps the demo, later runs reuse it.

The script installs into `.venv` when `pyproject.toml` changed; this test runs only when that
install is already current (the stamp matches), so it never installs anything itself.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import signal
import socket
import stat
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "serve"
STAMP = REPO / ".venv" / ".aidememo-pyproject.sha256"
STARTUP_TIMEOUT_S = 240.0


def _venv_current() -> bool:
    want = hashlib.sha256((REPO / "pyproject.toml").read_bytes()).hexdigest()
    return STAMP.is_file() and STAMP.read_text().strip() == want


pytestmark = pytest.mark.skipif(
    not _venv_current(), reason="scripts/serve would install into .venv first (stamp is stale)"
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def run_script(
    tmp_path: Path, home: Path, port: int, name: str, probe: Callable[[], None] = lambda: None
) -> tuple[str, str]:
    """Run scripts/serve until healthy, call `probe`, stop it with SIGTERM; (stdout, stderr)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIDEMEMO_", "VIRTUAL_ENV"))}
    env["AIDEMEMO_HOME"] = str(home)
    env["HOME"] = str(tmp_path)  # nothing may reach the real home directory
    out_path, err_path = tmp_path / f"{name}.out", tmp_path / f"{name}.err"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen(
            [str(SCRIPT), "--port", str(port)],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,  # its own process group, so cleanup reaches every child
        )
    try:
        # Generous: another checkout's scripts/test may hold the install lock of _lib.sh.
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            assert proc.poll() is None, err_path.read_text()
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, err_path.read_text()
            time.sleep(0.1)
        probe()
        proc.send_signal(signal.SIGTERM)  # the script exec'd the server: same pid
        assert proc.wait(timeout=15) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
    return out_path.read_text(), err_path.read_text()


def test_deploy12_scripts_serve_first_run_bootstraps_demo_and_second_run_skips_it(
    tmp_path: Path,
) -> None:
    home = tmp_path / "aidememo-home"
    port = free_port()
    token_file = home / "demo.token"
    seen: list[dict[str, str]] = []

    def identity() -> None:
        bearer = {"authorization": f"Bearer {token_file.read_text().strip()}"}
        url = f"http://127.0.0.1:{port}/v1/projects/demo/identity"
        response = httpx.get(url, headers=bearer, timeout=5)
        assert response.status_code == 200, response.text
        seen.append(response.json())

    out, err = run_script(tmp_path, home, port, "first", identity)
    assert seen[0]["tenant_id"] == "local" and seen[0]["actor_id"] == "demo-agent"
    assert seen[0]["role"] == "writer"
    assert f"http://127.0.0.1:{port}" in out
    assert str(token_file) in out
    assert "bootstrapping demo project" in err
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert stat.S_IMODE((home / "ssot.sqlite").stat().st_mode) == 0o600
    token = token_file.read_text().strip()
    assert token not in out + err

    curl = next(line for line in out.splitlines() if "curl" in line)
    assert re.search(r'curl -H "authorization: Bearer \$\(cat .*demo\.token\)" http://', curl)
    url = shlex.split(curl.split("try:", 1)[1])[-1]
    assert url == f"http://127.0.0.1:{port}/v1/projects/demo/identity"

    port2 = free_port()
    out2, err2 = run_script(tmp_path, home, port2, "second")
    assert "bootstrapping" not in err2
    assert f"http://127.0.0.1:{port2}" in out2
    assert token_file.read_text().strip() == token


def test_cli7_a_second_scripts_serve_on_a_taken_port_names_it_before_printing_a_url(
    tmp_path: Path,
) -> None:
    """A second `scripts/serve` on the port of a running one prints no URL: one line naming the
    port, the aidememo that holds it and the `--port` to use instead, exit 1."""
    home = tmp_path / "aidememo-home"
    port = free_port()
    second: list[subprocess.CompletedProcess[str]] = []

    def again() -> None:
        env = {
            k: v for k, v in os.environ.items() if not k.startswith(("AIDEMEMO_", "VIRTUAL_ENV"))
        }
        env["AIDEMEMO_HOME"] = str(home)
        env["HOME"] = str(tmp_path)
        second.append(subprocess.run([str(SCRIPT), "--port", str(port)], env=env, text=True,
                                     capture_output=True, timeout=120, check=False))  # fmt: skip

    run_script(tmp_path, home, port, "first", again)
    done = second[0]
    assert done.returncode == 1, done
    assert "aidememo serving" not in done.stdout and "http://" not in done.stdout
    assert f"port {port} on 127.0.0.1 is already in use by an aidememo server" in done.stderr
    assert f"scripts/serve --port {port + 1}" in done.stderr
