"""The console routes' components (`console_routes`, CONSOLE-*)."""

from __future__ import annotations

from aidememo.http.schemas import Schema, integer, obj, ref


def console_schemas(s: dict[str, Schema]) -> None:
    """The console's sign-in answers and files."""
    s["ConsoleSession"] = obj(
        {"tenant_id": ref("Id"), "actor_id": ref("Id"), "expires_at_ms": integer(0)}
    )
    s["ConsoleSignedOut"] = obj({"signed_out": {"const": True}})
    s["ConsoleFile"] = {"type": "string", "description": "A file of the console (CONSOLE-1)."}
