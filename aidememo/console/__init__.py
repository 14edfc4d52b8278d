"""The browser console's files (`static/`), shipped in the package and served at `/console`.

Plain HTML, CSS and JavaScript modules with no build step; `asset(name)` answers a file's
bytes and media type. The set of names is the directory's own, read once, so a request can
name nothing else (no path ever reaches the file system from a request). The edge's Worker
bundle holds only .py files, so there `scripts/build_edge.py` writes the same files into the
module `aidememo.console.bundled` (`FILES`), which is read instead when it exists.
"""

from __future__ import annotations

import functools
import importlib
from pathlib import Path

STATIC = Path(__file__).resolve().parent / "static"
INDEX = "index.html"

_MEDIA = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
}


def _files() -> dict[str, bytes]:
    try:
        bundled = importlib.import_module("aidememo.console.bundled")
    except ImportError:
        return {p.name: p.read_bytes() for p in sorted(STATIC.iterdir()) if p.is_file()}
    files: dict[str, bytes] = bundled.FILES
    return files


@functools.cache
def _assets() -> dict[str, tuple[bytes, str]]:
    found: dict[str, tuple[bytes, str]] = {}
    for name, body in _files().items():
        media = _MEDIA.get(Path(name).suffix)
        if media is not None:
            found[name] = (body, media)
    return found


def asset(name: str) -> tuple[bytes, str] | None:
    """The bytes and media type of the console file `name`, or None when there is none."""
    return _assets().get(name)


def names() -> tuple[str, ...]:
    """Every console file's name."""
    return tuple(_assets())
