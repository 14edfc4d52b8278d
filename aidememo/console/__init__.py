"""The browser console's files (`static/`), shipped in the package and served at `/console`.

Plain HTML, CSS and JavaScript modules with no build step; `asset(name)` answers a file's
bytes and media type. The set of names is the directory's own, read once, so a request can
name nothing else (no path ever reaches the file system from a request).
"""

from __future__ import annotations

import functools
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


@functools.cache
def _assets() -> dict[str, tuple[bytes, str]]:
    found: dict[str, tuple[bytes, str]] = {}
    for path in sorted(STATIC.iterdir()):
        media = _MEDIA.get(path.suffix)
        if media is not None and path.is_file():
            found[path.name] = (path.read_bytes(), media)
    return found


def asset(name: str) -> tuple[bytes, str] | None:
    """The bytes and media type of the console file `name`, or None when there is none."""
    return _assets().get(name)


def names() -> tuple[str, ...]:
    """Every console file's name."""
    return tuple(_assets())
