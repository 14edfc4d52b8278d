"""The command envelope and strict field readers shared by every request shape.

Unknown fields are rejected, absent optional fields read as null, and identifiers are
checked by grammar, so a body either decodes completely or fails with one stable code.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aidememo.domain.canonical import JsonValue
from aidememo.domain.errors import ErrorCode, fail
from aidememo.domain.ids import validate_id, validate_name
from aidememo.domain.model import ChangeOp, ResourceRef

RAW_KIND_PREFIX = "custom."
RAW_OPERATIONS = {"resource.put": ChangeOp.UPSERT, "resource.delete": ChangeOp.DELETE}


@dataclass(frozen=True, slots=True)
class Command:
    """One mutation request: `{command_id, project_id, expected_revision, operation,
    resource: {kind, id}, change, payload}` (CMD-1)."""

    command_id: str
    project_id: str
    expected_revision: int | None
    operation: str
    resource: ResourceRef
    change: ChangeOp
    payload: JsonValue


def require_object(value: JsonValue, what: str) -> dict[str, Any]:
    """`value` as a JSON object, else `invalid_command`."""
    if not isinstance(value, dict):
        raise fail(ErrorCode.INVALID_COMMAND, f"{what} must be a JSON object")
    return value


def check_fields(
    obj: Mapping[str, Any], required: frozenset[str], optional: frozenset[str], what: str
) -> None:
    """Reject unknown and missing fields (CMD-2); identity fields are never accepted."""
    unknown = obj.keys() - required - optional
    if unknown:
        raise fail(ErrorCode.INVALID_COMMAND, f"{what}: unknown field(s) {sorted(unknown)}")
    missing = required - obj.keys()
    if missing:
        raise fail(ErrorCode.INVALID_COMMAND, f"{what}: missing field(s) {sorted(missing)}")


def read_str(obj: Mapping[str, Any], key: str, *, optional: bool = False) -> str | None:
    """A string field (None when optional and absent or null)."""
    value = obj.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise fail(ErrorCode.INVALID_COMMAND, f"{key} must be a string")
    return value


def read_revision(value: object, *, required: bool) -> int | None:
    """An expected revision: a positive integer, or null when not required (REV-1)."""
    if value is None and not required:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise fail(ErrorCode.INVALID_COMMAND, "expected_revision must be a positive integer")
    return value


def read_resource(value: JsonValue) -> ResourceRef:
    """A `{kind, id}` resource coordinate."""
    obj = require_object(value, "resource")
    check_fields(obj, frozenset({"kind", "id"}), frozenset(), "resource")
    kind = validate_name(obj["kind"], "resource.kind")
    return ResourceRef(kind, validate_id(obj["id"], "resource.id"))


_RAW_REQUIRED = frozenset({"command_id", "project_id", "operation", "resource", "change"})
_RAW_OPTIONAL = frozenset({"expected_revision", "payload"})


def parse_raw_command(value: JsonValue) -> Command:
    """Decode a `POST /v1/commands` body (CMD-1, CMD-4): only `custom.*` kinds, and
    `resource.put` with `upsert` and an object payload or `resource.delete` with `delete` and
    a null payload."""
    obj = require_object(value, "command")
    check_fields(obj, _RAW_REQUIRED, _RAW_OPTIONAL, "command")
    command_id = validate_id(obj["command_id"], "command_id")
    project_id = validate_id(obj["project_id"], "project_id")
    expected = read_revision(obj.get("expected_revision"), required=False)
    operation = validate_name(obj["operation"], "operation")
    resource = read_resource(obj["resource"])
    change = obj["change"]
    payload = obj.get("payload")
    if operation not in RAW_OPERATIONS:
        raise fail(ErrorCode.INVALID_COMMAND, "operation must be resource.put or resource.delete")
    if not resource.kind.startswith(RAW_KIND_PREFIX):
        raise fail(ErrorCode.INVALID_COMMAND, "raw commands may only write custom.* kinds")
    op = RAW_OPERATIONS[operation]
    if change != op.value:
        raise fail(ErrorCode.INVALID_COMMAND, f"{operation} goes with change {op.value!r}")
    if op is ChangeOp.UPSERT and not isinstance(payload, dict):
        raise fail(ErrorCode.INVALID_COMMAND, "resource.put needs a JSON object payload")
    if op is ChangeOp.DELETE and payload is not None:
        raise fail(ErrorCode.INVALID_COMMAND, "resource.delete needs a null payload")
    return Command(command_id, project_id, expected, operation, resource, op, payload)
