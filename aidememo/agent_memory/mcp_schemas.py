"""The 19 memory MCP tools' names, descriptions, annotations and input schemas (SPEC.md MEM-13).

Names (`memory.remember`, ...), descriptions, defaults and bounds are Nuzo 1.2's, as JSON Schema
objects; `validate` checks an arguments object against one and fills its defaults.
"""

from __future__ import annotations

import re
from typing import Any

from aidememo.agent_memory.jstext import utf16_len
from aidememo.agent_memory.model import (
    CAPTURE_DECISIONS,
    CHALLENGE_OUTCOMES,
    CONFIDENCE_STATES,
    EVENT_TYPES,
    KINDS,
    PROVENANCE_KINDS,
    RELATIONS,
)
from aidememo.agent_memory.policy import (
    ACTOR_MAX,
    CONTENT_MAX,
    DATE_MAX,
    ID_MAX,
    IMPORT_ITEMS_MAX,
    PROVENANCE_PATH_MAX,
    PROVENANCE_TEXT_MAX,
    QUERY_MAX,
    REASON_MAX,
    SCOPE_MAX,
    SOURCE_MAX,
    TAGS_MAX,
)

Schema = dict[str, Any]


class ToolInputError(ValueError):
    """Arguments that do not match a tool's input schema (an MCP invalid-params error)."""


def _s(
    min_len: int | None = None, max_len: int | None = None, pattern: str | None = None, **extra: Any
) -> Schema:
    bounds = {"minLength": min_len, "maxLength": max_len, "pattern": pattern}
    return {"type": "string"} | {k: v for k, v in bounds.items() if v is not None} | extra


# The largest integer JavaScript holds exactly: Nuzo's schemas bound every open integer by it.
MAX_SAFE_INTEGER = 9007199254740991


def _int(low: int, high: int = MAX_SAFE_INTEGER, **extra: Any) -> Schema:
    return {"type": "integer", "minimum": low, "maximum": high} | extra


def _enum(values: tuple[str, ...], **extra: Any) -> Schema:
    return {"type": "string", "enum": list(values)} | extra


def _bool(default: bool) -> Schema:
    return {"type": "boolean", "default": default}


def _null(schema: Schema) -> Schema:
    return {"anyOf": [schema, {"type": "null"}]}


def _arr(items: Schema, max_items: int | None = None, **extra: Any) -> Schema:
    out: Schema = {"type": "array", "items": items}
    if max_items is not None:
        out["maxItems"] = max_items
    return out | extra


def _obj(props: dict[str, Schema], required: tuple[str, ...] = (), strict: bool = False) -> Schema:
    out: Schema = {"type": "object", "properties": props}
    if required:
        out["required"] = list(required)
    if strict:
        out["additionalProperties"] = False
    return out


SCOPE = _s(max_len=SCOPE_MAX, pattern=r"^(user|project|agent|team):[A-Za-z0-9._~:/-]+$")
TAG = _s(pattern=r"^[a-z0-9][a-z0-9._-]{0,63}$")
MEMORY_ID = _s(1, ID_MAX)
DATE = _s(max_len=DATE_MAX)
CURSOR = _s(1, ID_MAX * 4)
TAGS = _arr(TAG, TAGS_MAX, default=[])
REASON = _s(1, REASON_MAX)
CONFIDENCE = {"type": "number", "minimum": 0, "maximum": 1}
ACTOR = _s(
    1,
    ACTOR_MAX,
    default="nuzo:mcp",
    description="Ignored compatibility field; MCP writes are attributed to the server.",
)
PROVENANCE = _obj(
    {
        "kind": _enum(PROVENANCE_KINDS),
        "host": _s(1, PROVENANCE_TEXT_MAX),
        "surface": _s(1, PROVENANCE_TEXT_MAX),
        "path": _s(1, PROVENANCE_PATH_MAX),
        "line": _int(1),
        "thread_id": _s(1, PROVENANCE_TEXT_MAX),
        "action": _s(1, PROVENANCE_TEXT_MAX),
        "reason": _s(1, REASON_MAX),
    },
    ("kind",),
    strict=True,
)
GOVERNANCE = {
    "confidence": CONFIDENCE,
    "confidence_state": _null(_enum(CONFIDENCE_STATES)),
    "provenance": _null(PROVENANCE),
    "review_after": _null(DATE),
    "expires_at": _null(DATE),
}


