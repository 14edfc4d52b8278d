"""Run a Markdown document's code blocks in order, as a reader in the checkout would.

A document is split into fenced blocks. `bash` blocks run whole in bash (`set -eo pipefail`);
`console` blocks run each `$ ` line and compare what it prints (stdout and stderr) with the
lines under it, exactly; `python` blocks run in the checkout's Python, and a `text` block
right after `<!-- docs-test: output -->` is what the Python block before it must print. A
block after `<!-- docs-test: skip (reason) -->` is not run; any other block of these documents
that cannot run is an error, so nothing is left unchecked by accident. In a console block,
`# stop scripts/serve` and `# start scripts/serve` lines stop and restart the server.

The server listens on its own port: `127.0.0.1:3030` in the text is replaced by it (in the
commands and in the expected output alike); `HOME` is a temporary directory, so `~/.aidememo`
is the test's own.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
SKIP = re.compile(r"<!-- docs-test: skip \((?P<reason>[^)]+)\) -->")
OUTPUT = "<!-- docs-test: output -->"
RUNNABLE = {"bash", "console", "python"}
STARTUP_TIMEOUT_S = 240.0
COMMAND_TIMEOUT_S = 120.0


@dataclass
class Block:
    """One fenced block: its language, text, first line number and marker."""

    lang: str
    text: str
    line: int
    marker: str  # "", "skip" or "output"


def blocks(path: Path) -> list[Block]:
    """The fenced blocks of `path` in order, each with the marker right before it."""
    found: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.startswith("```"):
            i += 1
            continue
        lang = line[3:].strip()
        before = next((lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        marker = "skip" if SKIP.fullmatch(before) else "output" if before == OUTPUT else ""
        end = i + 1
        while end < len(lines) and not lines[end].startswith("```"):
            end += 1
        found.append(Block(lang, "\n".join(lines[i + 1 : end]) + "\n", i + 1, marker))
        i = end + 1
    return found


class Serve:
    """`scripts/serve --port PORT` with `HOME` a temporary directory, in its own group."""

    def __init__(self, home: Path, port: int, log: Path) -> None:
        self.home, self.port, self.log = home, port, log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = clean_env(self.home)
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [str(REPO / "scripts" / "serve"), "--port", str(self.port)],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                start_new_session=True,
            )
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            assert self.proc.poll() is None, self.log.read_text(errors="replace")
            try:
                url = f"http://127.0.0.1:{self.port}/health"
                if httpx.get(url, timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, self.log.read_text(errors="replace")
            time.sleep(0.1)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)


def clean_env(home: Path) -> dict[str, str]:
    """The environment of a reader's terminal: the checkout's `.venv` first on PATH, no
    `AIDEMEMO_*`, `CODEX_HOME` or virtualenv of ours, `HOME` the test's."""
    drop = ("AIDEMEMO_", "VIRTUAL_ENV", "CODEX_HOME", "PYTHONDONTWRITEBYTECODE")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env["HOME"] = str(home)
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    return env


@dataclass
class Reader:
    """Runs blocks in one working directory (with `.venv` and `scripts` of the checkout)."""

    work: Path
    home: Path
    serve: Serve

    def local(self, text: str) -> str:
        return text.replace("127.0.0.1:3030", f"127.0.0.1:{self.serve.port}")

    def shell(self, script: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-c", "set -eo pipefail\n" + self.local(script)],
            cwd=self.work,
            env=clean_env(self.home),
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT_S,
            check=False,
        )

    def run(self, path: Path) -> int:
        """Run every block of `path`; the number run."""
        found = blocks(path)
        ran = 0
        for index, block in enumerate(found):
            where = f"{path.name}:{block.line}"
            if block.marker == "skip" or (block.marker == "output" and block.lang == "text"):
                continue
            assert block.lang in RUNNABLE, f"{where}: a ```{block.lang} block without a marker"
            if block.lang == "bash":
                done = self.shell(block.text)
                assert done.returncode == 0, (where, done.stdout, done.stderr)
            elif block.lang == "console":
                self.console(where, block.text)
            else:
                following = found[index + 1] if index + 1 < len(found) else None
                expected = following.text if following and following.marker == "output" else None
                self.python(where, block.text, expected)
            ran += 1
        return ran

    def python(self, where: str, code: str, expected: str | None) -> None:
        done = subprocess.run(
            [sys.executable, "-c", self.local(code)],
            cwd=self.work,
            env=clean_env(self.home),
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT_S,
            check=False,
        )
        assert done.returncode == 0, (where, done.stdout, done.stderr)
        if expected is not None:
            assert done.stdout == expected, (where, done.stdout)

    def console(self, where: str, text: str) -> None:
        actions: dict[str, Callable[[], None]] = {
            "# stop scripts/serve": self.serve.stop,
            "# start scripts/serve": self.serve.start,
        }
        steps: list[tuple[str, list[str]]] = []
        for line in text.splitlines():
            if line.startswith("$ "):
                steps.append((line[2:], []))
            elif any(line.startswith(prefix) for prefix in actions):
                steps.append((line, []))
            else:
                assert steps, f"{where}: output before the first command: {line!r}"
                steps[-1][1].append(line)
        for command, lines in steps:
            action = next((a for prefix, a in actions.items() if command.startswith(prefix)), None)
            if action is not None:
                action()
                continue
            done = self.shell(command)
            printed = done.stdout + done.stderr
            want = self.local("".join(line + "\n" for line in lines))
            assert printed == want, (
                f"{where}: $ {command}\n--- printed\n{printed}--- expected\n{want}"
            )
