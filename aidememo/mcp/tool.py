"""What a tool of the MCP registry is (`Tool`), who calls it (`Context`) and the REST request
a call becomes (`Twin`); the registry itself is `aidememo.mcp.tools`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aidememo.http.schemas import closed

Schema = dict[str, Any]
Args = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Context:
    """Who calls and where: the project of the MCP endpoint and the token's actor."""

    project_id: str
    actor_id: str


@dataclass(frozen=True, slots=True)
class Twin:
    """The REST request a tool call becomes: path parameters (beside `project_id`), query
    parameters and the JSON body (None: no body)."""

    params: dict[str, str] = field(default_factory=dict)
    query: dict[str, Any] = field(default_factory=dict)
    body: dict[str, Any] | None = None


Build = Callable[[Context, Args], Twin]
Run = Callable[[Any, Any, Context, Args], dict[str, Any]]
"""`run(services, caller, ctx, args)`: a tool answered by the service instead of its twin's
handler (the artifact tools that carry bodies inline, `aidememo.mcp.artifact_tools`)."""


@dataclass(frozen=True, slots=True)
class Tool:
    """One tool: what `tools/list` shows of it and how a call reaches its REST twin."""

    name: str
    description: str
    route: str  # the twin's `Route.name`
    properties: dict[str, Schema]
    required: tuple[str, ...]
    write: bool
    output: Schema
    build: Build
    run: Run | None = None

    def listing(self) -> dict[str, Any]:
        """The tool as `tools/list` shows it."""
        return {
            "name": self.name,
            "title": self.name.replace("_", " "),
            "description": self.description,
            "inputSchema": closed(self.properties, self.required),
            "outputSchema": self.output,
            "annotations": {
                "readOnlyHint": not self.write,
                "destructiveHint": False,
                "idempotentHint": True,
                "openWorldHint": False,
            },
            # No tool runs as a task (2025-11-25 `execution`; the modern listing drops it).
            "execution": {"taskSupport": "forbidden"},
        }