def _draft(scope_default: str, source: str) -> dict[str, Schema]:
    return {
        "content": _s(1, CONTENT_MAX),
        "kind": _enum(KINDS),
        "scope": SCOPE | {"default": scope_default},
        "tags": TAGS,
        "source": _s(1, SOURCE_MAX, default=source),
        **GOVERNANCE,
    }


READ = {
    "readOnlyHint": True,
    "destructiveHint": False,
    "idempotentHint": True,
    "openWorldHint": False,
}
WRITE = {
    "readOnlyHint": False,
    "destructiveHint": False,
    "idempotentHint": False,
    "openWorldHint": False,
}
DESTRUCTIVE = {
    "readOnlyHint": False,
    "destructiveHint": True,
    "idempotentHint": False,
    "openWorldHint": False,
}

IMPORT_ITEM = _obj(
    {
        "scope": SCOPE,
        "kind": _enum(KINDS),
        "content": _s(max_len=CONTENT_MAX),
        "tags": _arr(TAG, TAGS_MAX),
        "source": _s(1, SOURCE_MAX),
        "confidence": CONFIDENCE,
        "confidence_state": _null(_enum(CONFIDENCE_STATES)),
        "provenance": _null(PROVENANCE),
        "review_after": _null(DATE),
        "expires_at": _null(DATE),
        "created_at": DATE,
        "updated_at": DATE,
        "last_used_at": _null(DATE),
        "archived_at": _null(DATE),
    },
    (
        "scope",
        "kind",
        "content",
        "tags",
        "source",
        "confidence",
        "created_at",
        "updated_at",
        "last_used_at",
        "archived_at",
    ),
)
IMPORT_RELATION = _obj(
    {
        "source_index": _int(0),
        "target_index": _int(0),
        "relation": _enum(RELATIONS),
        "reason": _null(_s(1, REASON_MAX)),
        "created_at": DATE,
    },
    ("source_index", "target_index", "relation", "created_at"),
)
DOCUMENT = _obj(
    {
        "format": {"type": "string", "const": "nuzo-memory-export"},
        "version": {"type": "number", "const": 1},
        "exported_at": DATE,
        "memories": _arr(IMPORT_ITEM, IMPORT_ITEMS_MAX),
        "relations": _arr(IMPORT_RELATION, IMPORT_ITEMS_MAX),
    },
    ("format", "version", "exported_at", "memories"),
)


