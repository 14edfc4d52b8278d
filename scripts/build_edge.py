"""Copy the edge packages into build/; vendor the Workers SDK and pg8000 into python_modules/.

wrangler bundles every .py file under the folder of `main`. Pointing `main` at
build/worker/entry.py and copying exactly the edge packages there keeps tests, origin and the
CPython-only front ends (cli, client, mcp, memory) out of the Worker bundle.

wrangler uploads a `python_modules/` folder next to wrangler.toml as vendored modules (and
refuses one inside the module root, build/), so what the Worker imports beyond the stdlib goes
there:
- the Workers SDK (`workers-runtime-sdk`, the `workers` package and its top-level helpers): at
  our compatibility date workerd no longer supplies it (`enable_python_external_sdk` is on by
  default), so a Worker without it fails at start with `No module named 'workers'`;
- pg8000 and its pure-Python dependencies, for the PostgreSQL mode (`STORAGE_MODE=postgres`).
Each pinned distribution contributes its modules (`.py`, plus the SDK's `.js` helper and `.pth`)
and its `METADATA` (pg8000 and scramp read their own version through `importlib.metadata` at
import). Each is copied from an installed distribution of the pinned version (this
interpreter's, or the repo's .venv), else from its wheel in `.cache/wheels/` (where
scripts/test keeps the SDK's), and only when neither exists fetched with
`pip download --no-deps` from the package index into that cache. A complete python_modules/ is
left as is.

Usage: python3 scripts/build_edge.py [--out DIR] [--vendor DIR]
       (defaults: <repo>/build and <repo>/python_modules)
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# The core subpackages and modules of aidememo/ that run at the edge.
CORE_PACKAGES = ("domain", "service", "stores", "http", "conformance", "mcp", "bodies", "console")
CORE_MODULES = ("__init__.py", "ports.py", "metrics.py")
# Whole top-level packages that run at the edge.
EDGE_PACKAGES = ("worker", "durable_objects")
# The Workers SDK (same pin as scripts/_lib.sh), then pg8000 and what its wheel requires
# (pg8000: python-dateutil, scramp; scramp: asn1crypto; python-dateutil: six), all pure Python,
# pinned: distribution -> (version, top-level names).
SDK_DIST = "workers-runtime-sdk"
VENDORED: dict[str, tuple[str, tuple[str, ...]]] = {
    SDK_DIST: (
        "1.9.5",
        (
            "workers",
            "asgi",
            "_workers_sdk_patch_loader",
            "_workers_sdk_package_patches",
            "_workers_sdk_entropy_import_context",
        ),
    ),
    "pg8000": ("1.31.6", ("pg8000",)),
    "scramp": ("1.5.0", ("scramp",)),
    "asn1crypto": ("1.5.1", ("asn1crypto",)),
    "python-dateutil": ("2.9.0.post0", ("dateutil",)),
    "six": ("1.17.0", ("six",)),
}
# Module files that go up: Python sources, the SDK's JavaScript helper (workers/workflows.js,
# imported by the SDK at run time) and its `.pth` loader.
MODULE_SUFFIXES = (".py", ".js", ".pth")
WHEEL_CACHE = REPO / ".cache" / "wheels"


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
    return count + _bundle_console(core_src / "console" / "static", core_dst / "console")


def _bundle_console(static: Path, package: Path) -> int:
    """The console's files as one module, `aidememo/console/bundled.py` (`FILES`: name ->
    bytes): the Worker bundle holds only .py files (CONSOLE-1)."""
    if not static.is_dir():
        return 0
    lines = ['"""The console\'s files, written by scripts/build_edge.py."""', "", "FILES = {"]
    for path in sorted(p for p in static.iterdir() if p.is_file()):
        lines.append(f"    {path.name!r}: {path.read_bytes()!r},")
    lines.append("}")
    package.mkdir(parents=True, exist_ok=True)
    (package / "bundled.py").write_text("\n".join(lines) + "\n")
    return 1


# -- vendored modules -----------------------------------------------------------------------


def _dist_info(name: str, version: str) -> str:
    """The wheel's .dist-info folder name (PEP 427: `-` in the name becomes `_`)."""
    return f"{name.replace('-', '_')}-{version}.dist-info"


def vendor_complete(vendor: Path) -> bool:
    """Every pinned distribution is in `vendor`, at its version."""
    return all(
        (vendor / _dist_info(name, version) / "METADATA").is_file()
        and all((vendor / top).is_dir() or (vendor / f"{top}.py").is_file() for top in tops)
        for name, (version, tops) in VENDORED.items()
    )


