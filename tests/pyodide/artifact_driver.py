"""Runs inside Pyodide (via edge_runner.mjs), after edge_driver.py bootstrapped the writer:
the artifact lifecycle through `Default.fetch`, with the `ARTIFACTS` binding a real R2 bucket
of Miniflare (tests/pyodide/r2_binding.mjs) behind the Workers SDK (SPEC.md ART-10).

`main()` returns {"steps": [{"name", "ok", "detail"}, ...]} for test_edge_pyodide.py.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from typing import Any

import driver_support as support
import edge_harness
from driver_support import Step, check, run_steps

params = edge_harness.params.to_py()
PROJECT, WRITER = params["project_id"], params["writer"]
TOKEN = params["writer_token"]
P = f"/v1/projects/{PROJECT}"
PATH = "sessions/s1/artifacts/edge.bin"
DATA = os.urandom(200_000)
state: dict[str, Any] = {}


async def call(method: str, path: str, **kw: Any) -> tuple[int, dict[str, str], bytes]:
    kw.setdefault("token", TOKEN)
    return await support.call(method, path, **kw)


async def ok(method: str, path: str, **kw: Any) -> Any:
    status, _, data = await call(method, path, **kw)
    check(status == 200, f"{method} {path}: {status}: {data[:300]!r}")
    return json.loads(data)


async def refused(method: str, path: str, status: int, code: str, **kw: Any) -> str:
    got, _, data = await call(method, path, **kw)
    body = json.loads(data)
    check((got, body["error"]["code"]) == (status, code), f"{got} {body}")
    return code


def _reserve(command_id: str, data: bytes, **extra: Any) -> dict[str, Any]:
    payload = {"path": PATH, "size_bytes": len(data), "content_type": "text/plain", **extra}
    return {"command_id": command_id, "payload": payload}


async def reserve() -> Any:
    r = await ok("POST", f"{P}/artifact-reservations", json_body=_reserve("edge.r1", DATA))
    state["rid"] = r["reservation_id"]
    again = await ok("POST", f"{P}/artifact-reservations", json_body=_reserve("edge.r1", DATA))
    check(again == r, f"replay {again}")
    return r["expires_at_ms"] > 0


async def upload_to_r2() -> Any:
    path = f"{P}/artifact-reservations/{state['rid']}/body"
    up = await ok("PUT", path, raw=DATA)
    check(up["sha256"] == hashlib.sha256(DATA).hexdigest(), f"observation {up}")
    again = await ok("PUT", path, raw=DATA)  # the conditional create keeps the first body
    check(again == up, f"exact retry {again}")
    other = bytes(reversed(DATA))  # the same length, other bytes (ART-3)
    await refused("PUT", path, 409, "artifact_conflict", raw=other)
    return up["size_bytes"]


async def publish_verifies_the_r2_object() -> Any:
    path = f"{P}/artifact-reservations/{state['rid']}/publish"
    ref = await ok("POST", path, json_body={"command_id": "edge.p1"})
    check(ref["revision"] == 1 and ref["size_bytes"] == len(DATA), f"reference {ref}")
    replay = await ok("POST", path, json_body={"command_id": "edge.p1"})
    check(replay == ref, f"replay {replay}")
    state["ref"] = ref
    return ref["revision"]


async def resolve_and_download_stream() -> Any:
    meta = await ok("GET", f"{P}/artifacts/resolve?path={PATH}")
    check(meta["generation"] == state["ref"]["generation"], f"resolve {meta}")
    ref = state["ref"]
    status, headers, data = await call(
        "POST",
        f"{P}/artifacts/{ref['artifact_id']}/downloads",
        json_body={"revision": ref["revision"]},
    )
    check(status == 200 and data == DATA, f"download {status} {len(data)}")
    check(headers.get("x-aidememo-artifact-sha256") == ref["sha256"], f"headers {headers}")
    return len(data)


async def replacement_needs_the_token() -> Any:
    await refused("POST", f"{P}/artifact-reservations", 409, "artifact_conflict",
                  json_body=_reserve("edge.r2", b"two"))  # fmt: skip
    token = state["ref"]["mutation_token"]
    r = await ok(
        "POST",
        f"{P}/artifact-reservations",
        json_body=_reserve("edge.r3", b"two", mutation_token=token),
    )
    await ok("PUT", f"{P}/artifact-reservations/{r['reservation_id']}/body", raw=b"two")
    ref = await ok(
        "POST",
        f"{P}/artifact-reservations/{r['reservation_id']}/publish",
        json_body={"command_id": "edge.p3"},
    )
    check(ref["artifact_id"] == state["ref"]["artifact_id"] and ref["revision"] == 2, repr(ref))
    return ref["revision"]


async def digest_mismatch_refused_by_r2_observation() -> Any:
    wrong = hashlib.sha256(b"else").hexdigest()
    body = _reserve("edge.r4", b"body", sha256=wrong)
    body["payload"]["path"] = "sessions/s1/canvas.md"
    r = await ok("POST", f"{P}/artifact-reservations", json_body=body)
    return await refused(
        "PUT",
        f"{P}/artifact-reservations/{r['reservation_id']}/body",
        409,
        "artifact_body_mismatch",
        raw=b"body",
    )


async def _tool(name: str, arguments: dict[str, Any]) -> Any:
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": name, "arguments": arguments}}  # fmt: skip
    out = (await ok("POST", f"{P}/mcp", json_body=message))["result"]
    check(out["isError"] is False, f"{name}: {out}")
    return out["structuredContent"]


async def mcp_artifact_write_and_read_through_r2() -> Any:
    body = base64.b64encode(b"# notes from MCP\n").decode()
    args = {"path": "sessions/s1/artifacts/mcp.md", "content_base64": body}
    first = await _tool("artifact_write", args)
    check(first["revision"] == 1, f"write {first}")
    again = await _tool("artifact_write", args)
    check(again == first, f"replay {again}")
    read = await _tool("artifact_read", {"path": "sessions/s1/artifacts/mcp.md"})
    check(base64.b64decode(read["content_base64"]) == b"# notes from MCP\n", f"read {read}")
    return first["revision"]


async def export_and_import_with_bodies_through_r2() -> Any:
    """The tenant leaves with its bodies read from R2 and comes back with them written into
    R2 (ART-12): export, delete the tenant, import, read the current revision again."""
    tenant, admin = params["tenant_id"], params["admin_token"]
    query = "include_bodies=true&include_token_digests=true"
    status, _, data = await call("GET", f"/v1/admin/tenants/{tenant}/export?{query}", token=admin)
    check(status == 200, f"export {status}: {data[:300]!r}")
    kinds = [json.loads(line)["type"] for line in data.splitlines()]
    check(kinds.count("artifact_body") >= 2 and kinds[-1] == "manifest", repr(kinds[-6:]))
    before = await ok("GET", f"{P}/artifacts/resolve?path={PATH}")
    gone = f"/v1/admin/tenants/{tenant}?confirm={tenant}"
    status, _, body = await call("DELETE", gone, token=admin)
    check(status == 200, f"delete {status}: {body[:300]!r}")
    status, _, body = await call("POST", "/v1/admin/import", token=admin, raw=data,
                                 content_type="application/x-ndjson")  # fmt: skip
    check(status == 200, f"import {status}: {body[:300]!r}")
    got, _, back = await call(
        "POST",
        f"{P}/artifacts/{before['artifact_id']}/downloads",
        json_body={"revision": before["revision"]},
    )
    check(got == 200 and hashlib.sha256(back).hexdigest() == before["sha256"], f"{got}")
    return kinds.count("artifact_body")


STEPS: list[tuple[str, Step]] = [
    ("reserve", reserve),
    ("upload_to_r2", upload_to_r2),
    ("publish_verifies_the_r2_object", publish_verifies_the_r2_object),
    ("resolve_and_download_stream", resolve_and_download_stream),
    ("replacement_needs_the_token", replacement_needs_the_token),
    ("digest_mismatch_refused_by_r2_observation", digest_mismatch_refused_by_r2_observation),
    ("mcp_artifact_write_and_read_through_r2", mcp_artifact_write_and_read_through_r2),
    ("export_and_import_with_bodies_through_r2", export_and_import_with_bodies_through_r2),
]


async def main() -> dict[str, Any]:
    edge_harness.reset_rate_limits()  # edge_driver.py spent the window on its own cases
    return {"steps": await run_steps(STEPS)}