def tool_definitions(default_scope: str, recall_limit: int, include_global: bool) -> list[Schema]:
    """Every tool as `{name, description, annotations, execution, inputSchema}`, in Nuzo's
    order."""
    page = _int(1, 200, default=50)
    tools: list[tuple[str, str, Schema, dict[str, Schema], tuple[str, ...]]] = [
        (
            "memory.remember",
            "Store a local memory only when the user explicitly requested this"
            " exact write. For inferred capture, call memory.suggest_capture, display its returned"
            " draft, obtain the user's decision, then call memory.confirm_capture.",
            WRITE,
            _draft(default_scope, "nuzo:mcp"),
            ("content", "kind"),
        ),
        (
            "memory.recall",
            "Recall relevant local memories.",
            READ,
            {
                "query": _s(1, QUERY_MAX),
                "scope": SCOPE | {"default": default_scope},
                "limit": _int(1, 50, default=recall_limit),
                "include_global": _bool(include_global),
                "retrieval_mode": _enum(("fts", "semantic", "hybrid"), default="fts"),
                "semantic_fallback": _enum(("error", "fts")),
            },
            ("query",),
        ),
        (
            "memory.recall_hook",
            "Prototype read-only recall entrypoint for host lifecycle hooks."
            " It never captures or creates memories.",
            READ,
            {"task_context": _s(1, 8000), "project_scope": SCOPE, "limit": _int(1, 8, default=5)},
            ("task_context",),
        ),
        (
            "memory.suggest_capture",
            "Validate an inferred capture draft without writing. Display"
            " the returned draft to the user; only after their explicit decision may the host call"
            " memory.confirm_capture with the final approved fields.",
            READ,
            _draft(default_scope, "nuzo:capture-suggestion")
            | {"reason": REASON, "relationship_mode": _enum(("exact", "bounded"))},
            ("content", "kind", "reason"),
        ),
        (
            "memory.confirm_capture",
            "Apply the user's explicit decision after the host displayed"
            " a memory.suggest_capture draft. confirm=true is the host's attestation of that"
            " interaction; drafts are not persisted or cryptographically bound.",
            DESTRUCTIVE,
            {
                "decision": _enum(CAPTURE_DECISIONS),
                **_draft("user:default", "nuzo:capture-confirmed"),
                "reason": REASON,
                "confirm": _bool(False),
                "actor": ACTOR,
                "target_memory_id": MEMORY_ID,
                "expected_revision": _int(1),
            },
            ("decision", "content", "kind", "reason"),
        ),
        (
            "memory.list",
            "List local memories.",
            READ,
            {
                "scope": SCOPE,
                "tags": TAGS,
                "include_archived": _bool(False),
                "needs_review": _bool(False),
                "limit": page,
                "cursor": CURSOR,
            },
            (),
        ),
        (
            "memory.show",
            "Inspect one local memory with relations and recent audit events.",
            READ,
            {"id": MEMORY_ID, "history_limit": page},
            ("id",),
        ),
        (
            "memory.challenge",
            "Mark one memory as valid, needing review, stale, incorrect, or"
            " superseded. This never deletes memory content.",
            WRITE,
            {
                "id": MEMORY_ID,
                "outcome": _enum(CHALLENGE_OUTCOMES),
                "reason": REASON,
                "actor": ACTOR,
                "expected_revision": _int(1),
                "superseded_by_memory_id": MEMORY_ID,
            },
            ("id", "outcome", "reason"),
        ),
        (
            "memory.relate",
            "Create an explicit, manual relation between two local memories.",
            WRITE,
            {
                "source_memory_id": MEMORY_ID,
                "target_memory_id": MEMORY_ID,
                "relation": _enum(RELATIONS),
                "reason": REASON,
                "actor": ACTOR,
            },
            ("source_memory_id", "target_memory_id", "relation"),
        ),
        (
            "memory.relations",
            "List explicit relations for one local memory.",
            READ,
            {"memory_id": MEMORY_ID, "include_reverse": _bool(True), "limit": page},
            ("memory_id",),
        ),
        (
            "memory.unrelate",
            "Remove an explicit memory relation without deleting either memory.",
            DESTRUCTIVE,
            {"id": MEMORY_ID, "reason": REASON, "actor": ACTOR},
            ("id",),
        ),
        (
            "memory.update",
            "Update a local memory.",
            DESTRUCTIVE,
            {
                "id": MEMORY_ID,
                "expected_revision": _int(1),
                "content": _s(max_len=CONTENT_MAX),
                "kind": _enum(KINDS),
                "scope": SCOPE,
                "tags": _arr(TAG, TAGS_MAX),
                **GOVERNANCE,
            },
            ("id",),
        ),
        (
            "memory.history",
            "List audit events for one memory ID.",
            READ,
            {"id": MEMORY_ID, "limit": page, "cursor": CURSOR},
            ("id",),
        ),
        (
            "memory.audit",
            "List bounded store-wide audit events without memory content.",
            READ,
            {
                "memory_id": MEMORY_ID,
                "event_type": _arr(_enum(EVENT_TYPES), len(EVENT_TYPES), default=[]),
                "actor": _s(1, ACTOR_MAX),
                "scope": SCOPE,
                "since": DATE,
                "until": DATE,
                "limit": page,
            },
            (),
        ),
        (
            "memory.forget",
            "Archive or delete a local memory.",
            DESTRUCTIVE,
            {
                "id": MEMORY_ID,
                "expected_revision": _int(1),
                "mode": _enum(("archive", "delete"), default="archive"),
                "confirm": _bool(False),
                "reason": _s(max_len=REASON_MAX),
            },
            ("id",),
        ),
        (
            "memory.forget_many",
            "Preview or apply a filtered bulk archive/delete operation.",
            DESTRUCTIVE,
            {
                "scope": SCOPE,
                "tags": TAGS,
                "all": _bool(False),
                "mode": _enum(("archive", "delete"), default="archive"),
                "confirm": _bool(False),
                "dry_run": _bool(True),
                "reason": _s(max_len=REASON_MAX),
            },
            (),
        ),
        (
            "memory.export",
            "Export local memories as a versioned JSON document and append an export audit event.",
            WRITE,
            {
                "scope": SCOPE,
                "tags": TAGS,
                "include_archived": _bool(False),
                "limit": _int(1, 200, default=100),
                "cursor": CURSOR,
            },
            (),
        ),
        (
            "memory.import",
            "Import local memories from a versioned JSON document.",
            WRITE,
            {"document": DOCUMENT, "scope": SCOPE, "dry_run": _bool(False)},
            ("document",),
        ),
        ("memory.doctor", "Report the local memory MCP environment.", READ, {}, ()),
    ]
    return [
        {
            "name": name,
            "description": text,
            "annotations": hints,
            # No tool runs as an MCP task (2025-11-25 `execution`), as Nuzo's SDK lists them.
            "execution": {"taskSupport": "forbidden"},
            "inputSchema": {"$schema": "http://json-schema.org/draft-07/schema#"}
            | _obj(props, required),
        }
        for name, text, hints, props, required in tools
    ]