def _search_paths() -> list[list[str]]:
    """Where installed distributions may be: this interpreter, then the repo's .venv."""
    venv = sorted(str(p) for p in (REPO / ".venv").glob("lib/python3*/site-packages"))
    return [sys.path, venv]


def _installed(name: str, version: str) -> metadata.Distribution | None:
    for path in _search_paths():
        for dist in metadata.distributions(name=name, path=path):
            if dist.version == version:
                return dist
    return None


def _vendored_file(rel: str, tops: tuple[str, ...], dist_info: str) -> bool:
    """A file of the distribution that goes up: modules of its packages, and its METADATA."""
    parts = Path(rel).parts
    if "__pycache__" in parts:
        return False
    if parts[0] == dist_info or parts[0].endswith(".dist-info"):
        return parts[-1] == "METADATA"
    top = parts[0] if len(parts) > 1 else Path(parts[0]).stem
    return top in tops and rel.endswith(MODULE_SUFFIXES)


def _copy_installed(dist: metadata.Distribution, tops: tuple[str, ...], dst: Path) -> int:
    name = dist.metadata["Name"]
    info = _dist_info(name, dist.version)
    count = 0
    for file in dist.files or ():
        rel = file.as_posix()
        if not _vendored_file(rel, tops, info):
            continue
        # The installed .dist-info may be spelled otherwise; the vendored one is canonical.
        target = dst / (f"{info}/METADATA" if rel.endswith(".dist-info/METADATA") else rel)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(Path(str(dist.locate_file(file))), target)
        count += 1
    return count


def _cached_wheel(name: str, version: str) -> Path | None:
    pattern = f"{name.replace('-', '_')}-{version}-*.whl"
    return next(iter(sorted(WHEEL_CACHE.glob(pattern))), None)


def _download(name: str, version: str) -> Path:
    """`pip download --no-deps` of the pinned wheel (needs the package index) into the cache;
    downloaded beside it and renamed, so a concurrent build never reads half a wheel."""
    WHEEL_CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=WHEEL_CACHE) as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
             "--only-binary=:all:", "--dest", tmp, f"{name}=={version}"],
            check=True,
        )  # fmt: skip
        (wheel,) = Path(tmp).glob("*.whl")
        wheel.replace(WHEEL_CACHE / wheel.name)
    found = _cached_wheel(name, version)
    if found is None:
        raise SystemExit(f"build_edge: pip download left no {name} {version} wheel")
    return found


def _unpack(wheel: Path, name: str, version: str, tops: tuple[str, ...], dst: Path) -> int:
    info = _dist_info(name, version)
    count = 0
    with zipfile.ZipFile(wheel) as archive:
        for member in archive.namelist():
            if _vendored_file(member, tops, info):
                target = dst / member
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(archive.read(member))
                count += 1
    return count


def vendor(dst: Path) -> int:
    """Fill `dst` (new, empty) with every pinned distribution; the number of files."""
    count = 0
    for name, (version, tops) in VENDORED.items():
        dist = _installed(name, version)
        if dist is not None:
            count += _copy_installed(dist, tops, dst)
            continue
        wheel = _cached_wheel(name, version)
        if wheel is None:
            print(f"build_edge: {name}=={version} is not installed; downloading", file=sys.stderr)
            wheel = _download(name, version)
        count += _unpack(wheel, name, version, tops, dst)
    if not vendor_complete(dst):
        raise SystemExit(f"build_edge: vendoring left {dst} incomplete")
    return count


def build_vendor(out: Path) -> int:
    """Make `out` complete, swapping a fresh folder in like `build`; 0 when it already was."""
    if vendor_complete(out):
        return 0
    out.parent.mkdir(parents=True, exist_ok=True)
    fresh = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        count = vendor(fresh)
        stale = out.with_name(f".{out.name}-stale-{os.getpid()}")
        if out.exists():
            out.rename(stale)
        fresh.rename(out)
        shutil.rmtree(stale, ignore_errors=True)
    finally:
        shutil.rmtree(fresh, ignore_errors=True)
    return count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "build")
    parser.add_argument("--vendor", type=Path, default=REPO / "python_modules")
    args = parser.parse_args(argv)
    if args.vendor.resolve().is_relative_to(args.out.resolve()):
        parser.error("--vendor must not sit inside --out (wrangler refuses it in the module root)")
    count = build(args.out)
    print(f"build_edge: copied {count} files into {args.out}", file=sys.stderr)
    vendored = build_vendor(args.vendor)
    what = f"vendored {vendored} files into" if vendored else "up to date:"
    print(f"build_edge: {what} {args.vendor}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
