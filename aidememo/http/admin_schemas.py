"""The admin routes' components (`admin_routes`, ADM-*)."""

from __future__ import annotations

from aidememo.http.schemas import Schema, integer, nullable, obj, ref


def admin_schemas(s: dict[str, Schema]) -> None:
    """The admin routes' bodies and answers."""
    digest = {
        "type": "string",
        "pattern": "^[0-9a-f]{64}$",
        "description": "SHA-256 of the token text, 64 lowercase hex characters.",
    }
    role = {"type": "string", "enum": ["owner", "admin", "writer", "reader"]}
    status = {"type": "string", "enum": ["active", "suspended"]}
    s["AdminBootstrap"] = obj(
        {
            "tenant_id": ref("Id"),
            "project_id": ref("Id"),
            "actor_id": ref("Id"),
            "token_sha256": digest,
        },
        {
            "actor_kind": nullable({"type": "string", "enum": ["agent", "human", "service"]}),
            "role": nullable(role),
            "project_epoch": nullable(ref("Id")),
        },
    )
    s["AdminMember"] = obj(
        {"tenant_id": ref("Id"), "project_id": ref("Id"), "actor_id": ref("Id")},
        {"role": nullable(role), "status": nullable(status)},
    )
    s["AdminMembership"] = obj(
        {
            "tenant_id": ref("Id"),
            "project_id": ref("Id"),
            "actor_id": ref("Id"),
            "role": role,
            "status": status,
        }
    )
    s["AdminRevoke"] = obj({"token_sha256": digest})
    s["AdminRevoked"] = obj({"revoked": {"const": True}})
    counts = {"type": "object", "additionalProperties": integer(0)}
    s["AdminImported"] = obj(
        {
            "tenant_id": ref("Id"),
            "project_epochs": {"type": "object", "additionalProperties": ref("Id")},
            "counts": counts,
        }
    )
    s["AdminDeleted"] = obj({"tenant_id": ref("Id"), "removed": counts})
    s["Archive"] = {
        "type": "string",
        "description": "JSON Lines: one record per line, the manifest last.",
    }
