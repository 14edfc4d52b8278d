"""Runs inside Pyodide (via edge_runner.mjs, first): where the Worker's modules came from.

edge_runner.mjs has imported the main module from /bundle with /bundle, /python_modules (the
build's vendored modules) and /harness (edge_glue, driver_support) on the path; this reports
the files of the main module and of the Workers SDK, the SDK's version from its vendored
METADATA, and every loaded module whose file lies anywhere else than there or in Pyodide's
own /lib (the stdlib and Pyodide's packages): none may.

`main()` returns {"entry", "workers", "sdk_version", "outside"}.
"""

from __future__ import annotations

import sys
from importlib import metadata
from typing import Any

ALLOWED = ("/bundle/", "/python_modules/", "/harness/", "/lib/")


async def main() -> dict[str, Any]:
    entry = sys.modules["entry"]
    workers = sys.modules["workers"]
    outside = sorted(
        name
        for name, module in list(sys.modules.items())
        if (path := getattr(module, "__file__", None)) and not str(path).startswith(ALLOWED)
    )
    return {
        "entry": entry.__file__,
        "workers": workers.__file__,
        "sdk_version": metadata.version("workers-runtime-sdk"),
        "outside": outside,
    }
