"""Copy the edge packages into build/ for wrangler (stdlib only).

wrangler bundles every .py file under the folder of `main`. Pointing `main` at
build/worker/entry.py and copying exactly the edge packages there keeps tests, origin and the
CPython-only front ends (cli, client, mcp, memory) out of the Worker bundle.

Usage: python3 scripts/build_edge.py [--out DIR]   (default: <repo>/build)
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# The core subpackages and modules of aidememo/ that run at the edge.
CORE_PACKAGES = ("domain", "service", "stores", "http", "conformance")
CORE_MODULES = ("__init__.py", "ports.py")
# Whole top-level packages that run at the edge.
EDGE_PACKAGES = ("worker", "durable_objects")


def _copy_tree(src: Path, dst: Path) -> int:
    """Copy the .py files of src into dst, keeping the layout; skip __pycache__."""
    count = 0
    for path in sorted(src.rglob("*.py")):
        rel = path.relative_to(src)
        if "__pycache__" in rel.parts:
            continue
        target = dst / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
        count += 1
    return count


def build(out: Path) -> int:
    """Build into a fresh sibling folder, then swap it in: a concurrent run never sees half."""
    out.parent.mkdir(parents=True, exist_ok=True)
    fresh = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        count = _fill(fresh)
        stale = out.with_name(f".{out.name}-stale-{os.getpid()}")
        if out.exists():
            out.rename(stale)
        fresh.rename(out)
        shutil.rmtree(stale, ignore_errors=True)
    finally:
        shutil.rmtree(fresh, ignore_errors=True)
    return count


def _fill(out: Path) -> int:
    count = 0
    core_src = REPO / "aidememo"
    core_dst = out / "aidememo"
    core_dst.mkdir()
    for name in CORE_MODULES:
        if (core_src / name).is_file():
            shutil.copy2(core_src / name, core_dst / name)
            count += 1
    for name in CORE_PACKAGES:
        if (core_src / name).is_dir():
            count += _copy_tree(core_src / name, core_dst / name)
    for name in EDGE_PACKAGES:
        if (REPO / name).is_dir():
            count += _copy_tree(REPO / name, out / name)
    return count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "build")
    args = parser.parse_args(argv)
    count = build(args.out)
    print(f"build_edge: copied {count} files into {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