def _type_ok(kind: str, value: Any) -> bool:
    return {
        "string": isinstance(value, str),
        "integer": isinstance(value, int) and not isinstance(value, bool),
        "number": isinstance(value, int | float) and not isinstance(value, bool),
        "boolean": isinstance(value, bool),
        "array": isinstance(value, list),
        "object": isinstance(value, dict),
        "null": value is None,
    }[kind]


def validate(schema: Schema, value: Any, path: str = "arguments") -> Any:
    """`value` checked against `schema`, with object defaults filled in; `ToolInputError` if not."""
    if "anyOf" in schema:
        for option in schema["anyOf"]:
            try:
                return validate(option, value, path)
            except ToolInputError:
                continue
        raise ToolInputError(f"{path}: no allowed type matches")
    if "const" in schema:
        if value != schema["const"] or isinstance(value, bool):
            raise ToolInputError(f"{path}: must be {schema['const']!r}")
        return value
    kind = schema.get("type")
    if kind is not None and not _type_ok(kind, value):
        raise ToolInputError(f"{path}: expected {kind}")
    if "enum" in schema and value not in schema["enum"]:
        raise ToolInputError(f"{path}: must be one of {', '.join(schema['enum'])}")
    if isinstance(value, str):
        if utf16_len(value) < schema.get("minLength", 0):
            raise ToolInputError(f"{path}: too short")
        if "maxLength" in schema and utf16_len(value) > schema["maxLength"]:
            raise ToolInputError(f"{path}: too long")
        if "pattern" in schema and not re.search(schema["pattern"], value):
            raise ToolInputError(f"{path}: does not match {schema['pattern']}")
    if kind in ("integer", "number"):
        if value < schema.get("minimum", float("-inf")) or value > schema.get(
            "maximum", float("inf")
        ):
            raise ToolInputError(f"{path}: out of range")
    if isinstance(value, list):
        if len(value) > schema.get("maxItems", len(value)):
            raise ToolInputError(f"{path}: too many items")
        return [validate(schema["items"], item, f"{path}[{i}]") for i, item in enumerate(value)]
    if isinstance(value, dict) and kind == "object":
        props: dict[str, Schema] = schema.get("properties", {})
        extra = set(value) - set(props)
        if extra and schema.get("additionalProperties") is False:
            raise ToolInputError(f"{path}: unknown keys {sorted(extra)}")
        for name in schema.get("required", []):
            if name not in value:
                raise ToolInputError(f"{path}.{name}: required")
        out = {k: v for k, v in value.items() if k not in props}
        for name, sub in props.items():
            if name in value:
                out[name] = validate(sub, value[name], f"{path}.{name}")
            elif "default" in sub:
                out[name] = sub["default"]
        return out
    return value
