"""The console's files (SPEC.md CONSOLE-1): the set a request can name, their media types, and
the copy the edge's Worker bundle carries as a module (it holds only .py files)."""

from __future__ import annotations

import importlib.util
import runpy
import zipfile
from pathlib import Path

from aidememo import console

REPO = Path(__file__).resolve().parents[2]


def test_console1_only_the_shipped_files_are_named_with_their_media_types() -> None:
    names = set(console.names())
    assert {"index.html", "console.js", "console.css"} <= names
    assert console.asset("index.html") is not None
    body, media = console.asset("console.js") or (b"", "")
    assert media.startswith("text/javascript") and b"innerHTML" not in body
    for name in ("..", "../__init__.py", "__init__.py", "static", ""):
        assert console.asset(name) is None


def test_console1_edge_bundle_carries_the_same_files(tmp_path: Path) -> None:
    build = runpy.run_path(str(REPO / "scripts" / "build_edge.py"), run_name="build_edge")
    package = tmp_path / "console"
    assert build["_bundle_console"](console.STATIC, package) == 1
    spec = importlib.util.spec_from_file_location("bundled", package / "bundled.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    shipped = {p.name: p.read_bytes() for p in console.STATIC.iterdir() if p.is_file()}
    assert module.FILES == shipped


def test_console5_no_script_writes_markup() -> None:
    for path in console.STATIC.glob("*.js"):
        text = path.read_text()
        for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
            assert sink not in text, (path.name, sink)


def test_console1_files_stay_small_in_a_wheel(tmp_path: Path) -> None:
    wheel = tmp_path / "console.zip"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in console.STATIC.iterdir():
            zf.write(path, path.name)
    assert wheel.stat().st_size <= 300_000
