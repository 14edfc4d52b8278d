"""Every component schema of the contract, gathered from the route families' `*_schemas`
modules: the OpenAPI document's `components` and the MCP tools' output schemas."""

from __future__ import annotations

from aidememo.http.admin_schemas import admin_schemas
from aidememo.http.artifact_schemas import artifact_schemas
from aidememo.http.console_schemas import console_schemas
from aidememo.http.member_schemas import member_schemas
from aidememo.http.schemas import Schema, base_schemas
from aidememo.mcp.schemas import mcp_schemas


def component_schemas() -> dict[str, Schema]:
    """The component schemas by name."""
    s: dict[str, Schema] = {}
    for add in (
        base_schemas,
        member_schemas,
        admin_schemas,
        console_schemas,
        mcp_schemas,
        artifact_schemas,
    ):
        add(s)
    return s
