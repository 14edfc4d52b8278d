"""The OpenAPI 3.1 document of the HTTP contract, built as Python data.

It lives in code, not in a data file, so the edge bundle (which carries only `.py` modules)
serves the same document as the origin. `openapi.json` at the repository root is a copy kept
in sync by a test.
"""

from __future__ import annotations

import functools
from typing import Any

from aidememo import __version__
from aidememo.http.render import json_bytes
from aidememo.http.routes import ROUTES


def _operation(handler: str, authenticated: bool) -> dict[str, Any]:
    op: dict[str, Any] = {
        "operationId": handler.rstrip("_"),
        "responses": {"200": {"description": "OK"}},
    }
    if authenticated:
        op["security"] = [{"bearer": []}]
    return op


def document() -> dict[str, Any]:
    """The OpenAPI document as a dict."""
    paths: dict[str, dict[str, Any]] = {}
    for route in ROUTES:
        path = "/" + "/".join(route.pattern)
        paths.setdefault(path, {})[route.method.lower()] = _operation(
            route.handler, route.authenticated
        )
    return {
        "openapi": "3.1.0",
        "info": {"title": "aidememo", "version": __version__},
        "paths": paths,
        "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
    }


@functools.cache
def document_bytes() -> bytes:
    """The document as compact JSON, built once."""
    return json_bytes(document())
