"""The artifact tools (SPEC.md ART-11): `artifact_resolve`, `artifact_read`, `artifact_write`.

`artifact_resolve` is its route's twin like every tool, its `path` argument the route's query
parameter (`aidememo.mcp.twins`), which the other two take as well. The other two carry bodies
inline as base64, which no single route does, so they run the lifecycle service directly
(`Tool.run`), under the same membership, visibility and error codes: `artifact_read` answers the
metadata and `content_base64` of a body of at most 768 KiB (1 MiB of base64); `artifact_write`
reserves (with the current mutation token when the path is published), uploads and publishes a
body of at most 1 MiB of base64. Its command ids derive from the path and the body's SHA-256 (or
`operation_id`), so repeating the identical call replays its first answer. Where the serving
process has no body store both answer `artifact_store_unavailable`; a project object at the edge
lends them one over R2 (`durable_objects.mcp_bodies`)."""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Callable
from typing import Any

from aidememo.domain.command_ids import stable_id
from aidememo.domain.errors import ErrorCode, fail
from aidememo.http.services import Services
from aidememo.mcp.tool import Args, Schema, Tool, Twin
from aidememo.mcp.twins import TWINS, passed_on, query_arguments
from aidememo.service.access import Caller

INLINE_BASE64_MAX = 1 << 20
INLINE_BYTES_MAX = INLINE_BASE64_MAX // 4 * 3

_RESOLVE = TWINS["artifact_resolve"]
_RESOLVE_ARGS, _RESOLVE_REQUIRED = query_arguments(_RESOLVE)
_PATH: Schema = _RESOLVE_ARGS["path"]
_BASE64: Schema = {
    "type": "string",
    "maxLength": INLINE_BASE64_MAX,
    "description": f"The body, base64 (at most {INLINE_BASE64_MAX} characters).",
}


def _read(services: Services, caller: Caller, ctx: Any, args: Args) -> dict[str, Any]:
    artifacts = services.artifacts
    meta = artifacts.resolve(caller, ctx.project_id, args["path"])
    revision = args.get("revision", meta["revision"])
    pub, chunks = artifacts.download(caller, ctx.project_id, meta["artifact_id"], revision)
    if pub.size_bytes > INLINE_BYTES_MAX:
        raise fail(
            ErrorCode.ARTIFACT_UPLOAD_TOO_LARGE,
            f"{pub.size_bytes} bytes is over the inline limit of {INLINE_BYTES_MAX}: use the"
            " downloads route",
        )
    data = b"".join(chunks)
    return {**pub.to_json(revision), "content_base64": base64.b64encode(data).decode()}


def _write(services: Services, caller: Caller, ctx: Any, args: Args) -> dict[str, Any]:
    try:
        data = base64.b64decode(args["content_base64"], validate=True)
    except (binascii.Error, ValueError):
        raise fail(ErrorCode.INVALID_COMMAND, "content_base64 is not base64") from None
    artifacts = services.artifacts
    path = args["path"]
    sha = hashlib.sha256(data).hexdigest()
    base = args.get("operation_id") or stable_id("artw", ctx.project_id, path, sha)
    payload: dict[str, Any] = {
        "path": path,
        "size_bytes": len(data),
        "content_type": args.get("content_type", "application/octet-stream"),
        "sha256": sha,
    }
    r = artifacts.find_reservation(caller, ctx.project_id, base)  # a repeated call
    if r is None:
        token = artifacts.current_token(caller, ctx.project_id, path)
        if token is not None:
            payload["mutation_token"] = token
        r, _ = artifacts.reserve(caller, ctx.project_id, base, payload)
    artifacts.upload(caller, ctx.project_id, r.reservation_id, len(data), iter([data]))
    ref, _ = artifacts.publish(caller, ctx.project_id, r.reservation_id, f"{base}.publish")
    return ref


def artifact_tools(
    answer_schema: Callable[[str], Schema],
    id_schema: Callable[[str], Schema],
) -> tuple[Tool, ...]:
    """The three tools, with the registry's schema helpers."""

    def inline(ctx: Any, args: Args) -> Twin:  # never built: `run` answers the call
        return Twin()

    return (
        Tool(
            "artifact_resolve",
            "The current metadata of the artifact (file body) published at a logical path:"
            " artifact_id, revision, size, content type, sha256 and mutation_token.",
            "artifact_resolve",
            _RESOLVE_ARGS,
            _RESOLVE_REQUIRED,
            write=False,
            output=answer_schema("ArtifactMetadata"),
            build=passed_on(_RESOLVE),
        ),
        Tool(
            "artifact_read",
            "The bytes published at a logical path (base64, at most 768 KiB), with its"
            " metadata; pass revision for an older revision.",
            "artifact_download",
            {"path": _PATH, "revision": {"type": "integer", "minimum": 1}},
            ("path",),
            write=False,
            output={"type": "object"},
            build=inline,
            run=_read,
        ),
        Tool(
            "artifact_write",
            "Publish a file body (base64, at most 1 MiB of it) at a logical path, replacing"
            " what is there; answers the publication (artifact_id, revision, sha256).",
            "artifact_reserve",
            {
                "path": _PATH,
                "content_base64": _BASE64,
                "content_type": {"type": "string", "description": "Lower-case type/subtype."},
                "operation_id": id_schema(
                    "Optional idempotency key. Omit it: the id is derived from the path and"
                    " the body, so repeating the identical call replays its first answer."
                ),
            },
            ("path", "content_base64"),
            write=True,
            output=answer_schema("ArtifactPublication"),
            build=inline,
            run=_write,
        ),
    )
