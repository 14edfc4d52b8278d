"""The building blocks of JSON Schemas (`ref`, `obj`, `integer`, `text`, ...) and the components
every route family shares (errors, ids, names, sequences, the receipt).

Each route family declares its own components in its `*_schemas` module;
`aidememo.http.components` gathers them for the OpenAPI document and the MCP tools.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from aidememo.domain.errors import ErrorCode
from aidememo.domain.limits import (
    ID_MAX_BYTES,
    INT64_MAX,
    NAME_MAX_BYTES,
)

Schema = dict[str, Any]

JSON = "application/json"
_REF = "#/components/schemas/"


def ref(name: str) -> Schema:
    """A reference to a component schema."""
    return {"$ref": _REF + name}


def nullable(schema: Schema) -> Schema:
    """`schema` or null."""
    return {"anyOf": [schema, {"type": "null"}]}


def closed(properties: dict[str, Schema], required: Iterable[str]) -> Schema:
    """A closed object: exactly these properties, the ones named in `required` required."""
    return {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
    }


def obj(required: dict[str, Schema], optional: dict[str, Schema] | None = None) -> Schema:
    """A closed object: exactly these properties, the first group required."""
    return closed({**required, **(optional or {})}, required)


def integer(minimum: int = 0, maximum: int = INT64_MAX, **extra: Any) -> Schema:
    """A signed 64-bit integer in `[minimum, maximum]`."""
    return {"type": "integer", "minimum": minimum, "maximum": maximum, **extra}


def text(max_chars: int, max_bytes: int, *, min_length: int = 1, what: str = "") -> Schema:
    """A string limited in UTF-8 bytes (given in characters as the nearest JSON Schema can)."""
    note = f"{min_length}-{max_bytes} bytes of UTF-8"
    return {
        "type": "string",
        "minLength": min_length,
        "maxLength": max_chars,
        "description": f"{what} ({note})." if what else f"{note}.",
    }


NO_CONTROL = "^[^\\u0000-\\u0008\\u000b\\u000c\\u000e-\\u001f\\u007f]*$"


def base_schemas(s: dict[str, Schema]) -> None:
    """The components every family refers to."""
    s["ErrorCode"] = {
        "type": "string",
        "enum": [code.value for code in ErrorCode],
        "description": "Stable snake_case error code; clients switch on it, never on message.",
    }
    s["Error"] = obj(
        {
            "error": obj(
                {"code": ref("ErrorCode"), "message": {"type": "string"}},
                {"index_seq": integer(0)},  # index_not_ready: the index's sequence (SEM-5)
            )
        }
    )
    s["Id"] = {
        "type": "string",
        "pattern": f"^[A-Za-z0-9\\-_.:@]{{1,{ID_MAX_BYTES}}}$",
        "minLength": 1,
        "maxLength": ID_MAX_BYTES,
        "description": f"Identifier: 1-{ID_MAX_BYTES} bytes of [A-Za-z0-9-_.:@].",
    }
    s["Name"] = {
        "type": "string",
        "pattern": f"^[a-z0-9._\\-]{{1,{NAME_MAX_BYTES}}}$",
        "minLength": 1,
        "maxLength": NAME_MAX_BYTES,
        "description": f"Kind or operation name: 1-{NAME_MAX_BYTES} bytes of [a-z0-9._-].",
    }
    s["CustomKind"] = {
        "type": "string",
        "pattern": f"^custom\\.[a-z0-9._\\-]{{0,{NAME_MAX_BYTES - 7}}}$",
        "maxLength": NAME_MAX_BYTES,
        "description": "A resource kind writable through POST /v1/commands: custom.*.",
    }
    s["Seq"] = integer(1, description="A project sequence number (1 is the first change).")
    s["Revision"] = integer(1, description="A resource revision (1 is the first write).")
    s["TimestampMs"] = integer(0, description="Milliseconds since the Unix epoch.")
    s["Scope"] = obj({"tenant_id": ref("Id"), "project_id": ref("Id")})
    s["ResourceRef"] = obj({"kind": ref("Name"), "id": ref("Id")})
    s["Receipt"] = obj(
        {
            "command_id": ref("Id"),
            "fingerprint": {
                "type": "string",
                "pattern": "^[0-9a-f]{64}$",
                "description": "SHA-256 hex of the canonical command material.",
            },
            "tenant_id": ref("Id"),
            "project_id": ref("Id"),
            "actor_id": ref("Id"),
            "project_seq": ref("Seq"),
            "resource": ref("ResourceRef"),
            "revision": ref("Revision"),
            "committed_at_ms": ref("TimestampMs"),
        }
    )
