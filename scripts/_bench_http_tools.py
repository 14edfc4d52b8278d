"""Process and load-tool plumbing of `scripts/bench_http.py`, apart from what it measures.

The benchmark itself (seeding, the hello baselines, the handoff client, the runs and the JSON
line) stays in `bench_http.py`; what it drives them with is here:

- child processes: `Processes` starts them (in the repository root, output to a log) and stops
  every one by pid, SIGTERM then SIGKILL; `wait_ready` polls a server until it answers;
  `stop_on_signals` turns SIGTERM into SystemExit so every `finally` runs;
- what a live process used: `peak_rss_of` (VmHWM) and `cpu_seconds_of` (user plus system time),
  both from `/proc`;
- the load tool: `ensure_wrk` finds or installs Debian's `wrk`, `LuaArgs` and `run_wrk` run it
  with `bench_http.lua` and parse the script's `BENCH_JSON` line, `wrk_figures` turns that into
  requests/s and latencies in ms.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _bench_common import note

ROOT = Path(__file__).resolve().parent.parent
LUA = Path(__file__).resolve().parent / "bench_http.lua"

# -- child processes --------------------------------------------------------------------------


class Processes:
    """Every child process this script started, stopped by pid on exit."""

    def __init__(self) -> None:
        self.children: list[subprocess.Popen[bytes]] = []

    def start(
        self, argv: list[str], log: Path, env: dict[str, str], cwd: Path = ROOT
    ) -> subprocess.Popen[bytes]:
        """Start `argv` in `cwd` (another checkout's tree for a `--compare-ref` side)."""
        with open(log, "ab") as sink:
            proc = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT, env=env, cwd=cwd)
        self.children.append(proc)
        return proc

    def stop(self, proc: subprocess.Popen[bytes]) -> None:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)

    def stop_all(self) -> None:
        for proc in reversed(self.children):
            try:
                self.stop(proc)
            except Exception as exc:  # keep stopping the others
                note(f"could not stop pid {proc.pid}: {exc}")


def wait_ready(proc: subprocess.Popen[bytes], port: int, path: str, log: Path) -> None:
    """Poll `GET path` until it answers 200; fail with the log's tail if the process dies."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"server exited with {proc.returncode}:\n{tail}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", path)
            if conn.getresponse().status == 200:
                conn.close()
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"server on port {port} did not become ready")


@contextmanager
def stop_on_signals() -> Iterator[None]:
    """Turn SIGTERM into SystemExit so every `finally` runs."""

    def handler(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


# -- what a live process used (/proc) ---------------------------------------------------------


def peak_rss_of(pid: int) -> float:
    """Peak RSS (VmHWM) of a live process in MiB, or NaN."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return float("nan")


def cpu_seconds_of(pid: int) -> float:
    """User plus system CPU time of a live process (all its threads) in seconds, or NaN."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# -- the load tool ----------------------------------------------------------------------------


def ensure_wrk() -> str:
    """The path of `wrk`, installing Debian's package with apt-get if it is missing."""
    found = shutil.which("wrk")
    if found:
        return found
    note("wrk not found: installing Debian's wrk with apt-get")
    install = ["apt-get", "install", "-y", "-q", "wrk"]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    if subprocess.run(install, env=env, check=False).returncode != 0:
        subprocess.run(["apt-get", "update", "-q"], env=env, check=True)
        subprocess.run(install, env=env, check=True)
    found = shutil.which("wrk")
    if not found:
        raise RuntimeError("wrk is still missing after apt-get install wrk")
    return found


@dataclass(frozen=True, slots=True)
class LuaArgs:
    """What `bench_http.lua` needs besides the mode and the run tag."""

    token: str
    project: str
    epoch: str
    seed_facts: int
    head_seq: int
    session: str

    def argv(self, mode: str, tag: str) -> list[str]:
        """The arguments after wrk's `--`, in the order `init(args)` reads them."""
        return [
            mode,
            self.token,
            self.project,
            self.epoch,
            tag,
            str(self.seed_facts),
            str(self.head_seq),
            self.session,
        ]


def run_wrk(wrk: str, port: int, mode: str, seconds: int, lua: LuaArgs, tag: str) -> dict[str, Any]:
    """One wrk run; the parsed `BENCH_JSON` line of the Lua `done()`. The run tag keeps
    fact and command ids unique across warm-up and measured runs."""
    argv = [
        wrk,
        "-t2",
        "-c32",
        f"-d{seconds}s",
        "--latency",
        "--timeout",
        "10s",
        "-s",
        str(LUA),
        f"http://127.0.0.1:{port}",
        "--",
        *lua.argv(mode, tag),
    ]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 60, check=False)
    for line in result.stdout.splitlines():
        if line.startswith("BENCH_JSON "):
            parsed: dict[str, Any] = json.loads(line[len("BENCH_JSON ") :])
            return parsed
    raise RuntimeError(f"wrk {mode} printed no result:\n{result.stdout}\n{result.stderr}")


def wrk_figures(raw: dict[str, Any]) -> dict[str, Any]:
    """requests/s and latency in ms from one parsed wrk run."""
    lat = raw["latency_us"]
    errors = raw["errors"]
    return {
        "rps": round(raw["requests"] / (raw["duration_us"] / 1e6), 1),
        "requests": raw["requests"],
        "p50_ms": lat["p50"] / 1000,
        "p95_ms": lat["p95"] / 1000,
        "p99_ms": lat["p99"] / 1000,
        "max_ms": lat["max"] / 1000,
        "errors": errors["status"]
        + errors["connect"]
        + errors["read"]
        + errors["write"]
        + errors["timeout"],
    }
