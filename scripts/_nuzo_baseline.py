"""The reference Nuzo 1.2.0's figures for `scripts/bench_memory.py --nuzo`.

Runs `_nuzo_bench.mjs` with the Node 22 of the compatibility tier's build (scripts/build_nuzo,
cached by scripts/_nuzo.sh): Nuzo's own core service remembers the same memories into a new
store (one transaction each) and answers the same recall queries, each timed around the call
inside Node, so the process start and the JSON hand-over are not in the figures. Stdlib only.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = Path(__file__).with_name("_nuzo_bench.mjs")
TARBALL_NAME = "nuzo-memory-1.2.0-src.tar.gz"


@dataclass(frozen=True)
class NuzoRun:
    """What Nuzo measured: the remember loop's wall and CPU time, every recall's wall and CPU
    duration (in query order, round after round), and the first round's results."""

    remember_s: float
    recall_ns: list[int]
    top_ids: list[list[str]]
    top_scores: list[list[float]]
    remember_cpu_s: float = 0.0
    recall_cpu_ns: list[int] = field(default_factory=list)


def nuzo_tarball() -> Path:
    """$AIDEMEMO_NUZO_TARBALL, else the tarball in shared/reference/ next to the checkout (for a
    git worktree, next to its main checkout): the places scripts/_nuzo.sh looks."""
    named = os.environ.get("AIDEMEMO_NUZO_TARBALL")
    if named:
        return Path(named)
    cand = ROOT.parent / "shared" / "reference" / TARBALL_NAME
    if cand.is_file():
        return cand
    out = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--path-format=absolute", "--git-common-dir"],
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode == 0 and out.stdout.strip():
        other = Path(out.stdout.strip()).parent.parent / "shared" / "reference" / TARBALL_NAME
        if other.is_file():
            return other
    return cand


def nuzo_build_dir() -> Path | None:
    """The cached build's directory (its `nuzo.env` marks it complete), or None."""
    named = os.environ.get("AIDEMEMO_NUZO_DIR")
    if named:
        root = Path(named)
    else:
        tarball = nuzo_tarball()
        if not tarball.is_file():
            return None
        sha = hashlib.sha256(tarball.read_bytes()).hexdigest()
        cache = os.environ.get("AIDEMEMO_NUZO_CACHE") or str(
            Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "aidememo"
        )
        root = Path(cache) / f"nuzo-{sha[:16]}"
    return root if (root / "nuzo.env").is_file() else None


def _node(build: Path) -> str:
    for line in (build / "nuzo.env").read_text(encoding="utf-8").splitlines():
        key, _, value = line.partition("=")
        if key == "NUZO_NODE":
            return value
    raise RuntimeError(f"{build / 'nuzo.env'} names no NUZO_NODE")


def run_nuzo(
    memories: Sequence[Mapping[str, Any]],
    queries: Sequence[Mapping[str, Any]],
    *,
    rounds: int = 1,
    build: Path | None = None,
    store: Path | None = None,
    timeout_s: float = 3600,
) -> NuzoRun:
    """Remember `memories` ({content, kind, scope, tags}) into a new store with Nuzo's core,
    then run `queries` ({query, scope, include_global, limit}) `rounds` times. The store is
    temporary unless `store` names where to keep it.

    Raises RuntimeError when there is no build (run scripts/build_nuzo first)."""
    build = build or nuzo_build_dir()
    if build is None:
        raise RuntimeError("no Nuzo build: run scripts/build_nuzo (needs the Nuzo source tarball)")
    with tempfile.TemporaryDirectory(prefix="aidememo-nuzo-bench-") as tmp:
        spec = Path(tmp) / "spec.json"
        out = Path(tmp) / "out.json"
        spec.write_text(
            json.dumps(
                {
                    "store": str(store or Path(tmp) / "memories.sqlite"),
                    "memories": [dict(m) for m in memories],
                    "queries": [dict(q) for q in queries],
                    "rounds": rounds,
                }
            ),
            encoding="utf-8",
        )
        proc = subprocess.run(
            [_node(build), str(SCRIPT), str(build / "src"), str(spec), str(out)],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"Nuzo baseline failed ({proc.returncode}): {proc.stderr[-2000:]}")
        data = json.loads(out.read_text(encoding="utf-8"))
    return NuzoRun(
        remember_s=float(data["remember_s"]),
        recall_ns=[int(v) for v in data["recall_ns"]],
        top_ids=[list(ids) for ids in data["top_ids"]],
        top_scores=[[float(v) for v in scores] for scores in data["top_scores"]],
        remember_cpu_s=float(data["remember_cpu_s"]),
        recall_cpu_ns=[int(v) for v in data["recall_cpu_ns"]],
    )
