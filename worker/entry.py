"""Python Worker entry point (placeholder until the edge issue).

Serves GET /health with the SQLite schema version of the shared store; every other route is a
404 in the contract's error shape.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from workers import Response, WorkerEntrypoint

from aidememo.stores.sqlite.schema import SCHEMA_VERSION


class Default(WorkerEntrypoint):  # type: ignore[misc]
    async def fetch(self, request: Any) -> Any:
        path = urlsplit(str(request.url)).path
        if path == "/health":
            return Response.json({"status": "ok", "mode": "edge", "schema_version": SCHEMA_VERSION})
        return Response.json(
            {"error": {"code": "route_not_found", "message": f"no route for {path}"}},
            status=404,
        )
